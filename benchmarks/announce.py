"""What announce-before-act costs a lone generation, on the real broker.

    python -m benchmarks.announce        # needs the local stack (`runplane up` / `make up`)

A generation commits its announce before the request leaves (a crash mid-call leaves the
intention in the journal), so a lone run making one generation takes two transactions where a
run making one in-process read (a ``@tool`` that mutates nothing: its announce rides with its
outcome) takes one. Both agents run on one executor, ``RUNS`` runs each, one at a time (the
lone case: nothing to batch with), against an instant in-process model and an instant tool,
so what differs is the extra commit and nothing else. Reported: admission → completion
visible p50/p99 of each, their difference, and their ratio (the read is the baseline).
Numbers only: nothing here asserts a timing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from benchmarks.executor import CompletionWatch, _percentiles, scratch_topics
from runplane.config import Settings
from runplane.core import AgentRegistry, EffectDecl, Generation, StepCtx
from runplane.providers import FunctionTool
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, executor_thread, plain_producer

RUNS = 60
WARM = 5

REGISTRY = AgentRegistry()


@REGISTRY.agent("lone_generation")
async def lone_generation(ctx: StepCtx, input: dict[str, Any]) -> str:
    return str((await ctx.generate("instant", "m", f"say {input['n']}")).text)


@REGISTRY.agent("lone_read", effects=[EffectDecl("read", mutating=False)])
async def lone_read(ctx: StepCtx, input: dict[str, Any]) -> Any:
    return await ctx.tool("read", {"n": input["n"]})


class InstantModel:
    """A model provider answering at once, in process (no HTTP: only the commits differ)."""

    name = "instant"

    async def generate(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        return Generation(text="ok", tokens_in=2, tokens_out=1)


def _read(n: int) -> dict[str, int]:
    return {"n": n}


def _lone(settings: Settings, watch: CompletionWatch, capability: str, runs: int) -> list[float]:
    producer = plain_producer(settings)
    latencies = []
    for n in range(runs):
        [run] = admit(producer, settings, capability, [{"n": n}])
        watch.wait({run.run_id}, 60)
        latencies.append(watch.done[run.run_id] * 1000 - run.admitted_ms)
    return latencies


def run(settings: Settings | None = None) -> dict[str, Any]:
    base = settings if settings is not None else Settings.from_env()
    with scratch_topics(base) as s:
        watch = CompletionWatch(s)
        tools = {"read": FunctionTool("read", _read, decl=EffectDecl("read", mutating=False))}
        own = ExecutorSettings(base=s, agent_modules=())
        try:
            with executor_thread(
                own, tools=tools, providers={"instant": InstantModel()}, registry=REGISTRY
            ) as ex:
                for capability in ("lone_read", "lone_generation"):
                    _lone(s, watch, capability, WARM)
                # Alternate the two so drift on the machine falls on both alike.
                read: list[float] = []
                generation: list[float] = []
                commits = {"lone_read": 0, "lone_generation": 0}
                started = time.monotonic()
                for _ in range(RUNS // 10):
                    for capability, into in (("lone_read", read), ("lone_generation", generation)):
                        before = ex.stats["commits"]
                        into += _lone(s, watch, capability, 10)
                        commits[capability] += ex.stats["commits"] - before
                elapsed = time.monotonic() - started
        finally:
            watch.close()
    r, g = _percentiles(read), _percentiles(generation)
    return {
        "generation_announced_first": {
            **g,
            "runs": len(generation),
            "commits_per_run": round(commits["lone_generation"] / len(generation), 2),
        },
        "read_announce_rides": {
            **r,
            "runs": len(read),
            "commits_per_run": round(commits["lone_read"] / len(read), 2),
        },
        "extra_p50_ms": round(g["p50_ms"] - r["p50_ms"], 1),
        "ratio_p50_generation_vs_read": round(g["p50_ms"] / r["p50_ms"], 2),
        "ratio_p99_generation_vs_read": round(g["p99_ms"] / r["p99_ms"], 2),
        "seconds": round(elapsed, 1),
    }


def main() -> None:
    result = run()
    g, r = result["generation_announced_first"], result["read_announce_rides"]
    print(f"lone runs, one at a time ({g['runs']} of each, alternating)")
    for what, x in (("one generation (announce first)", g), ("one in-process read (rides)", r)):
        print(
            f"  {what:32} p50 {x['p50_ms']} ms  p99 {x['p99_ms']} ms  "
            f"{x['commits_per_run']} commits/run"
        )
    print(
        f"  announce before act costs a lone generation {result['extra_p50_ms']} ms at p50 "
        f"(ratio {result['ratio_p50_generation_vs_read']}; p99 ratio "
        f"{result['ratio_p99_generation_vs_read']})"
    )


if __name__ == "__main__":
    main()
