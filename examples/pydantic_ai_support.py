"""A support agent written with Pydantic AI, served durably by the stock executor.

The agent is plain Pydantic AI code — an ``Agent`` with instructions and two tools — and the
runplane agent around it (``support_pydai``) runs it with ``DurableAgent.run``: Pydantic AI's
own loop drives the conversation, runplane journals every model request and performs every
tool call (``runplane.contrib.pydantic_ai``).

- ``crm_lookup`` (``examples.crm``, a runplane ``@tool``: trusted, read-only): the customer's
  record on file, handed to Pydantic AI as a tool and still performed as that runplane tool;
- ``issue_refund`` (mutating): a person with the approvals role approves each call before it
  is made (``needs_approval`` in its declaration; a deployment policy can ask the same per
  sink), and its ``$.recipient`` must be copied from ``crm_lookup``'s result (``@sinks``).

The model is a ``FunctionModel`` that does what the instructions say, so the example runs with
no model at all; a deployment names a real one instead (``"openai:gpt-4o-mini"``, performed by
Pydantic AI's own model class in the executor, its provider package and key installed there).
Serve it with
``RUNPLANE_AGENT_MODULES=examples.pydantic_ai_support``; ``tests/unit/
test_pydantic_ai_example.py`` runs it through the Driver.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from examples.crm import crm_lookup
from runplane.contrib.pydantic_ai import DurableAgent
from runplane.core import EffectDecl, Recovery, StepCtx, agent
from runplane.core.canonical import canonical_json
from runplane.core.gate import FieldRule, SinkDecl, sinks

CAPABILITY = "support_pydai"

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


def _demo_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The instructions, followed: look the customer up, refund to the account on file,
    answer — a function of the conversation, so every replay sees the same turns."""
    case: dict[str, Any] = {}
    results: dict[str, Any] = {}
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, UserPromptPart) and isinstance(p.content, str) and not case:
                    case = json.loads(p.content)
                elif isinstance(p, ToolReturnPart):
                    results[p.tool_name] = p.content
    if "crm_lookup" not in results:
        lookup = {"customer_id": case["customer_id"]}
        return ModelResponse(parts=[ToolCallPart("crm_lookup", lookup, tool_call_id="lookup")])
    if "issue_refund" not in results:
        refund = {
            "recipient": results["crm_lookup"]["account"],
            "amount_eur": case["amount_eur"],
            "order": case["order"],
        }
        return ModelResponse(parts=[ToolCallPart("issue_refund", refund, tool_call_id="refund")])
    outcome = results["issue_refund"]
    if isinstance(outcome, dict):
        return ModelResponse(parts=[TextPart(f"Refunded {outcome['amount_eur']} EUR.")])
    return ModelResponse(parts=[TextPart(f"No refund: {outcome}")])


# A real deployment names its model here ("openai:gpt-4o-mini"): the executor performs it.
support = Agent(
    FunctionModel(_demo_model, model_name="demo"),
    name="support",
    instructions=(
        "You are a support agent. Look the customer up in the CRM, refund the case's amount "
        "for the order to the account on file, and answer in one line."
    ),
)
support.tool_plain(crm_lookup)


@support.tool_plain
def issue_refund(recipient: str, amount_eur: float, order: str) -> dict[str, Any]:
    """Refund ``amount_eur`` EUR for ``order`` to the account ``recipient``."""
    return {"refund_id": f"rf-{order}", "recipient": recipient, "amount_eur": amount_eur}


DURABLE = DurableAgent(
    support,
    name=CAPABILITY,
    effects=(
        EffectDecl("crm_lookup", mutating=False, recovery=Recovery.RETRY),
        EffectDecl("issue_refund", mutating=True, recovery=Recovery.RETRY, needs_approval=True),
    ),
)


@sinks(
    SinkDecl(
        "tool://issue_refund", protected=(FieldRule("$.recipient", sources=("tool://crm_lookup",)),)
    )
)
@agent(
    CAPABILITY,
    input_schema=INPUT_SCHEMA,
    tools=DURABLE.tools,
    effects=DURABLE.effects,
    models=[DURABLE.provider],
)
async def support_pydai(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    result = await DURABLE.run(ctx, canonical_json(input))
    return {"answer": result.output}
