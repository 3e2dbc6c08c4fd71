"""The support scenario of ``tests.helpers.support_loop`` written as an OpenAI Agents SDK agent
and run through ``runplane.contrib.openai_agents``, for the Driver tests and the broker tests.

The SDK agent offers the five tools as function tools; their bodies here are never called —
what performs a call is the runplane tool of the same name (the Driver's stand-ins, or the
broker test's HTTP tools), the point of the adapter. The agents are registered in their own
registries (``AGENTS``; ``register`` for the broker), so nothing that walks the default
registry sees a test agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents import Agent, function_tool

from runplane.contrib.openai_agents import run_agent
from runplane.core import AgentRegistry, EffectDecl, Recovery, StepCtx
from runplane.core.gate import sinks
from runplane.wire import JournalKind
from tests.helpers.support_loop import REFUND_SINK

BROKER = "oai.broker"  # the capability the broker tests serve (``openai_agents_broker_served``)
TOOLS = ("crm_lookup", "fetch_document", "order_status", "refund", "add_note")
INSTRUCTIONS = "You are a support agent. Refund only to the account on file."


def _unused(name: str) -> dict[str, Any]:
    raise AssertionError(f"the SDK ran {name}'s body: the call bypassed runplane")


@function_tool
def crm_lookup(customer_id: str) -> dict[str, Any]:
    """The customer's record: name, account, orders."""
    return _unused("crm_lookup")


@function_tool
def fetch_document(document_id: str) -> dict[str, Any]:
    """A document the customer uploaded."""
    return _unused("fetch_document")


@function_tool
def order_status(order: str) -> dict[str, Any]:
    """Where an order is."""
    return _unused("order_status")


@function_tool
def refund(recipient: str, amount_eur: float, order: str) -> dict[str, Any]:
    """Refund an order to an account."""
    return _unused("refund")


@function_tool
def add_note(note: str) -> dict[str, Any]:
    """Add a note to the case."""
    return _unused("add_note")


SUPPORT = Agent(
    name="support",
    instructions=INSTRUCTIONS,
    tools=[crm_lookup, fetch_document, order_status, refund, add_note],
)

EFFECTS = (
    EffectDecl("crm_lookup", mutating=False, recovery=Recovery.RETRY),
    EffectDecl("fetch_document", mutating=False, recovery=Recovery.RETRY),
    EffectDecl("order_status", mutating=False, recovery=Recovery.RETRY),
    EffectDecl("refund", mutating=True, recovery=Recovery.RETRY),
    EffectDecl("add_note", mutating=True, recovery=Recovery.RETRY),
)


def build(provider: str, model: str) -> Callable[[StepCtx, dict[str, Any]], Any]:
    @sinks(REFUND_SINK)
    async def support(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
        result = await run_agent(
            ctx, SUPPORT, f"Case: {input}", provider=provider, model=model, max_turns=12
        )
        return {"answer": result.final_output, "items": len(result.new_items)}

    return support


def register(
    registry: AgentRegistry, capability: str, provider: str, model: str, **declared: Any
) -> None:
    registry.agent(capability, models=[provider], tools=TOOLS, **declared)(build(provider, model))


AGENTS = AgentRegistry()
register(AGENTS, "oai.support", "scripted", "support-1", effects=EFFECTS)


def performed(journal: Any, tool: str) -> list[Any]:
    """The recorded results of ``tool``'s calls that were performed (not refused)."""
    return [
        r
        for r in journal
        if r.name == f"tool://{tool}"
        and r.kind is JournalKind.EFFECT_RECORDED
        and r.attrs.get("gate") != "refused"
    ]
