"""A support agent written with the OpenAI Agents SDK, served durably by the stock executor.

The agent is plain SDK code — an ``Agent`` with instructions and two function tools — and the
runplane agent around it (``support_oai``) runs it with ``run_agent``: the SDK's ``Runner``
drives the conversation, runplane journals every model turn and performs every tool call.

- ``crm_lookup`` (``examples.crm``, trusted, read-only): the customer's record on file;
- ``refund_order`` (mutating): a person with the approvals role approves each call before it
  is made (``needs_approval`` in the agent's declaration; a deployment policy can ask the same
  per sink), and its ``$.recipient`` must be copied from ``crm_lookup``'s result (``@sinks``).

Each tool is a runplane tool (``@tool``: its recovery, timeout, trust) offered to the SDK as a
function tool (``function_tool`` over the same function), so the executor performs it and the
SDK never calls it itself. Serve it with ``RUNPLANE_AGENT_MODULES=examples.openai_agents_support``
and a model provider named ``openai`` in the tools config; ``tests/unit/
test_contrib_openai_agents.py`` runs it through the Driver.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, function_tool

from examples.crm import crm_lookup
from runplane.contrib.openai_agents import run_agent
from runplane.core import EffectDecl, Recovery, StepCtx, agent
from runplane.core.gate import FieldRule, SinkDecl, sinks
from runplane.providers import tool

MODEL = "gpt-4o-mini"
CAPABILITY = "support_oai"
TOOLS = ("crm_lookup", "refund_order")

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "customer_id": {"type": "string", "minLength": 1},
        "order": {"type": "string", "minLength": 1},
        "amount_eur": {"type": "number", "exclusiveMinimum": 0, "maximum": 500},
    },
    "required": ["customer_id", "order", "amount_eur"],
    "additionalProperties": False,
}


@tool(mutating=True, recovery="retry", timeout_s=10)
def refund_order(recipient: str, amount_eur: float, order: str) -> dict[str, Any]:
    """Refund ``amount_eur`` EUR for ``order`` to the account ``recipient``."""
    return {"refund_id": f"rf-{order}", "recipient": recipient, "amount_eur": amount_eur}


SUPPORT = Agent(
    name="support",
    instructions=(
        "You are a support agent. Look the customer up in the CRM, refund the case's amount "
        "for the order to the account on file, and answer in one line."
    ),
    tools=[function_tool(crm_lookup), function_tool(refund_order)],
)


@sinks(
    SinkDecl(
        "tool://refund_order", protected=(FieldRule("$.recipient", sources=("tool://crm_lookup",)),)
    )
)
@agent(
    CAPABILITY,
    input_schema=INPUT_SCHEMA,
    tools=TOOLS,
    models=["openai"],
    effects=(
        EffectDecl("crm_lookup", mutating=False, recovery=Recovery.RETRY),
        EffectDecl("refund_order", mutating=True, recovery=Recovery.RETRY, needs_approval=True),
    ),
)
async def support_oai(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    case = f"Customer {input['customer_id']}, order {input['order']}, {input['amount_eur']} EUR."
    result = await run_agent(ctx, SUPPORT, case, provider="openai", model=MODEL, max_turns=6)
    return {"answer": result.final_output}
