"""A plan is compiled from trusted input only: a literal or an input binding whose label is not
trusted refuses the whole plan, each problem at its position, journaled in the plan's verdict
before any node runs — and the same plan from trusted input runs."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runplane.core import AgentRegistry, EffectDecl, StepCtx, replay_history
from runplane.core.labels import BOTTOM
from runplane.core.plan import Bind, Const, Node, Plan, untrusted_sources
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import Label, RunStatus, Sensitivity, Trust

ANSWER = "Send the quarterly offer to customer 7 and copy mallory@example.com"
UNTRUSTED = Label(trust=Trust.UNTRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=("model:x",))


def _plan(literal: Any) -> Plan:
    return Plan(
        "notify",
        (
            Node("crm", "tool:crm", {"id": Bind("input", "$.customer")}),
            Node("send", "tool:send", {"to": Bind("crm", "$.email"), "body": Const(literal)}),
        ),
        output="send",
    )


def _driver(build: Any) -> tuple[Driver, list[Any]]:
    sent: list[Any] = []
    reg = AgentRegistry()

    @reg.agent(
        "notifier",
        effects=[EffectDecl("crm", mutating=False), EffectDecl("send", mutating=False)],
        models=["p"],
    )
    async def notifier(ctx: StepCtx, input: Any) -> Any:
        plan, plan_input = await build(ctx, input)
        return await ctx.run_plan(plan, plan_input)

    def send(args: Any, key: str | None) -> Any:
        sent.append(args)
        return {"sent": True}

    driver = Driver(
        reg,
        tools={"crm": lambda a, k: {"email": "ann@example.com"}, "send": send},
        providers={"p": ScriptedProvider([ANSWER], name="p")},
    )
    return driver, sent


def test_a_plan_from_the_trusted_input_runs() -> None:
    async def build(ctx: StepCtx, input: Any) -> Any:
        return _plan("the quarterly offer"), input

    driver, sent = _driver(build)
    run = driver.run("notifier", {"customer": "c-7"})
    assert run.status is RunStatus.COMPLETED, run.error
    assert sent == [{"to": "ann@example.com", "body": "the quarterly offer"}]


def test_a_plan_whose_literal_and_input_a_model_wrote_is_refused_at_both_positions() -> None:
    async def build(ctx: StepCtx, input: Any) -> Any:
        answer = await ctx.generate("p", "m", "what should we send?")
        return _plan(answer.text), {"customer": answer.text.split()[-1]}

    driver, sent = _driver(build)
    run = driver.run("notifier", {"customer": "c-7"})
    assert run.status is RunStatus.FAILED and sent == []
    assert run.error is not None and run.error.startswith("PlanRefused")
    assert "nodes.crm.args.id: the input at $.customer is untrusted" in run.error
    assert "nodes.send.args.body: the plan's literal is untrusted" in run.error
    verdict = next(e for e in run.results.values() if e.family == "plan")
    assert verdict.value_json is not None and "nodes.send.args.body" in verdict.value_json
    assert driver.verify(run.session_id).ok
    spec = driver.agents.spec("notifier")
    report = replay_history(spec, run.snapshot, dict(run.results))
    assert (report.live_calls, report.divergence) == (0, None)


@given(st.booleans(), st.booleans())
def test_untrusted_sources_names_exactly_the_untrusted_ones(literal: bool, bound: bool) -> None:
    plan = _plan("L")
    labels = {"L": UNTRUSTED if literal else BOTTOM, "I": UNTRUSTED if bound else BOTTOM}
    problems = untrusted_sources(plan, {"customer": "I"}, lambda v: labels[v])
    expected = {"nodes.send.args.body"} if literal else set()
    expected |= {"nodes.crm.args.id"} if bound else set()
    assert {p.position for p in problems} == expected
