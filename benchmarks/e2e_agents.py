"""The end-to-end benchmark's two agents and its one tool, as a user would declare them.

``step3`` makes three ``ctx.tool`` calls to ``inc`` (returns n+1); ``noop`` returns its input.
Declared with ``@agent`` / ``@tool`` so that the stock services serve them unchanged
(``RUNPLANE_AGENT_MODULES=benchmarks.e2e_agents``) when the benchmark runs one process per
service; the thread mode hands the same registries to its in-process services.
"""

from __future__ import annotations

from typing import Any

from runplane.core import StepCtx, agent
from runplane.providers import tool

CAPABILITIES = ("step3", "noop")


@tool(mutating=False, recovery="retry", timeout_s=5)
def inc(n: int) -> dict[str, int]:
    return {"n": n + 1}


@agent("step3", tools=("inc",))
async def step3(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    n = int(input["n"])
    for _ in range(3):
        n = int((await ctx.tool("inc", {"n": n}))["n"])
    return {"n": n}


@agent("noop")
async def noop(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    return input
