"""The sessions of one partition, indexed by when their timers are due.

``TimedSessions`` is the partition's ``sessions`` table (run id → latest snapshot) that also
keeps a heap of ``(due, run id)``: every snapshot put in it that holds a timer (``timer_due``)
is pushed, and ``due(now)`` pops what has come — O(k log n) for k due timers among n runs,
where a scan of every restored snapshot was O(n) each housekeeping turn (a partition with
100,000 parked runs visited 100,000 snapshots twice a second to find the few due).

The heap is lazy: a snapshot replaced by one with another timer, or none, or a run removed,
leaves its old entry behind, which is dropped when it surfaces (its due no longer the run's).
A due timer stays due until its run's snapshot changes — a wake that could not be applied is
offered again on the next turn, as the scan did — so ``due`` pushes back what it returns.
Nothing here is durable: the index is rebuilt from the snapshots as they are restored.
"""

from __future__ import annotations

import heapq
from typing import Any

from runplane.core.engine import timer_due
from runplane.wire import SessionSnapshot

__all__ = ["TimedSessions"]

_MISSING: Any = object()


class TimedSessions(dict[str, SessionSnapshot]):
    """A run id → snapshot dict whose writes keep the timer heap (module docstring). Writes
    go through ``[]=``, ``pop`` and ``del`` (the only ones the executor uses)."""

    __slots__ = ("_due", "_heap")

    def __init__(self) -> None:
        super().__init__()
        self._heap: list[tuple[int, str]] = []
        self._due: dict[str, int] = {}

    def __setitem__(self, run_id: str, snapshot: SessionSnapshot) -> None:
        super().__setitem__(run_id, snapshot)
        due = timer_due(snapshot)
        if due is None:
            self._due.pop(run_id, None)
        elif self._due.get(run_id) != due:
            self._due[run_id] = due
            heapq.heappush(self._heap, (due, run_id))

    def __delitem__(self, run_id: str) -> None:
        super().__delitem__(run_id)
        self._due.pop(run_id, None)

    def pop(self, run_id: str, default: Any = _MISSING) -> Any:
        self._due.pop(run_id, None)
        if default is _MISSING:
            return super().pop(run_id)
        return super().pop(run_id, default)

    def due(self, now_ms: int) -> list[str]:
        """The runs whose timer is due at ``now_ms``, soonest first."""
        found: list[tuple[int, str]] = []
        seen: set[str] = set()
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            entry = heapq.heappop(heap)
            # A run whose timer went and came back at the same instant was pushed twice: the
            # second entry is dropped here, like any entry no longer the run's.
            if self._due.get(entry[1]) == entry[0] and entry[1] not in seen:
                seen.add(entry[1])
                found.append(entry)
        for entry in found:  # still due until the run's snapshot changes
            heapq.heappush(heap, entry)
        return [run_id for _, run_id in found]
