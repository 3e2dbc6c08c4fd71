"""Handoffs are commissions (issue 27 item 5): a capability offered to the model as a tool; a
call to it is a child run through admission under a narrowed delegation, and the child's
answer is the tool's result the model reads next."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runplane.core import AgentRegistry, LiveCall, replay_history
from runplane.core.ctx import StepCtx
from runplane.core.loop import Handoff, LoopBudget
from runplane.core.plan import Delegation, Scope
from runplane.core.turns import ToolSpec
from runplane.testing import Call, Driver, ScriptedModel, Seen
from runplane.wire import RunStatus

BILLING = Handoff(
    "loop.billing",
    description="The billing agent: balances and invoices.",
    input_schema={
        "type": "object",
        "properties": {"customer_id": {"type": "string"}},
        "required": ["customer_id"],
    },
)


def _answer(seen: Seen) -> str:
    return f"Your balance is {seen.result(BILLING.tool)['balance_eur']} EUR."


SCRIPT: list[Any] = [[Call(BILLING.tool, {"customer_id": "c-1"})], _answer]


def _registry(handoff: Handoff = BILLING, *, delegation: Delegation | None = None) -> AgentRegistry:
    reg = AgentRegistry()

    @reg.agent("loop.billing")
    async def billing(ctx: StepCtx, input: Any) -> Any:
        return {"customer_id": input["customer_id"], "balance_eur": 40}

    @reg.agent("loop.front", models=["scripted"])
    async def front(ctx: StepCtx, input: Any) -> Any:
        result = await ctx.agent_loop(
            "scripted",
            "front-1",
            "You answer customers; billing questions go to billing.",
            input,
            tools=[],
            handoffs=[handoff],
            budget=LoopBudget(turns=4),
        )
        return {
            "status": str(result.status),
            "text": result.text,
            "calls": [[c.call.name, c.ok, c.error_type, c.value] for c in result.calls],
        }

    @reg.agent("boss")
    async def boss(ctx: StepCtx, input: Any) -> Any:
        return await ctx.commission("loop.front", input, delegation=delegation)

    return reg


def test_a_handoff_is_offered_as_a_tool_and_its_child_answers_the_call() -> None:
    model = ScriptedModel(SCRIPT)
    d = Driver(_registry(), providers={"scripted": model})
    view = d.run("loop.front", {"question": "what do I owe?"})
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output["status"] == "answered"
    assert view.output["text"] == "Your balance is 40 EUR."
    (child,) = d.children.values()
    child_view = d.view(child)
    assert child_view.output == {"customer_id": "c-1", "balance_eur": 40}
    assert view.output["calls"] == [
        [BILLING.tool, True, None, {"customer_id": "c-1", "balance_eur": 40}]
    ]
    # The model read the child's answer as the tool's result (provenance agent/<capability>).
    tool_message = next(m for m in model.prompts[1] if m.role == "tool")
    assert json.loads(tool_message.content)["balance_eur"] == 40
    recorded = [e for e in view.results.values() if e.family == "commission"]
    assert len(recorded) == 1 and recorded[0].ok
    assert d.verify(view.session_id).ok and d.verify(child).ok


def test_the_offer_names_the_handoff_with_its_schema() -> None:
    assert BILLING.tool == "handoff_loop_billing"
    spec = BILLING.spec()
    assert spec == ToolSpec(
        "handoff_loop_billing", "The billing agent: balances and invoices.", BILLING.input_schema
    )
    plain = Handoff("a.b/c d")
    assert plain.tool == "handoff_a_b_c_d"
    assert plain.spec().parameters["required"] == ["request"]
    with pytest.raises(ValueError):
        Handoff("")


def test_a_tool_and_a_handoff_under_one_name_are_refused() -> None:
    reg = _registry(Handoff("loop.billing", tool="dup"))

    @reg.agent("loop.dup", models=["scripted"])
    async def dup(ctx: StepCtx, input: Any) -> Any:
        await ctx.agent_loop(
            "scripted", "m", "", input, tools=["dup"], handoffs=[Handoff("x", tool="dup")]
        )

    d = Driver(reg, providers={"scripted": ScriptedModel(SCRIPT)})
    view = d.run("loop.dup", {})
    assert view.status is RunStatus.FAILED
    assert "offered once" in (view.error or "")


def test_a_replay_of_a_loop_that_handed_off_calls_nobody_and_starts_no_second_child() -> None:
    d = Driver(_registry(), providers={"scripted": ScriptedModel(SCRIPT)})
    view = d.run("loop.front", {})
    assert view.status is RunStatus.COMPLETED, view.error
    snap = d.sessions[view.session_id].snapshot
    assert snap is not None
    report = replay_history(d.agents.spec("loop.front"), snap, d.sessions[view.session_id].results)
    assert report.status is RunStatus.COMPLETED and report.live_calls == 0
    assert report.output == view.output
    assert len(d.children) == 1


def test_a_crash_after_the_handoff_starts_no_second_child_and_pays_no_turn_again() -> None:
    model = ScriptedModel(SCRIPT)
    d = Driver(_registry(), providers={"scripted": model})
    generations: list[int] = []

    def hook(phase: str, call: LiveCall) -> bool:
        # Before the turn that reads the child's answer is sent: the commission and its
        # result are recorded, the parent's runtime is lost.
        if phase == "before_act" and call.family == "generation":
            generations.append(call.call_seq)
            return len(generations) == 2
        return False

    d.crash_hook = hook
    view = d.run("loop.front", {})
    assert d.crashes == 1
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output["text"] == "Your balance is 40 EUR."
    assert len(d.children) == 1  # the derived admission key: one child, ever
    assert model.calls == 2  # no recorded turn paid again
    assert d.verify(view.session_id).ok


def _scope(caps: set[str], sinks: set[str], audience: set[str]) -> Scope:
    return Scope(frozenset(caps), frozenset(sinks), frozenset(audience))


def test_the_child_runs_under_the_parents_delegation_narrowed_to_its_capability() -> None:
    held = Delegation(
        _scope(
            {"loop.front", "loop.billing", "loop.payouts"},
            {"model:scripted/front-1", "agent/loop.billing"},
            {"boss", "loop.front"},
        )
    )
    d = Driver(_registry(delegation=held), providers={"scripted": ScriptedModel(SCRIPT)})
    view = d.run("boss", {})
    assert view.status is RunStatus.COMPLETED, view.error
    chains = {
        d.view(sid).journal[0].attrs.get("capability", ""): json.loads(
            d.view(sid).journal[0].attrs["delegation"]
        )
        for sid in d.children.values()
    }
    assert set(chains) == {"loop.front", "loop.billing"}, chains
    narrowed = chains["loop.billing"]["chain"]
    assert narrowed[:1] == held.to_json()["chain"]
    assert narrowed[-1]["capabilities"] == ["loop.billing"]  # narrowed to this one agent
    assert view.output["text"] == "Your balance is 40 EUR."


def test_a_handoff_outside_the_held_delegation_is_a_tool_error_the_model_reads() -> None:
    held = Delegation(_scope({"loop.front"}, {"model:scripted/front-1"}, {"boss", "loop.front"}))
    refusal: list[str] = []

    def after_refusal(seen: Seen) -> str:
        refusal.extend(seen.errors)
        return "I could not reach billing."

    model = ScriptedModel([SCRIPT[0], after_refusal])
    d = Driver(_registry(delegation=held), providers={"scripted": model})
    view = d.run("boss", {})
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output["text"] == "I could not reach billing."
    assert view.output["calls"][0][:3] == [BILLING.tool, False, "DelegationRefused"]
    assert refusal and refusal[0].startswith("DelegationRefused")
    assert len(d.children) == 1  # only loop.front: billing never started
