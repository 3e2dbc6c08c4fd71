"""How a run ends in the executor: a step that ends it, a StartRun nobody can run, and a
run whose serving raised (a poison pill: failed, not retried by every instance in turn).

A mixin of ``Executor``: these paths close a run's chain and tell admission and the worklist,
through the same outputs as every step. The engine decides what ends a run (the failure
steps and the task to withdraw are ``runplane.core.engine``'s); this module only applies it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from runplane.core import Runtime, Step
from runplane.core.engine import fail_from_snapshot, fail_unstartable, withdrawal
from runplane.kafka.partition import partition_for
from runplane.wire import (
    SessionSnapshot,
    StartRun,
)
from services.executor.outputs import Outputs
from services.executor.settings import ExecutorSettings
from services.executor.state import ENDED, PartitionState

log = logging.getLogger("services.executor.executor")


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
    settings: ExecutorSettings

    def _retain_until(self) -> int | None:
        """When a run ending now has its bodies tombstoned (None: never; results retention)."""
        ms = self.settings.retention_ms
        return None if ms is None else self._wall_ms() + ms

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
        commands, no results, no live calls), in the order ``Executor._apply`` uses."""
        now = time.monotonic()
        for record in step.records:
            self._out("journal", sid, record, now)
        for command in step.commands:
            self._out_command(command, now)
        self._out("sessions", sid, step.snapshot, now)
        self._parts[p].sessions[sid] = step.snapshot
        self._ended(sid, step, previous, now)

    def _ended(self, sid: str, step: Step, previous: SessionSnapshot | None, now: float) -> None:
        status = step.end
        assert status is not None
        self._metrics.runs_ended.labels(str(status).lower()).inc()
        parked = previous.parked_on if previous is not None else None
        close = withdrawal(parked, step, clock=self._wall_ms)
        if close is not None:
            # The run ended while a person was asked something: withdraw the task.
            self._out("tasks.commands", close.task_id, close, now)
        res = self._residents.pop(sid, None)
        if res is not None:
            res.runtime.close()
        part = self._parts.get(partition_for(sid, self._npart))
        if part is not None:
            part.end(sid, status, snapshot=step.snapshot, retain_until_ms=self._retain_until())

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
