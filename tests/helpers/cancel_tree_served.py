"""A tree of runs for the broker test of cancellation down the tree
(``tests/integration/test_cancel_tree_kafka.py``): ``tree.top`` commissions two leaves and a
``tree.middle``, which commissions two leaves of its own; each leaf reserves, then waits for a
signal, and releases its reservation when it is cancelled (its compensation). Registered in
the default registry: the module an executor process is given in ``RUNPLANE_AGENT_MODULES``;
nothing else imports it."""

from __future__ import annotations

from typing import Any

from runplane.core import REGISTRY, StepCtx
from runplane.core.effect import RunCancelled
from runplane.core.planrun import commission_effect
from runplane.providers import tool


@tool(mutating=True, recovery="retry", timeout_s=5)
def reserve(who: str) -> dict[str, Any]:
    """Reserve a slot for ``who`` (the leaf's side effect)."""
    return {"reserved": who}


@tool(mutating=True, recovery="retry", timeout_s=5)
def release(who: str) -> dict[str, Any]:
    """Release ``who``'s slot (the leaf's compensation)."""
    return {"released": who}


@REGISTRY.agent("tree.leaf", tools=("reserve", "release"))
async def leaf(ctx: StepCtx, input: dict[str, Any]) -> Any:
    await ctx.tool("reserve", {"who": input["n"]})
    try:
        return {"got": await ctx.wait_signal("go")}
    except RunCancelled:
        await ctx.tool("release", {"who": input["n"]})
        raise


@REGISTRY.agent("tree.middle")
async def middle(ctx: StepCtx, input: dict[str, Any]) -> Any:
    n = input["n"]
    return await ctx.parallel(
        {
            "a": commission_effect("tree.leaf", {"n": f"{n}.a"}),
            "b": commission_effect("tree.leaf", {"n": f"{n}.b"}),
        }
    )


@REGISTRY.agent("tree.top")
async def top(ctx: StepCtx, input: dict[str, Any]) -> Any:
    return await ctx.parallel(
        {
            "one": commission_effect("tree.leaf", {"n": "1"}),
            "two": commission_effect("tree.leaf", {"n": "2"}),
            "mid": commission_effect("tree.middle", {"n": "3"}),
        }
    )
