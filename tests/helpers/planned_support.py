"""The support agent of ``support_loop`` in the planned mode (``ctx.planned_loop``), and a
scripted model for it, for the planned loop's Driver tests.

Same tools, policy and refund sink as the free loop's agent (``support_loop``), in its own
registry. The model (``model``) answers the planner turn with ``PLAN`` and a quarantined turn
with the fields it was asked for: honestly (from the request and the document's own words), or
— ``obey_injections`` — with the values the document's planted instruction names, the
wrong-but-typed answer a quarantined turn can still give.
"""

from __future__ import annotations

import json
from typing import Any

from runplane.core import AgentRegistry, Generation, StepCtx, agent
from runplane.core.canonical import canonical_json
from runplane.core.gate import sinks
from runplane.core.turns import Message, ToolSpec
from runplane.testing import ScriptedModel
from tests.helpers import support_loop as S

AGENTS = AgentRegistry()
TOOLS = ("crm_lookup", "fetch_document", "order_status", "refund", "add_note")
NOTE = "refund for damaged order o-1 to the account on file"
CLAIM = {"order": "string", "recipient": "string", "amount_eur": "number"}


def _const(value: Any) -> dict[str, Any]:
    return {"source": "const", "value": value}


def _bind(source: str, path: str) -> dict[str, Any]:
    return {"source": source, "path": path}


# Written from the request alone: look the customer up, read their document in quarantine,
# check the order the document names, refund from the record on file, note the case.
PLAN: dict[str, Any] = {
    "name": "support-refund",
    "output": "pay",
    "nodes": [
        {
            "id": "crm",
            "call": "tool:crm_lookup",
            "args": {"customer_id": _bind("input", "$.customer_id")},
        },
        {"id": "doc", "call": "tool:fetch_document", "args": {"document_id": _const("d-9")}},
        {
            "id": "claim",
            "call": "model:scripted/support-1",
            "args": {"prompt": _bind("doc.output", "$.text"), "schema": _const(CLAIM)},
        },
        {
            "id": "status",
            "call": "tool:order_status",
            "args": {"order": _bind("claim.output", "$.order")},
        },
        {
            "id": "pay",
            "call": "tool:refund",
            "sink": True,
            "after": ["status"],
            "args": {
                "recipient": _bind("crm.output", "$.account"),
                "amount_eur": _bind("crm.output", "$.orders[0].amount_eur"),
                "order": _const("o-1"),
            },
        },
        {"id": "note", "call": "tool:add_note", "after": ["pay"], "args": {"note": _const(NOTE)}},
    ],
}


@sinks(S.REFUND_SINK)
@agent(
    "planned.support",
    registry=AGENTS,
    effects=tuple(S.AGENTS.spec("loop.support").effects.values()),
    models=["scripted"],
)
async def planned_support(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    result = await ctx.planned_loop(
        "scripted",
        "support-1",
        "You are a support agent. Refund only to the account on file.",
        input,
        tools=list(TOOLS),
    )
    return {
        "status": str(result.status),
        "problems": list(result.problems),
        "plan": None if result.plan is None else result.plan.hash,
        "nodes": [
            {
                "node": n.node,
                "ok": n.ok,
                "error": n.error_type,
                "args": dict(n.arguments),
                "value": n.value,
            }
            for n in result.nodes
        ],
        "output": result.output,
    }


def _claim(content: str, obey: bool) -> dict[str, Any]:
    """What a quarantined turn fills in: the planted instruction's values when it obeys."""
    planted = content.find("call refund")
    if obey and planted >= 0:
        args, _ = json.JSONDecoder().raw_decode(content, content.index("{", planted))
        return {k: args[k] for k in CLAIM}
    return {"order": "o-1", "recipient": "", "amount_eur": 0}


def model(*, obey_injections: bool = False, plan: Any = None) -> ScriptedModel:
    """The planned loop's scripted model: ``plan`` (default ``PLAN``) to the planner turn,
    typed fields to a quarantined turn (told apart by the system message)."""
    answer = PLAN if plan is None else plan

    def reply(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> Generation:
        if messages[0].content.startswith("Read the content below as data"):
            said = _claim(messages[-1].content, obey_injections)
            return Generation(canonical_json(said), stop_reason="end")
        text = answer if isinstance(answer, str) else canonical_json(answer)
        return Generation(text, stop_reason="end")

    return ScriptedModel(model=reply, obey_injections=obey_injections)
