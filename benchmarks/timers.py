"""The executor's timer turn: finding the due timers among many parked runs.

    python -m benchmarks.timers        # prints the numbers; run() returns them

A partition's sessions table holds every restored run's snapshot; twice a second the timer
turn asks which runs' timers are due. ``scan``: what it did before, a look at every
snapshot (``timer_due`` of each); ``index``: the timer index it uses now
(``services/executor/timerindex.TimedSessions``, a lazy heap), the same question. Both on the
same table of ``RUNPLANE_BENCH_TIMER_RUNS`` runs (default 100,000) of which ten are due, half
the others parked with a timer far in the future and half without one. In memory, no Kafka;
numbers only (nothing here asserts a timing).
"""

from __future__ import annotations

import os
import time
from typing import Any

from runplane.config import Settings
from runplane.core.engine import timer_due
from runplane.wire import RunStatus, SessionSnapshot, TenantId
from services.executor.timerindex import TimedSessions

DUE = 10
TURNS = 20


def parked_snapshot(run_id: str, due: int | None) -> SessionSnapshot:
    """A parked run's snapshot whose timer is due at ``due`` (None: no timer)."""
    return SessionSnapshot(
        session_id=run_id,
        capability="bench.timer",
        status=RunStatus.PARKED,
        era=0,
        next_seq=1,
        last_hash="0" * 64,
        admission_key=f"k-{run_id}",
        tenant=TenantId("bench"),
        initiator="bench",
        input_json="{}",
        started_ms=0,
        updated_ms=0,
        wake_at_ms=due,
    )


def _per_turn_ms(fn: Any, now: int) -> tuple[float, int]:
    found = 0
    best = float("inf")
    for _ in range(TURNS):
        start = time.perf_counter()
        found = len(fn(now))
        best = min(best, time.perf_counter() - start)
    return best * 1000, found


def run(settings: Settings | None = None) -> dict[str, Any]:
    runs = int(os.environ.get("RUNPLANE_BENCH_TIMER_RUNS", "100000"))
    every = max(1, runs // DUE)
    plain: dict[str, SessionSnapshot] = {}
    indexed = TimedSessions()
    for i in range(runs):
        due = 1_000 + i if i % every == 0 else (None if i % 2 else 10**12)
        snap = parked_snapshot(f"r-{i}", due)
        plain[snap.session_id] = snap
        indexed[snap.session_id] = snap

    def scan(now: int) -> list[str]:
        return [k for k, s in plain.items() if (d := timer_due(s)) is not None and d <= now]

    now = 10**9
    scan_ms, scan_found = _per_turn_ms(scan, now)
    index_ms, index_found = _per_turn_ms(indexed.due, now)
    if scan_found != index_found:
        raise AssertionError(f"the index found {index_found} due timers, the scan {scan_found}")
    return {
        "runs": runs,
        "due": index_found,
        "scan_ms_per_turn": round(scan_ms, 3),
        "index_ms_per_turn": round(index_ms, 4),
        "scan_over_index": round(scan_ms / index_ms, 1) if index_ms else None,
    }


def main() -> None:
    for key, value in run().items():
        print(f"{key:>18}  {value}")


if __name__ == "__main__":
    main()
