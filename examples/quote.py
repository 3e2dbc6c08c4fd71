"""An agent with tools of its author's own, served by the stock executor unchanged.

- ``shipping_days`` is a Python function in this module, declared a tool with ``@tool``
  (not mutating, so a crash mid-call simply asks again);
- ``fx_rate`` is an HTTP tool declared in the tools config the executor mounts
  (``examples/tools/quote.yaml``: endpoint, method, and the API token's environment variable).

``runplane serve executor`` with ``RUNPLANE_AGENT_MODULES=examples.quote`` and
``RUNPLANE_TOOLS_CONFIG=examples/tools/quote.yaml`` serves both: importing this module
registers the Python tool, the config adds the HTTP one. Admission refuses a ``quote`` run
while the executor offers either not (``tools=`` names what the agent calls).
"""

from __future__ import annotations

from typing import Any

from runplane.core import StepCtx, agent
from runplane.providers import tool

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "country": {"type": "string", "minLength": 2},
        "currency": {"type": "string", "minLength": 3},
        "amount_eur": {"type": "number"},
    },
    "required": ["country", "currency", "amount_eur"],
}


@tool(mutating=False, recovery="retry", timeout_s=5)
def shipping_days(country: str) -> dict[str, Any]:
    """Days to deliver to ``country`` (a stand-in for the author's own lookup)."""
    return {"country": country, "days": 2 if country in ("NL", "BE", "DE") else 6}


@agent("quote", input_schema=INPUT_SCHEMA, tools=("shipping_days", "fx_rate"))
async def quote(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    shipping = await ctx.tool("shipping_days", {"country": input["country"]})
    fx = await ctx.tool("fx_rate", {"currency": input["currency"]})
    return {
        "amount": round(float(input["amount_eur"]) * float(fx["rate"]), 2),
        "currency": input["currency"],
        "delivery_days": shipping["days"],
    }
