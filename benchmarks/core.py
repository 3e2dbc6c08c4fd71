"""Replay cost per step of the durable core, and the cost of a live step without I/O.

    python -m benchmarks.core            # prints a table; run() returns the numbers

An agent of N tool calls is run once live (in memory, instant tool) to build its history;
then ``Runtime.restore`` rebuilds it from the snapshot and the result journal — the path a
non-resident run takes — and we time that replay. Replay must be linear in N: the per-step
cost should stay flat from 10 to 100,000 calls. Goal: 1,000 calls in under 20 ms.
"""

from __future__ import annotations

import gc
import json
import time
from typing import Any

from runplane.core import (
    AgentRegistry,
    AgentSpec,
    EffectDecl,
    Outcome,
    Recovery,
    Runtime,
    StepCtx,
)
from runplane.core.chain import run_start
from runplane.wire import ResultEntry, SessionSnapshot

SIZES = (10, 1_000, 100_000)


def _spec(n: int) -> AgentSpec:
    async def many_calls(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
        total = 0
        for i in range(n):
            total += int(await ctx.tool("add", {"i": i, "total": total}))
        # Park at the end, so a restore replays all n calls and then waits (a real rebuild).
        await ctx.wait_signal("done")
        return {"total": total}

    registry = AgentRegistry()
    return registry.register(
        AgentSpec(
            "bench",
            many_calls,
            effects={"add": EffectDecl("add", mutating=False, recovery=Recovery.RETRY)},
        ),
        lint=False,
    )


def _history(
    spec: AgentSpec, n: int
) -> tuple[SessionSnapshot, dict[tuple[int, int], ResultEntry], float]:
    """Run live; return the snapshot, results and the mean live step cost (seconds)."""
    _, start = run_start(
        "bench-1",
        capability="bench",
        admission_key="k",
        tenant="t",
        initiator="i",
        input_json="{}",
        now_ms=0,
    )
    results: dict[tuple[int, int], ResultEntry] = {}
    t0 = time.perf_counter()
    runtime, step = Runtime.start(spec, start, now_ms=1)
    now = 2
    while step.live_calls:
        call = step.live_calls[0]
        step = runtime.complete(
            call.call_seq, Outcome.success(call.request["args"]["i"] % 7), now_ms=now
        )
        now += 1
        for entry in step.results:
            results[(entry.era, entry.call_seq)] = entry
    live_s = (time.perf_counter() - t0) / max(1, n)
    return step.snapshot, results, live_s


def _time_replay(
    spec: AgentSpec,
    snapshot: SessionSnapshot,
    results: dict[tuple[int, int], ResultEntry],
    repeats: int,
) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        _, step = Runtime.restore(spec, snapshot, results, now_ms=10**9)
        elapsed = time.perf_counter() - t0
        assert step.replayed == len(results) and not step.live_calls, (
            "replay must not perform live calls"
        )
        best = min(best, elapsed)
    return best


def run(sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    """Measure; return {"replay": {n: {...}}, "live_step_us": ..., "goal_1000_ms": 20}."""
    out: dict[str, Any] = {"replay": {}, "goal_1000_ms": 20.0}
    live_costs = []
    for n in sizes:
        spec = _spec(n)
        snapshot, results, live_s = _history(spec, n)
        live_costs.append(live_s)
        total = _time_replay(spec, snapshot, results, repeats=5 if n <= 1_000 else 1)
        out["replay"][n] = {"total_ms": total * 1e3, "per_step_us": total / n * 1e6}
    out["live_step_us"] = min(live_costs) * 1e6
    return out


def main() -> None:
    result = run()
    print(f"{'calls':>8} {'replay total (ms)':>18} {'per step (us)':>14}")
    for n, row in result["replay"].items():
        print(f"{n:>8} {row['total_ms']:>18.2f} {row['per_step_us']:>14.2f}")
    print(f"live step without I/O (announce + record + resume): {result['live_step_us']:.1f} us")
    r1000 = result["replay"].get(1_000)
    if r1000 is not None:
        verdict = "meets" if r1000["total_ms"] < result["goal_1000_ms"] else "misses"
        print(
            f"replaying 1,000 calls: {r1000['total_ms']:.2f} ms ({verdict} the {result['goal_1000_ms']:.0f} ms goal)"
        )
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
