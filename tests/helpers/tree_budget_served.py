"""A fan-out for the broker test of budgets over a tree
(``tests/integration/test_tree_budgets_kafka.py``): ``budget.boss`` commissions ten
``budget.worker`` children at once, each of which tries to spend a whole budget of tool calls.
Registered in the default registry: the module an executor process is given in
``RUNPLANE_AGENT_MODULES``; nothing else imports it."""

from __future__ import annotations

from typing import Any

from runplane.core import REGISTRY, StepCtx
from runplane.core.effect import EffectError
from runplane.core.plan import AllSucceeded
from runplane.core.planrun import commission_effect
from runplane.providers import tool

CHILDREN = 10


@tool(mutating=False, recovery="retry", timeout_s=5)
def work(i: int) -> dict[str, Any]:
    """One unit of a worker's work (what its budget counts)."""
    return {"i": i}


@REGISTRY.agent("budget.worker", tools=("work",))
async def worker(ctx: StepCtx, input: dict[str, Any]) -> Any:
    made = 0
    for i in range(int(input["want"])):
        try:
            await ctx.tool("work", {"i": i})
        except EffectError as exc:
            return {"made": made, "refused": f"{exc.type}: {exc}"}
        made += 1
    return {"made": made, "refused": ""}


@REGISTRY.agent("budget.boss")
async def boss(ctx: StepCtx, input: dict[str, Any]) -> Any:
    status = await ctx.parallel(
        {
            # Each asks for all that is left (none declared, they would split it evenly).
            f"c{i}": commission_effect("budget.worker", {"want": input["want"]}, budget=1.0)
            for i in range(CHILDREN)
        }
    )
    results = status.results if isinstance(status, AllSucceeded) else getattr(status, "results", {})
    failures = {} if isinstance(status, AllSucceeded) else dict(status.failures)
    return {"results": dict(results), "failures": failures}
