"""How a run ends in the executor when the engine could not serve it: a StartRun nobody can
run, and a run whose serving raised (a poison pill: failed, not retried by every instance in
turn).

These paths close a run's chain and tell admission and the worklist through the same outbox
as every step (``RunSink``). The engine decides what ends a run (the failure steps and the
task to withdraw are ``runplane.core.engine``'s); ``RunEnds`` only applies them. A run that a
step of its own ends (completed, failed by its agent, quarantined) ends in the sink
(``RunSink.run_ended`` → ``RunTable.end``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from runplane.core import Step
from runplane.core.engine import apply_step, fail_from_snapshot, fail_unstartable
from runplane.wire import SessionSnapshot, StartRun
from services.executor.metrics import ExecutorMetrics
from services.executor.outbox import Mark, Outbox, RunSink
from services.executor.state import ENDED, RunTable

log = logging.getLogger("services.executor.executor")


class RunEnds:
    """Failing the runs the engine could not serve, through the outbox."""

    def __init__(
        self,
        table: RunTable,
        outbox: Outbox,
        *,
        metrics: ExecutorMetrics,
        wall_ms: Callable[[], int],
    ) -> None:
        self._table = table
        self._outbox = outbox
        self._metrics = metrics
        self._wall_ms = wall_ms

    def fail_unstartable(
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
        self._apply(start.session_id, p, step)

    def poisoned(
        self,
        run_id: str,
        p: int,
        before: SessionSnapshot | None,
        mark: Mark,
        exc: Exception,
        where: str,
        *,
        start: StartRun | None = None,
    ) -> None:
        """Serving run ``run_id`` raised: undo the half-applied work and fail the run, so that the
        same input cannot crash every instance in turn (a poison pill). The run's chain goes
        on from ``before`` — the last snapshot applied before this work began."""
        log.exception("serving run %s raised (%s); failing the run", run_id, where, exc_info=exc)
        self._metrics.poisoned.labels(where).inc()
        self._outbox.rollback(mark)
        self._table.evict(run_id)
        part = self._table.parts.get(p)
        if part is None:
            return
        reason = f"executor error while serving the run ({where}): {type(exc).__name__}: {exc}"
        if before is None:
            part.sessions.pop(run_id, None)
            part.forget_results(run_id)
            if start is not None:
                self.fail_unstartable(start, reason, self._wall_ms(), p, error_type="ExecutorError")
            return
        part.ended.pop(run_id, None)
        part.sessions[run_id] = before
        if before.status not in ENDED:
            self.fail_from(before, p, reason)

    def fail_from(self, snap: SessionSnapshot, p: int, reason: str) -> None:
        """Close a run's chain with RUN_FAILED after ``snap`` and tell admission and the
        worklist (a task it was parked on is withdrawn): the engine's step, applied."""
        step = fail_from_snapshot(snap, reason, now_ms=self._wall_ms())
        self._apply(snap.session_id, p, step)

    def _apply(self, run_id: str, p: int, step: Step) -> None:
        """Apply a step that ends a run the engine could not serve (records and commands, no
        results, no live calls): the same ``apply_step`` as every step."""
        apply_step(step, RunSink(self._outbox, self._table, run_id, p))
