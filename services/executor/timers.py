"""Durable timers in the executor: wake the runs whose journaled instant has come.

A run's timer (``ctx.sleep``, a wait's timeout) is its snapshot's ``wake_at_ms``, resolved
once by the engine and journaled. The executor owning the run's partition scans its restored
snapshots (``TimerScan._fire_timers``, from the housekeeping turn) and delivers a Wake to every
run whose instant has passed; the engine records the wake and the run goes on. Nothing is
kept besides the snapshots, so a crash, a restart or a rebalance loses no timer: the next
owner restores the snapshots and fires what is due (late by at most the restore and one
housekeeping interval). A wake is delivered in-process, not through the inbox; its step
commits with the next group commit like a live call's outcome, and a wake lost to a crash
before that commit is simply due again on restore.

A mixin of ``Executor`` (like ``ending.RunEnding``), which owns the state and the methods
declared here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from runplane.core import Runtime, Step
from runplane.kafka.txn import TxnAbortable, TxnFatal
from runplane.wire import SessionSnapshot, Wake
from services.executor.batch import Batch
from services.executor.ending import Resident, RunEnding
from services.executor.state import PartitionState

__all__ = ["TimerScan", "due_timers"]


def due_timers(parts: Mapping[int, PartitionState], now_ms: int) -> Iterator[tuple[str, int]]:
    """(session, partition) of every live run whose timer is due at ``now_ms``. Pure."""
    for p, part in parts.items():
        for sid, snap in part.sessions.items():
            if snap.wake_at_ms is not None and snap.wake_at_ms <= now_ms:
                yield sid, p


class TimerScan(RunEnding):
    """Firing due timers (a mixin of ``Executor``, which defines what is declared here)."""

    _wall_ms: Callable[[], int]

    @property
    def _batch(self) -> Batch:
        raise NotImplementedError

    def _rebuild(self, sid: str, p: int, snap: SessionSnapshot) -> Resident | None:
        raise NotImplementedError

    def _apply(
        self, sid: str, p: int, runtime: Runtime, step: Step, previous: SessionSnapshot | None
    ) -> None:
        raise NotImplementedError

    def _fire_timers(self) -> None:
        now_ms = self._wall_ms()
        for sid, p in list(due_timers(self._parts, now_ms)):
            snap = self._parts[p].sessions[sid]
            mark = self._batch.mark()
            try:
                res = self._residents.get(sid) or self._rebuild(sid, p, snap)
                if res is None or res.runtime.ended:
                    continue  # the rebuild ended it (or cannot serve it): nothing to wake
                previous = self._parts[p].sessions.get(sid)
                wake = Wake(session_id=sid, reason="timer", sent_ms=now_ms)
                step = res.runtime.deliver(wake, now_ms=now_ms)
                if step.records and snap.wake_at_ms is not None:
                    self._metrics.timer_lateness.observe(max(0, now_ms - snap.wake_at_ms) / 1000)
                if step.rejected is None:
                    self._apply(sid, p, res.runtime, step, previous=previous)
            except (TxnAbortable, TxnFatal):
                raise
            except Exception as exc:
                self._poisoned(sid, p, snap, mark, exc, "timer")
