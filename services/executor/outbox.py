"""Where the executor's records go: every output lands in the current group-commit batch.

A mixin of ``Executor`` (it shares the executor's batch, serde and topic names): routing a
core command to its topic, queueing a record (a table row last-wins within a batch), and
dead-lettering an inbox record.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable

from confluent_kafka import Message

from runplane.errors import TerminalError
from runplane.kafka.deadletter import dead_letter
from runplane.signing import SigningKey
from runplane.wire import (
    AdmissionRequest,
    CancelDeadline,
    CloseCase,
    CloseTask,
    GetCaseState,
    JournalRecord,
    MeetDeadline,
    OpenTask,
    PutCaseState,
    Record,
    RegisterDeadline,
    RunStatusUpdate,
    Serde,
    Signal,
    StartRun,
)
from services.executor.batch import Batch, Out
from services.executor.metrics import ExecutorMetrics
from services.executor.topology import SERVICE

log = logging.getLogger("services.executor.executor")

_CASE_COMMANDS = (
    GetCaseState,
    PutCaseState,
    RegisterDeadline,
    MeetDeadline,
    CancelDeadline,
    CloseCase,
)


class Outputs:
    """Queueing the executor's records into the group-commit batch (a mixin)."""

    _serde: Serde
    _topic: dict[str, str]
    _metrics: ExecutorMetrics
    _wall_ms: Callable[[], int]
    _emitter_key: SigningKey | None
    # The trace context of the step being applied, as headers (None: not traced).
    _trace: list[tuple[str, bytes]] | None

    @property
    def _batch(self) -> Batch:
        raise NotImplementedError  # the executor's current group-commit batch

    def _out_command(self, command: Record, now: float) -> None:
        if isinstance(command, OpenTask):
            if self._trace:
                # The worklist stores the step's context with the task; the decision joins it.
                parent = dict(self._trace).get("traceparent", b"").decode("latin-1") or None
                command = dataclasses.replace(command, trace_parent=parent)
            self._out("tasks.commands", command.task_id, command, now)
        elif isinstance(command, CloseTask):  # the core withdraws a task carried across eras
            self._out("tasks.commands", command.task_id, command, now)
        elif isinstance(command, _CASE_COMMANDS):
            self._out("cases.commands", command.case_id, command, now)
        elif isinstance(command, RunStatusUpdate):
            # Last wins within a transaction: admission keeps only a run's latest status, and
            # nobody can read the RUNNING of a run whose COMPLETED commits with it. A run that
            # starts and ends in one batch costs admission one record instead of two.
            self._out("admission", command.admission_key, command, now, last_wins=True)
        elif isinstance(command, AdmissionRequest):  # a commission's child run
            self._out("admission", command.admission_key, command, now, signed=True)
        elif isinstance(command, JournalRecord):  # a successor's seq 0 (continue-as-new)
            self._out("journal", command.session_id, command, now)
        elif isinstance(command, (StartRun, Signal)):
            # A successor's start, on its own partition; a child's result, to its parent.
            self._out("runs.inbox", command.session_id, command, now)
        else:
            # The core's Command union grew and this shell was not told: losing a command
            # silently would strand a run, so stop and let the supervisor show the error.
            raise TerminalError(f"no route for command {type(command).__name__}")

    def _out(
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
        if topic == "sessions":
            # Encoded at commit, once per run per batch: later steps replace earlier rows.
            lazy = functools.partial(self._serde.encode, topic, record)
            out = Out(self._topic[topic], key.encode("utf-8"), None, partition, lazy=lazy)
            self._batch.add(out, now, last_wins=True)
            return
        value = self._serde.encode(topic, record)
        raw_key = key.encode("utf-8")
        headers = self._trace
        if signed and self._emitter_key is not None:
            # Signed as an emitter signs (admission checks it against the record's timestamp).
            signature = self._emitter_key.headers(raw_key, value, self._wall_ms())
            headers = [*(headers or ()), *((k, v) for k, v in signature if isinstance(v, bytes))]
        out = Out(self._topic[topic], raw_key, value, partition, headers=headers)
        self._batch.add(out, now, last_wins=last_wins)

    def _dead_letter(self, msg: Message, reason: str, kind: str) -> None:
        self._metrics.deadletters.labels(kind).inc()
        letter = dead_letter(msg, reason, SERVICE, at_ms=self._wall_ms())
        key = letter.key or b""
        value = self._serde.encode("deadletter", letter)
        self._batch.add(Out(self._topic["deadletter"], key, value), time.monotonic())
        log.info("dead-lettered inbox record", extra={"reason": reason})
