"""A plan with fan-out: triage a payment by commissioning two agents at once.

    plan.triage ──┬── risk.score  (child run: one slow read-only tool call)
                  ├── fraud.check (child run: one slow read-only tool call)
                  └── decide      (child run, on both outputs)

``plan.triage`` runs ``fan_out_plan(["risk.score", "fraud.check"], "decide")``: the plan is
journaled before anything runs; the two branches are commissioned together, each a child run
admitted under a key derived from the parent's position (``runplane.child/<run>/<era>/<seq>``),
so a parent replayed after a crash never starts a second child; their results come back as
signals and are applied in ready order; ``decide`` gets both by node id.

``plan.delegate`` commissions ``plan.notify`` under a ``Delegation`` that grants the scoring
tool only: the child runs under it (its executor refuses the notification, typed and
journaled, ``DelegationRefused``), while ``plan.notify`` started directly may notify.

``plan.checkpointed`` is a checkpointed agent that commissions: a restore re-executes it in a
new era, and the commission it issues again names the same child (a key derived from the
request, not the position), so it still starts exactly one.

``plan.lookup`` fans out N read-only tool calls inside one run (``ctx.parallel``): the executor
performs them concurrently; ``plan.sequential`` does the same calls one after another
(``benchmarks/fanout.py`` compares the two).
"""

from __future__ import annotations

import asyncio
from typing import Any

from runplane.core import StepCtx, agent
from runplane.core.effect import EffectError
from runplane.core.plan import AllSucceeded, Delegation, Scope
from runplane.providers import TOOLS, tool

TOOL_NAMES = ("scoring/risk", "scoring/fraud", "scoring/slow_lookup", "notify/post")


@tool("scoring/risk", mutating=False, recovery="retry")
async def risk_tool(amount: float, slow_s: float = 0.0) -> dict[str, Any]:
    await asyncio.sleep(slow_s)
    return {"score": min(100, int(amount) // 10)}


@tool("scoring/fraud", mutating=False, recovery="retry")
async def fraud_tool(account: str, slow_s: float = 0.0) -> dict[str, Any]:
    await asyncio.sleep(slow_s)
    return {"fraud": account.startswith("x-")}


@tool("notify/post", mutating=True, recovery="retry")  # a stand-in, idempotent by account
async def notify_post(account: str, score: int) -> dict[str, Any]:
    return {"posted": account, "score": score}


@tool("scoring/slow_lookup", mutating=False, recovery="retry")
async def slow_lookup(i: int, slow_s: float = 0.0) -> dict[str, Any]:
    await asyncio.sleep(slow_s)
    return {"i": i}


# Each agent carries the declaration of the tools it calls (read-only, recovery retry): the
# engine knows a branch is safe to fan out without asking the executor's tool catalogue.
@agent("risk.score", effects=[TOOLS["scoring/risk"].decl])
async def risk_score(ctx: StepCtx, input: dict[str, Any]) -> Any:
    args = {"amount": input["amount"], "slow_s": input.get("slow_s", 0.0)}
    return await ctx.tool("scoring/risk", args)


@agent("fraud.check", effects=[TOOLS["scoring/fraud"].decl])
async def fraud_check(ctx: StepCtx, input: dict[str, Any]) -> Any:
    args = {"account": input["account"], "slow_s": input.get("slow_s", 0.0)}
    return await ctx.tool("scoring/fraud", args)


@agent("decide")
async def decide(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    score = input["risk_score"]["score"]
    fraud = input["fraud_check"]["fraud"]
    return {"approve": not fraud and score < 50, "score": score, "fraud": fraud}


@agent("plan.triage")
async def triage(ctx: StepCtx, input: dict[str, Any]) -> Any:
    return await ctx.fan_out(["risk.score", "fraud.check"], "decide", input)


@agent("plan.checkpointed", durability="checkpointed")
async def checkpointed(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    child_input = {"amount": input["amount"], "slow_s": input.get("slow_s", 0.0)}
    risk = await ctx.commission("risk.score", child_input)
    return {"score": risk["score"], "era": ctx.era}  # era > 0: it was restored


@agent("plan.lookup", effects=[TOOLS["scoring/slow_lookup"].decl])
async def lookup(ctx: StepCtx, input: dict[str, Any]) -> Any:
    calls = {
        f"n{i:03d}": ctx.tool("scoring/slow_lookup", {"i": i, "slow_s": input["slow_s"]})
        for i in range(input["n"])
    }
    status = await ctx.parallel(calls)
    if not isinstance(status, AllSucceeded):
        raise RuntimeError(f"lookups did not all succeed: {status}")
    return len(status.results)


@agent("plan.sequential", effects=[TOOLS["scoring/slow_lookup"].decl])
async def sequential(ctx: StepCtx, input: dict[str, Any]) -> Any:
    for i in range(input["n"]):
        await ctx.tool("scoring/slow_lookup", {"i": i, "slow_s": input["slow_s"]})
    return input["n"]


@agent("plan.notify", effects=[TOOLS["scoring/risk"].decl, TOOLS["notify/post"].decl])
async def notify(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    """Score, then tell the account holder: the second call is a sink its delegation may
    exclude."""
    risk = await ctx.tool("scoring/risk", {"amount": input["amount"]})
    try:
        await ctx.tool("notify/post", {"account": input["account"], "score": risk["score"]})
    except EffectError as exc:
        return {"score": risk["score"], "notified": exc.type}
    return {"score": risk["score"], "notified": True}


# What ``plan.delegate`` hands on: commission plan.notify (presented by plan.delegate), whose
# run may reach the scoring tool and nothing else, until the instant the input names.
def scoring_only(not_after_ms: int | None) -> Delegation:
    return Delegation(
        Scope(
            frozenset({"plan.notify"}),
            frozenset({"tool://scoring/risk"}),
            frozenset({"plan.delegate"}),
            not_after_ms,
        )
    )


@agent("plan.delegate")
async def delegate(ctx: StepCtx, input: dict[str, Any]) -> Any:
    child_input = {"amount": input["amount"], "account": input["account"]}
    return await ctx.commission(
        "plan.notify", child_input, delegation=scoring_only(input.get("not_after_ms"))
    )
