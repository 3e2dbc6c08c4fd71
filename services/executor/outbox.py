"""The outbox: everything the executor writes lands in the current group-commit batch.

``Outbox`` queues records (a table row last-wins within a batch), routes a run's commands by
the one command table (``runplane.kafka.routes``), signs what its reader checks, and
dead-letters an inbox record it cannot serve. Nothing here produces to Kafka: the batch is
committed as one transaction with the inbox positions (``committer.GroupCommit``).

``RunSink`` is how one step of a run reaches it (the engine's ``StepSink``): the step's chain
records, results, commands and snapshot go into the outbox and, in the same motion, into the
run table, so what the executor serves next is what the batch will make durable.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Message

from runplane.core.engine import Command
from runplane.kafka.deadletter import dead_letter
from runplane.kafka.routes import route
from runplane.signing.admission import SigningKey
from runplane.wire import (
    JournalKind,
    JournalRecord,
    OpenTask,
    Record,
    ResultEntry,
    RunStatus,
    Serde,
    SessionSnapshot,
    StreamKind,
)
from services.executor.batch import Out
from services.executor.committer import GroupCommit
from services.executor.metrics import ExecutorMetrics
from services.executor.policy import count_refusal
from services.executor.state import RunTable, results_key
from services.executor.streaming import RunStreams
from services.executor.topology import SERVICE

log = logging.getLogger("services.executor.executor")

Mark = tuple[int, int]  # where the batch stood (``Batch.mark``), to roll a failed run back


class Outbox:
    """Queueing the executor's records into the group-commit batch being filled."""

    def __init__(
        self,
        group: GroupCommit,
        serde: Serde,
        topics: Mapping[str, str],
        *,
        metrics: ExecutorMetrics,
        wall_ms: Callable[[], int],
        emitter_key: SigningKey | None,
        streams: RunStreams | None = None,
    ) -> None:
        self._group = group  # its ``batch`` is a new one after every seal: read it each time
        self._serde = serde
        self._topic = topics
        self._metrics = metrics
        self._wall_ms = wall_ms
        self._emitter_key = emitter_key
        self._streams = streams  # the live stream's facts, published once committed
        # The trace context of the step being applied, as headers (None: not traced); set by
        # the loop around a message or a live call's outcome.
        self.trace: list[tuple[str, bytes]] | None = None

    def record(
        self,
        topic: str,
        key: str,
        record: Record,
        now: float,
        *,
        partition: int | None = None,
        signed: bool = False,
        last_wins: bool = False,
    ) -> None:
        """Queue ``record`` on the logical ``topic`` under ``key``."""
        batch = self._group.batch
        if topic == "sessions":
            # Encoded at commit, once per run per batch: later steps replace earlier rows.
            lazy = functools.partial(self._serde.encode, topic, record)
            out = Out(self._topic[topic], key.encode("utf-8"), None, partition, lazy=lazy)
            batch.add(out, now, last_wins=True)
            return
        value = self._serde.encode(topic, record)
        raw_key = key.encode("utf-8")
        headers = self.trace
        if signed and self._emitter_key is not None:
            # Signed as an emitter signs (admission checks it against the record's timestamp).
            signature = self._emitter_key.headers(raw_key, value, self._wall_ms())
            headers = [*(headers or ()), *((k, v) for k, v in signature if isinstance(v, bytes))]
        out = Out(self._topic[topic], raw_key, value, partition, headers=headers)
        batch.add(out, now, last_wins=last_wins)

    def command(self, command: Command, now: float) -> None:
        """Queue a command of a run's step where the command table routes it."""
        row = route(command)
        if self.trace and isinstance(command, OpenTask):
            # The worklist stores the step's context with the task; the decision joins it.
            parent = dict(self.trace).get("traceparent", b"").decode("latin-1") or None
            command = dataclasses.replace(command, trace_parent=parent)
        self.record(
            row.topic, row.key(command), command, now, signed=row.signed, last_wins=row.last_wins
        )

    def journal(self, session_id: str, records: tuple[JournalRecord, ...], now: float) -> None:
        """Queue a step's chain records, counted by what they say (in doubt, gate refusals)."""
        for record in records:
            self.record("journal", session_id, record, now)
            if record.kind is JournalKind.EFFECT_IN_DOUBT:
                self._metrics.in_doubt.labels(record.attrs.get("recovery", "unknown")).inc()
            count_refusal(record)  # the sink gate's refusals, by sink and reason
        if self._streams is not None:
            # A watcher is told a fact (parked, refused, ended) once it is durable.
            self.after_commit(functools.partial(self._streams.journaled, session_id, records), now)

    def progress(self, session_id: str, era: int, notes: list[dict[str, Any]]) -> None:
        """Publish an agent's progress notes (``ctx.progress``) on the run's live stream at
        once: ephemeral, outside the batch, never journaled."""
        if self._streams is None or not notes:
            return
        stream = self._streams.facts(session_id, era)
        for note in notes:
            stream.emit(StreamKind.PROGRESS, note)

    def tombstone(self, topic: str, key: str, partition: int, now: float) -> None:
        """Queue the deletion of a table row (an erased body)."""
        self._group.batch.add(Out(self._topic[topic], key.encode("utf-8"), None, partition), now)

    def dead_letter(self, msg: Message, reason: str, kind: str) -> None:
        """Queue ``msg`` on the dead-letter topic with ``reason``; its offset commits as
        consumed with the batch, so the same record is not served again."""
        self._metrics.deadletters.labels(kind).inc()
        letter = dead_letter(msg, reason, SERVICE, at_ms=self._wall_ms())
        key = letter.key or b""
        value = self._serde.encode("deadletter", letter)
        self._group.batch.add(Out(self._topic["deadletter"], key, value), time.monotonic())
        log.info("dead-lettered inbox record", extra={"reason": reason})

    def after_commit(self, fn: Callable[[], None], now: float) -> None:
        """Run ``fn`` once the batch being filled has committed (never after an abort)."""
        self._group.batch.after_commit(fn, now)

    def mark(self) -> Mark:
        return self._group.batch.mark()

    def rollback(self, mark: Mark) -> None:
        """Drop what was queued since ``mark`` (the work of a run whose serving raised)."""
        self._group.batch.rollback(mark)


