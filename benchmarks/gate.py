"""The sink gate's cost per outbound call, beside the same agent ungated, in the same run.

    python -m benchmarks.gate            # prints the numbers as JSON

An agent makes N (lookup, write) pairs in the in-memory driver: the write's recipient is a
protected field that must come from the lookup, so every write is labelled by matching against
the whole history so far. The same agent without ``@sinks`` is the baseline. The gate's cost
must not grow with the history (its index is folded once per result): µs per call at N=100
and N=1,000 should be close.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from runplane.core import AgentRegistry, AgentSpec, StepCtx
from runplane.core.gate import FieldRule, SinkDecl, sinks
from runplane.testing import Driver, ScriptedProvider

SIZES = (100, 1_000)
WRITE = SinkDecl("tool://write", protected=(FieldRule("$.to", sources=("tool://lookup",)),))


def _agent(n: int) -> Callable[[StepCtx, Any], Any]:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.generate("p", "m", "a prompt long enough to be fragmented")
        for i in range(n):
            found = await ctx.tool("lookup", {"i": i}, mutating=False)
            await ctx.tool("write", {"to": found["account"], "memo": f"payment {i:06d}"})
        return None

    return agent


def _seconds(n: int, gated: bool) -> float:
    fn = _agent(n)
    spec = AgentSpec("bench", sinks(WRITE)(fn) if gated else fn)
    driver = Driver(
        AgentRegistry([spec]),
        tools={
            "lookup": lambda a, k: {"account": f"NL{a['i']:016d}"},
            "write": lambda a, k: {"ok": True},
        },
        providers={"p": ScriptedProvider(["a model answer of some length"], name="p")},
    )
    began = time.perf_counter()
    view = driver.run("bench", {})
    elapsed = time.perf_counter() - began
    if view.status.name != "COMPLETED":
        raise RuntimeError(f"benchmark run ended {view.status}: {view.error}")
    return elapsed


def run() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in SIZES:
        calls = 2 * n + 1
        # Best of three, interleaved, so a busy neighbour hurts both sides alike.
        plain = min(_seconds(n, gated=False) for _ in range(3))
        gated = min(_seconds(n, gated=True) for _ in range(3))
        out[f"calls_{calls}"] = {
            "ungated_us_per_call": round(plain / calls * 1e6, 1),
            "gated_us_per_call": round(gated / calls * 1e6, 1),
            "ratio_gated_to_ungated": round(gated / plain, 2),
        }
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
