"""What the agent loop (``ctx.agent_loop``) costs beyond the provider's own latency.

    python -m benchmarks.loop        # needs the local stack (`runplane up` / `make up`)

On the real broker, one executor, an instant in-process model (``runplane.testing``'s
``ScriptedModel``) and an instant in-process read (a ``@tool``-like ``FunctionTool`` that
mutates nothing), so what is measured is the runtime and nothing else. Two loop shapes: six
model turns proposing one call each for five turns (5 calls), and three calls each in parallel
(15 calls), then an answer. Each beside its baseline in the same run: a plain agent making the
same number of bare ``ctx.generate`` and ``ctx.tool`` calls (one after another). Lone runs, one
at a time, alternating. Reported: admission → completion p50/p99 of each, the loop's overhead
per run over its baseline, and from the two shapes the overhead per tool call (the difference
of the two overheads over the 10 extra calls) and per turn (what is left, over 6 turns), and
the loop's own time per turn and per call. Numbers only: nothing here asserts a timing.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.announce import InstantModel
from benchmarks.executor import CompletionWatch, _percentiles, scratch_topics
from runplane.config import Settings
from runplane.core import AgentRegistry, EffectDecl, StepCtx
from runplane.core.loop import LoopBudget
from runplane.providers import FunctionTool
from runplane.testing import Call, ScriptedModel
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, executor_thread, plain_producer

RUNS = 50
WARM = 3
TOOL_TURNS = 5
TURNS = TOOL_TURNS + 1  # the last one answers
SHAPES = {"loop1": 1, "loop3": 3}  # calls proposed per tool turn

REGISTRY = AgentRegistry()
_READ = EffectDecl("read", mutating=False)


def _script(width: int) -> list[Any]:
    return [
        [Call("read", {"turn": t, "i": i}) for i in range(width)] for t in range(TOOL_TURNS)
    ] + ["done"]


def _loop_agent(provider: str) -> Any:
    async def loop(ctx: StepCtx, input: dict[str, Any]) -> Any:
        result = await ctx.agent_loop(
            provider, "m", "Read, then answer.", input, tools=["read"], budget=LoopBudget(turns=8)
        )
        return [result.turns, len(result.calls)]

    return loop


def _plain_agent(width: int) -> Any:
    async def plain(ctx: StepCtx, input: dict[str, Any]) -> Any:
        for t in range(TOOL_TURNS):
            await ctx.generate("instant", "m", f"turn {t} of {input['n']}")
            for i in range(width):
                await ctx.tool("read", {"turn": t, "i": i})
        return (await ctx.generate("instant", "m", "answer")).text

    return plain


for _name, _width in SHAPES.items():
    REGISTRY.agent(_name, effects=[_READ], models=[_name])(_loop_agent(_name))
    REGISTRY.agent(f"plain{_width}", effects=[_READ], models=["instant"])(_plain_agent(_width))


def _read(turn: int, i: int) -> dict[str, Any]:
    return {"ok": True, "turn": turn, "i": i}


def _lone(settings: Settings, watch: CompletionWatch, capability: str, runs: int) -> list[float]:
    producer = plain_producer(settings)
    latencies = []
    for n in range(runs):
        [run] = admit(producer, settings, capability, [{"n": n, "at": time.time_ns()}])
        watch.wait({run.run_id}, 60)
        latencies.append(watch.done[run.run_id] * 1000 - run.admitted_ms)
    return latencies


def run(settings: Settings | None = None) -> dict[str, Any]:
    base = settings if settings is not None else Settings.from_env()
    capabilities = [*SHAPES, *(f"plain{w}" for w in SHAPES.values())]
    providers: dict[str, Any] = {"instant": InstantModel()}
    providers |= {name: ScriptedModel(_script(w), name=name) for name, w in SHAPES.items()}
    with scratch_topics(base) as s:
        watch = CompletionWatch(s)
        tools = {"read": FunctionTool("read", _read, decl=_READ)}
        own = ExecutorSettings(base=s, agent_modules=())
        try:
            with executor_thread(own, tools=tools, providers=providers, registry=REGISTRY):
                for capability in capabilities:
                    _lone(s, watch, capability, WARM)
                # Alternate, so drift on the machine falls on all alike.
                seen: dict[str, list[float]] = {c: [] for c in capabilities}
                started = time.monotonic()
                for _ in range(RUNS // 5):
                    for capability in capabilities:
                        seen[capability] += _lone(s, watch, capability, 5)
                elapsed = time.monotonic() - started
        finally:
            watch.close()
    p = {c: _percentiles(v) for c, v in seen.items()}
    over = {
        w: p[name]["p50_ms"] - p[f"plain{w}"]["p50_ms"] for name, w in SHAPES.items()
    }  # per run, by width
    narrow, wide = min(SHAPES.values()), max(SHAPES.values())
    extra_calls = (wide - narrow) * TOOL_TURNS
    per_call = (over[wide] - over[narrow]) / extra_calls
    per_turn = (over[narrow] - per_call * narrow * TOOL_TURNS) / TURNS
    return {
        "runs_each": len(seen[capabilities[0]]),
        "turns": TURNS,
        **{
            c: {**p[c], "calls": SHAPES.get(c, 0) * TOOL_TURNS or None}
            for c in capabilities
            if c in SHAPES
        },
        **{c: p[c] for c in capabilities if c not in SHAPES},
        **{f"overhead_p50_ms_width{w}": round(o, 1) for w, o in over.items()},
        **{
            f"ratio_p50_loop_vs_plain_width{w}": round(
                p[name]["p50_ms"] / p[f"plain{w}"]["p50_ms"], 2
            )
            for name, w in SHAPES.items()
        },
        "overhead_per_turn_ms": round(per_turn, 2),
        "overhead_per_tool_call_ms": round(per_call, 2),
        "loop_per_turn_ms_width1": round(p["loop1"]["p50_ms"] / TURNS, 2),
        "loop_per_tool_call_ms_width3": round(
            (p["loop3"]["p50_ms"] - p["loop1"]["p50_ms"]) / extra_calls, 2
        ),
        "seconds": round(elapsed, 1),
    }


def main() -> None:
    result = run()
    print(f"lone runs, one at a time ({result['runs_each']} of each, alternating)")
    for name, w in SHAPES.items():
        loop, plain = result[name], result[f"plain{w}"]
        print(
            f"  {TURNS} turns x {w} call(s): loop p50 {loop['p50_ms']} ms p99 {loop['p99_ms']} ms"
            f" | plain p50 {plain['p50_ms']} ms p99 {plain['p99_ms']} ms"
            f" | overhead {result[f'overhead_p50_ms_width{w}']} ms"
            f" (ratio {result[f'ratio_p50_loop_vs_plain_width{w}']})"
        )
    print(
        f"  the loop costs {result['overhead_per_turn_ms']} ms per turn and "
        f"{result['overhead_per_tool_call_ms']} ms per tool call beyond bare calls"
    )


if __name__ == "__main__":
    main()
