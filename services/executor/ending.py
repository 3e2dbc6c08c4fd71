"""How a run ends in the executor: a step that ends it, a StartRun nobody can run, and a
run whose serving raised (a poison pill: failed, not retried by every instance in turn).

A mixin of ``Executor``: these paths close a run's chain and tell admission and the worklist,
through the same outputs as every step. The engine decides what ends a run (the failure
steps and the task to withdraw are ``runplane.core.engine``'s); this module only applies it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from runplane.core import Runtime, Step
from runplane.core.agents import EffectDecl
from runplane.core.engine import Command, apply_step, fail_from_snapshot, fail_unstartable
from runplane.core.limits import Limits
from runplane.core.policy import Policy
from runplane.kafka.partition import partition_for
from runplane.wire import (
    JournalKind,
    JournalRecord,
    ResultEntry,
    RunStatus,
    SessionSnapshot,
    StartRun,
)
from services.executor.outputs import Outputs
from services.executor.policy import count_refusal
from services.executor.state import ENDED, PartitionState, results_key

log = logging.getLogger("services.executor.executor")


class EngineOptions(TypedDict):
    """What every runtime of one executor is built with (``Runtime.start`` / ``restore``)."""

    calendars: Any
    tools: Mapping[str, EffectDecl]
    limits: Limits
    policy: Policy | None  # the deployment policy (services.executor.policy)


@dataclass
class Resident:
    """A run's runtime kept in memory between messages."""

    runtime: Runtime
    partition: int
    last_active: float


class RunEnding(Outputs):
    """Ending runs (a mixin of ``Executor``, which owns the state declared here)."""

    _parts: dict[int, PartitionState]
    _residents: dict[str, Resident]
    _npart: int

    def _fail_unstartable(
        self,
        start: StartRun,
        reason: str,
        now_ms: int,
        p: int,
        *,
        error_type: str = "UnknownCapability",
    ) -> None:
        """A StartRun nobody can run: the engine closes its chain (RUN_FAILED) and tells
        admission."""
        step = fail_unstartable(start, reason, now_ms=now_ms, error_type=error_type)
        self._apply_ending(start.session_id, p, step, previous=None)

    def _apply_ending(self, sid: str, p: int, step: Step, previous: SessionSnapshot | None) -> None:
        """Apply a step of the engine's that ends a run it could not serve (records and
        commands, no results, no live calls): the same ``apply_step`` as every step."""
        parked = previous.parked_on if previous is not None else None
        apply_step(step, RunOut(self, sid, p), parked_before=parked, clock=self._wall_ms)

    def _ended(self, sid: str, status: RunStatus) -> None:
        self._metrics.runs_ended.labels(str(status).lower()).inc()
        res = self._residents.pop(sid, None)
        if res is not None:
            res.runtime.close()
        part = self._parts.get(partition_for(sid, self._npart))
        if part is not None:
            part.end(sid, status)

    def _poisoned(
        self,
        sid: str,
        p: int,
        before: SessionSnapshot | None,
        mark: tuple[int, int],
        exc: Exception,
        where: str,
        *,
        start: StartRun | None = None,
    ) -> None:
        """Serving run ``sid`` raised: undo the half-applied work and fail the run, so that the
        same input cannot crash every instance in turn (a poison pill). The run's chain goes
        on from ``before`` — the last snapshot applied before this work began."""
        log.exception("serving run %s raised (%s); failing the run", sid, where, exc_info=exc)
        self._metrics.poisoned.labels(where).inc()
        self._batch.rollback(mark)
        res = self._residents.pop(sid, None)
        if res is not None:
            res.runtime.close()
        part = self._parts.get(p)
        if part is None:
            return
        reason = f"executor error while serving the run ({where}): {type(exc).__name__}: {exc}"
        if before is None:
            part.sessions.pop(sid, None)
            part.forget_results(sid)
            if start is not None:
                self._fail_unstartable(
                    start, reason, self._wall_ms(), p, error_type="ExecutorError"
                )
            return
        part.ended.pop(sid, None)
        part.sessions[sid] = before
        if before.status not in ENDED:
            self._fail_from(before, p, reason)

    def _fail_from(self, snap: SessionSnapshot, p: int, reason: str) -> None:
        """Close a run's chain with RUN_FAILED after ``snap`` and tell admission and the
        worklist (a task it was parked on is withdrawn): the engine's step, applied."""
        step = fail_from_snapshot(snap, reason, now_ms=self._wall_ms())
        self._apply_ending(snap.session_id, p, step, previous=snap)


class RunOut:
    """One run's step, carried into the executor's group-commit batch (a ``StepSink``)."""

    __slots__ = ("_ex", "_now", "_p", "_sid")

    def __init__(self, executor: RunEnding, sid: str, p: int) -> None:
        self._ex = executor
        self._sid = sid
        self._p = p
        self._now = time.monotonic()

    def put_records(self, records: tuple[JournalRecord, ...]) -> None:
        ex, sid, now = self._ex, self._sid, self._now
        for record in records:
            ex._out("journal", sid, record, now)
            if record.kind is JournalKind.EFFECT_IN_DOUBT:
                ex._metrics.in_doubt.labels(record.attrs.get("recovery", "unknown")).inc()
            count_refusal(record)  # the sink gate's refusals, by sink and reason

    def put_results(self, entries: tuple[ResultEntry, ...]) -> None:
        ex, sid, p, now = self._ex, self._sid, self._p, self._now
        results = ex._parts[p].results_of(sid)
        for entry in entries:
            key = results_key(sid, entry.era, entry.call_seq)
            ex._out("results", key, entry, now, partition=p)
            results[(entry.era, entry.call_seq)] = entry

    def put_commands(self, commands: tuple[Command, ...]) -> None:
        for command in commands:
            self._ex._out_command(command, self._now)

    def put_snapshot(self, snapshot: SessionSnapshot) -> None:
        self._ex._out("sessions", self._sid, snapshot, self._now)
        self._ex._parts[self._p].sessions[self._sid] = snapshot

    def run_ended(self, status: RunStatus) -> None:
        self._ex._ended(self._sid, status)
