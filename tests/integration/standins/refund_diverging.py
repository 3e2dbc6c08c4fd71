"""A "new image" of the refund agent whose first call changed (it asks for the invoice with a
currency filter): every recorded refund run diverges from it at era 0 call_seq 0.

It declares what ``examples.refund`` declares but must not import that module, which would
register a second ``refund``."""

from __future__ import annotations

from typing import Any

from runplane.core import EffectDecl, Recovery, StepCtx, agent

EFFECTS = (
    EffectDecl("fetch_invoice", mutating=False, recovery=Recovery.RETRY),
    EffectDecl("charge_card", mutating=True, recovery=Recovery.RECONCILE, probe="get_charge"),
    EffectDecl("get_charge", mutating=False, recovery=Recovery.RETRY),
)


@agent("refund", durability="replayable", effects=EFFECTS)
async def refund(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    invoice = await ctx.tool(
        "fetch_invoice", {"invoice_id": input["invoice_id"], "currency": "EUR"}
    )
    return {"status": "fetched", "invoice": invoice}