class RunSink:
    """One step of one run, carried into the outbox and the run table (a ``StepSink``)."""

    __slots__ = ("_now", "_outbox", "_p", "_run_id", "_table")

    def __init__(self, outbox: Outbox, table: RunTable, run_id: str, p: int) -> None:
        self._outbox = outbox
        self._table = table
        self._run_id = run_id
        self._p = p
        self._now = time.monotonic()

    def put_records(self, records: tuple[JournalRecord, ...]) -> None:
        self._outbox.journal(self._run_id, records, self._now)

    def put_results(self, entries: tuple[ResultEntry, ...]) -> None:
        # Held first, produced second: a slot that holds another call's result refuses the
        # entry (``SlotTaken``) before anything reaches the compacted ``results`` topic.
        outbox, run_id, p, now = self._outbox, self._run_id, self._p, self._now
        part = self._table.parts[p]
        for entry in entries:
            part.put_result(entry)
            outbox.record(
                "results", results_key(run_id, entry.era, entry.call_seq), entry, now, partition=p
            )

    def put_commands(self, commands: tuple[Command, ...]) -> None:
        for command in commands:
            self._outbox.command(command, self._now)

    def put_snapshot(self, snapshot: SessionSnapshot) -> None:
        self._outbox.record("sessions", self._run_id, snapshot, self._now)
        self._table.parts[self._p].sessions[self._run_id] = snapshot

    def run_ended(self, status: RunStatus) -> None:
        self._table.end(self._run_id, status)
