"""Durable timers in the executor: wake the runs whose journaled instant has come.

A run's timer (``ctx.sleep``, a wait's timeout) is in its snapshot (``timer_due`` reads it),
resolved once by the engine and journaled. The executor owning the run's partition finds the
due ones in its sessions' timer index (``timerindex.TimedSessions``: no scan of every
snapshot) from the housekeeping turn (``Timers.fire``) and delivers a Wake to every run whose
instant has passed; the engine records the wake and the run goes on. Nothing is
kept besides the snapshots, so a crash, a restart or a rebalance loses no timer: the next
owner restores the snapshots and fires what is due (late by at most the restore and one
housekeeping interval). A wake is delivered in-process, not through the inbox; its step
commits with the next group commit like a live call's outcome, and a wake lost to a crash
before that commit is simply due again on restore.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from runplane.core.engine import timer_due
from runplane.kafka.txn import TxnAbortable, TxnFatal
from runplane.wire import Wake
from services.executor.ending import RunEnds
from services.executor.metrics import ExecutorMetrics
from services.executor.outbox import Outbox
from services.executor.state import PartitionState, RunTable
from services.executor.stepping import StepApplier

__all__ = ["Timers", "due_timers"]


def due_timers(parts: Mapping[int, PartitionState], now_ms: int) -> Iterator[tuple[str, int]]:
    """(session, partition) of every live run whose timer is due at ``now_ms``, from each
    partition's timer index."""
    for p, part in parts.items():
        for run_id in part.sessions.due(now_ms):
            yield run_id, p


class Timers:
    """Firing the due timers of the runs in the run table (from the housekeeping turn)."""

    def __init__(
        self,
        table: RunTable,
        steps: StepApplier,
        outbox: Outbox,
        ends: RunEnds,
        *,
        metrics: ExecutorMetrics,
        wall_ms: Callable[[], int],
    ) -> None:
        self._table = table
        self._steps = steps
        self._outbox = outbox
        self._ends = ends
        self._metrics = metrics
        self._wall_ms = wall_ms

    def fire(self) -> None:
        """Deliver a Wake to every run whose timer is due; what raises fails that run."""
        now_ms = self._wall_ms()
        parts = self._table.parts
        for run_id, p in list(due_timers(parts, now_ms)):
            snap = parts[p].sessions[run_id]
            mark = self._outbox.mark()
            try:
                res = self._table.residents.get(run_id) or self._steps.rebuild(run_id, p, snap)
                if res is None or res.runtime.ended:
                    continue  # the rebuild ended it (or cannot serve it): nothing to wake
                wake = Wake(session_id=run_id, reason="timer", sent_ms=now_ms)
                step = res.runtime.deliver(wake, now_ms=now_ms)
                due = timer_due(snap)
                if step.records and due is not None:
                    self._metrics.timer_lateness.observe(max(0, now_ms - due) / 1000)
                if step.rejected is None:
                    self._steps.apply(run_id, p, res.runtime, step)
            except (TxnAbortable, TxnFatal):
                raise
            except Exception as exc:
                self._ends.poisoned(run_id, p, snap, mark, exc, "timer")
