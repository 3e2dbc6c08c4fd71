"""The agent of ``benchmarks.parked``: asks for an approval and waits for it (days, in life)."""

from __future__ import annotations

from typing import Any

from runplane.core import StepCtx, agent


@agent("parked")
async def parked(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    await ctx.approval("Proceed?", input, role="finance")
    return input
