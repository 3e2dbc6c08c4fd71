"""The refund agent: an invoice, an approval and a charge, durably.

    fetch_invoice → approval → now → charge_card

- ``fetch_invoice`` reads (not mutating, recovery retry): a crash simply reads again.
- The approval parks the run on a human task; nothing is charged until it is decided.
- ``ctx.now()`` is the logical clock: the stamp of the decision's record, identical on replay.
- ``charge_card`` mutates. Its idempotency key is derived from the run, so every attempt,
  every replay and every era of this run presents the same key to the billing API; its
  recovery is ``reconcile`` with the ``get_charge`` probe, so a crash between announce and
  record asks billing whether the charge exists instead of charging twice — once the charge's
  deadline has passed (its timeouts from the announce), so a request still on its way is not
  missed; billing dedupes the key for what arrives later still.

Tools are HTTP tools against the billing API (``runplane.providers.billing_tools``, the fake
in ``runplane.fakes``): ``GET /invoices/{invoice_id}`` → ``{invoice_id, amount_cents,
currency}``, ``POST /charges {invoice_id, amount_cents}`` with the Idempotency-Key header,
``GET /charges/{idempotency_key}`` (404 = no such charge).
"""

from __future__ import annotations

from typing import Any

from runplane.core import EffectDecl, Recovery, RetryPolicy, StepCtx, agent
from runplane.core.gate import FieldRule, SinkDecl, sinks

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "invoice_id": {"type": "string", "minLength": 1},
        "reason": {"type": "string"},
    },
    "required": ["invoice_id"],
    "additionalProperties": False,
}

EFFECTS = (
    EffectDecl("fetch_invoice", mutating=False, recovery=Recovery.RETRY),
    # A probe asks only after the charge's deadline (two 10 s attempts and the 1 s backoff
    # between them, from the announce): a charge still on its way cannot be missed by it.
    EffectDecl(
        "charge_card",
        mutating=True,
        recovery=Recovery.RECONCILE,
        probe="get_charge",
        timeout_s=10.0,
        retry=RetryPolicy(max_attempts=2, max_backoff_s=1.0),
    ),
    EffectDecl("get_charge", mutating=False, recovery=Recovery.RETRY),
)


# The charge is a mutating sink whose fields must come from where they should: the invoice id
# from the run's input (or the invoice read back), the amount from the invoice (the refund is
# its negation). The sink gate checks them before the charge is announced.
SINKS = (
    SinkDecl(
        "tool://charge_card",
        protected=(
            FieldRule("$.invoice_id", sources=("input:admission", "tool://fetch_invoice")),
            FieldRule("$.amount_cents", sources=("tool://fetch_invoice",)),
        ),
    ),
)


@sinks(*SINKS)
@agent("refund", durability="replayable", input_schema=INPUT_SCHEMA, effects=EFFECTS)
async def refund(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    invoice = await ctx.tool("fetch_invoice", {"invoice_id": input["invoice_id"]})
    amount = int(invoice["amount_cents"])
    decision = await ctx.approval(
        f"Refund {amount} cents on invoice {input['invoice_id']}?",
        {
            "invoice_id": input["invoice_id"],
            "amount_cents": amount,
            "reason": input.get("reason", ""),
        },
        role="finance",
    )
    if not decision.approved:
        return {
            "status": "rejected",
            "invoice_id": input["invoice_id"],
            "comment": decision.comment,
        }
    refunded_at = ctx.now()
    charge = await ctx.tool(
        "charge_card",
        {"invoice_id": input["invoice_id"], "amount_cents": -amount},
        idempotency_key=f"refund/{ctx.run_id}",
    )
    return {
        "status": "refunded",
        "invoice_id": input["invoice_id"],
        "amount_cents": amount,
        "charge_id": charge["charge_id"],
        "refunded_at_ms": refunded_at,
        "approved_by": list(decision.decided_by),
    }
