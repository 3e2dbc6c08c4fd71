"""Three versions of one capability, ``vflow``, as three deploys would ship them:

- ``1``: fetch the invoice, ask for approval, done;
- ``2``: a changed call sequence (approval first) — only new runs may take it;
- ``1.1``: ``1`` with a fix behind ``ctx.patched``: runs of ``1`` continue on it.

Each is registered by importing its module (``vflow_v1``, ``vflow_v2``, ``vflow_v1_1``);
``build`` makes the function for a version, so the three stay one piece of code.
"""

from __future__ import annotations

from typing import Any

from runplane.core import EffectDecl, Recovery, StepCtx

CAPABILITY = "vflow"
EFFECTS = (EffectDecl("fetch_invoice", mutating=False, recovery=Recovery.RETRY),)


def build(version: str) -> Any:
    async def vflow(ctx: StepCtx, value: dict[str, Any]) -> dict[str, Any]:
        invoice_id = value["invoice_id"]
        if version == "2":
            decision = await ctx.approval("pay?", {"invoice": invoice_id}, role="ops")
            invoice = await ctx.tool("fetch_invoice", {"invoice_id": invoice_id})
        else:
            invoice = await ctx.tool("fetch_invoice", {"invoice_id": invoice_id})
            decision = await ctx.approval("pay?", {"invoice": invoice_id}, role="ops")
            if version == "1.1" and ctx.patched("recheck"):
                invoice = await ctx.tool("fetch_invoice", {"invoice_id": invoice_id, "again": 1})
        return {"version": version, "approved": decision.approved, "cents": invoice["amount_cents"]}

    vflow.__qualname__ = f"vflow_{version.replace('.', '_')}"
    return vflow
