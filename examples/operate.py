"""Agents that are operated from outside: they wait for a signal, sleep on a durable timer,
and clean up when cancelled. Registered by importing this module (add ``examples.operate`` to
``RUNPLANE_AGENT_MODULES``); the operations runbook (docs/operations.md) drives them.

- ``await_payment``: reserves stock (a reversible member of an effect group), then waits for
  the ``payment_received`` signal (at most 30 minutes: ``WaitTimedOut`` releases the stock);
  a cancel while it waits releases the stock too (``RunCancelled`` abandons the group).
- ``nap``: sleeps ``seconds`` on a durable timer and returns the journaled wake instant.
- ``tally``: collects ``count`` ``vote`` signals (a signal id is accepted once).
- ``countdown``: counts ``n`` down, one run (a fresh history) per step: continue-as-new.
"""

from __future__ import annotations

from typing import Any

from runplane.core import StepCtx, agent, minutes
from runplane.core.effect import WaitTimedOut
from runplane.providers import tool

PAYMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"sku": {"type": "string", "minLength": 1}},
    "required": ["sku"],
}
NAP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"seconds": {"type": "number", "minimum": 0}},
    "required": ["seconds"],
}


# Stand-ins for a stock service: idempotent by hold id, so declared retry-safe.
@tool(mutating=True, recovery="retry", timeout_s=5)
def reserve_stock(sku: str) -> dict[str, Any]:
    return {"hold": f"hold-{sku}"}


@tool(mutating=True, recovery="retry", timeout_s=5)
def release_stock(hold: str) -> dict[str, Any]:
    return {"released": hold}


@agent(
    "await_payment",
    durability="replayable",
    input_schema=PAYMENT_SCHEMA,
    tools=("reserve_stock", "release_stock"),
)
async def await_payment(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    async with ctx.group("order", ["stock"]) as order:
        hold = await order.reversible(
            "stock",
            "reserve_stock",
            {"sku": input["sku"]},
            undo=lambda out: ("release_stock", {"hold": out["hold"]}),
        )
        try:
            payment = await ctx.wait_signal("payment_received", timeout=minutes(30))
        except WaitTimedOut:
            await order.abandon("no payment within 30 minutes")
            return {"status": "expired"}
        await order.commit()
    return {"status": "paid", "hold": hold["hold"], "payment": payment}


@agent("nap", durability="replayable", input_schema=NAP_SCHEMA)
async def nap(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    started = ctx.now()
    woke = await ctx.sleep(float(input["seconds"]))
    return {"started_ms": started, "woke_ms": woke}


TALLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"count": {"type": "integer", "minimum": 1, "maximum": 100}},
    "required": ["count"],
}


@agent("tally", durability="replayable", input_schema=TALLY_SCHEMA)
async def tally(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    """Collects ``count`` ``vote`` signals, in delivery order (a redelivered one counts once)."""
    votes = [await ctx.wait_signal("vote") for _ in range(int(input["count"]))]
    return {"votes": votes}


COUNTDOWN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 1000}},
    "required": ["n"],
}


@agent("countdown", durability="replayable", input_schema=COUNTDOWN_SCHEMA)
async def countdown(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    """One generation per step down to zero, each with a fresh history (continue-as-new)."""
    n = int(input["n"])
    await ctx.checkpoint({"n": n})
    if n == 0:
        return {"done": True}
    return dict(await ctx.continue_as_new({"n": n - 1}))
