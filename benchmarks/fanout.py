"""Fan-out inside one run vs the same calls one after another, on the real broker.

One executor (in this process) runs ``plan.lookup`` — N read-only tool calls issued as one
ready set (``ctx.parallel``) — and ``plan.sequential`` — the same N calls awaited one by one
(``examples/plan_triage.py``). Each call sleeps ``SLOW_S``. Reported per N: the wall time from
admission to COMPLETED of each (median of ``REPEAT`` runs), their ratio, and the most calls
the tool saw in flight at once (``max_overlap``: N when the branches really overlap, 1 for
the sequential run). The sequential run is the baseline, measured in the same run.

    python -m benchmarks.fanout
"""

from __future__ import annotations

import statistics
import threading
from typing import Any

import examples.plan_triage  # noqa: F401  (registers the plan.* agents and their tools)
from benchmarks.executor import CompletionWatch, scratch_topics
from runplane.config import Settings
from runplane.core import REGISTRY
from runplane.providers import TOOLS, FunctionTool
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, executor_thread, plain_producer

SLOW_S = 0.2
SIZES = (4, 16)
REPEAT = 3


class Overlap:
    """Counts the slow tool's calls in flight, and the most seen at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.max = 0

    async def call(self, i: int, slow_s: float = 0.0) -> dict[str, Any]:
        with self._lock:
            self.now += 1
            self.max = max(self.max, self.now)
        try:
            return await TOOLS["scoring/slow_lookup"].fn(i=i, slow_s=slow_s)  # type: ignore[no-any-return]
        finally:
            with self._lock:
                self.now -= 1


def _timed(
    producer: Any, settings: Settings, watch: CompletionWatch, capability: str, n: int
) -> float:
    [run] = admit(producer, settings, capability, [{"n": n, "slow_s": SLOW_S}])
    watch.wait({run.run_id}, 120)
    return watch.done[run.run_id] - run.admitted_ms / 1000


def _measure(settings: Settings) -> dict[str, Any]:
    overlap = Overlap()
    decl = TOOLS["scoring/slow_lookup"].decl
    tools = {"scoring/slow_lookup": FunctionTool("scoring/slow_lookup", overlap.call, decl=decl)}
    producer = plain_producer(settings)
    watch = CompletionWatch(settings)
    out: dict[str, Any] = {"slow_s": SLOW_S, "repeat": REPEAT}
    try:
        own = ExecutorSettings(base=settings, agent_modules=())
        with executor_thread(own, tools=tools, providers={}, registry=REGISTRY):
            _timed(producer, settings, watch, "plan.lookup", 2)  # warm up outside the measurement
            for n in SIZES:
                overlap.max = 0
                fan = statistics.median(
                    _timed(producer, settings, watch, "plan.lookup", n) for _ in range(REPEAT)
                )
                fan_overlap = overlap.max
                overlap.max = 0
                seq = statistics.median(
                    _timed(producer, settings, watch, "plan.sequential", n) for _ in range(REPEAT)
                )
                out[f"n{n}"] = {
                    "fanout_s": round(fan, 3),
                    "sequential_s": round(seq, 3),
                    "ratio_fanout_vs_sequential": round(fan / seq, 3),
                    "max_overlap_fanout": fan_overlap,
                    "max_overlap_sequential": overlap.max,
                }
    finally:
        watch.close()
    return out


def run(settings: Settings | None = None) -> dict[str, Any]:
    base = settings if settings is not None else Settings.from_env()
    with scratch_topics(base) as s:
        return _measure(s)


def main() -> None:
    result = run()
    print(
        f"fan-out of N tool calls sleeping {SLOW_S}s each, admission → COMPLETED, median of {REPEAT}"
    )
    for n in SIZES:
        r = result[f"n{n}"]
        print(
            f"  N={n:<3} fan-out {r['fanout_s']:.3f}s (≤{r['max_overlap_fanout']} at once)   "
            f"sequential {r['sequential_s']:.3f}s   ratio {r['ratio_fanout_vs_sequential']}"
        )


if __name__ == "__main__":
    main()
