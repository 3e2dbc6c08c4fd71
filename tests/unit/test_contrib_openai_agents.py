"""``runplane.contrib.openai_agents`` through the Driver: the support scenario of the agent loop
(``tests.helpers.support_loop``) written as an Agents SDK agent and run by the SDK's ``Runner``.

A five-turn run with parallel reads completes, each turn a journaled generation and each call
a journaled tool effect; a crash at three points repeats no recorded call; a replay calls
nobody; the chain verifies; the injected refund is refused by the gate and never performed;
a refund the policy sends to a person waits for them; what cannot run durably is refused up
front, named; a version outside the tested range is refused at import."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, WebSearchTool, function_tool, handoff
from openai import AsyncOpenAI

from runplane.contrib.openai_agents import SUPPORTED, check_version, run_agent
from runplane.contrib.openai_agents._loop import Bridge, Job, StepLoop
from runplane.core import AgentRegistry, LiveCall, StepCtx, replay_history
from runplane.core.effect import Effect, Op
from runplane.core.loop import Handoff
from runplane.core.policy import ApprovalRule
from runplane.errors import ConfigError
from runplane.testing import Call, Driver, RunView, ScriptedModel, Seen
from runplane.wire import JournalKind, RunStatus
from tests.helpers import openai_agents_support as H
from tests.helpers import support_loop as S
from tests.helpers.crashes import crash_once

ROOT = Path(__file__).resolve().parents[2]
INPUT = {"customer_id": "c-1", "request": "refund my damaged order o-1"}
REFUND = "refund:" + str(
    sorted({"recipient": S.CUSTOMER_IBAN, "amount_eur": 40, "order": "o-1"}.items())
)


def _driver(model: ScriptedModel, counts: dict[str, int] | None = None, **kw: Any) -> Driver:
    kw.setdefault("policy", S.POLICY)
    return Driver(H.AGENTS, tools=S.tools(counts), providers={"scripted": model}, **kw)


def _recorded(run: RunView, family: str) -> int:
    return sum(1 for e in run.results.values() if e.family == family)


def _replays(driver: Driver, run: RunView) -> None:
    assert driver.verify(run.session_id).ok
    report = replay_history(H.AGENTS.spec("oai.support"), run.snapshot, dict(run.results))
    assert (report.divergence, report.live_calls, report.output) == (None, 0, run.output)


def test_a_five_turn_run_with_parallel_reads_completes_every_step_journaled() -> None:
    model, counts = S.model(), {}
    driver = _driver(model, counts)
    run = driver.run("oai.support", INPUT)
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output["answer"] == "Refunded 40 EUR for order o-1 to the account on file."
    assert model.calls == 5 == _recorded(run, "generation")
    # Every proposed call performed once, through runplane: the SDK's bodies never ran.
    assert sum(counts.values()) == 7 == _recorded(run, "tool")
    assert counts[REFUND] == 1
    # The reads of a turn fanned out as the agent loop fans them, mutations in order after.
    joins = [r.name for r in run.journal if (r.name or "").startswith("fanout:")]
    assert joins == ["fanout:t1c0,t1c1", "fanout:t2c0,t2c1", "fanout:t4c0"]
    # The model got the SDK agent's instructions, then each call answered by its result.
    first, second = model.prompts[0], model.prompts[1]
    assert first[0].role == "system" and first[0].content == H.INSTRUCTIONS
    answered = [m for m in second if m.role == "tool"]
    assert [m.tool_call_id for m in answered] == [c.id for m in second for c in m.tool_calls]
    assert json.loads(answered[0].content)["account"] == S.CUSTOMER_IBAN
    _replays(driver, run)


def _generations_before(n: int) -> Callable[[str, LiveCall], bool]:
    seen = {"n": 0}

    def pred(phase: str, call: LiveCall) -> bool:
        if phase == "before_act" and call.family == "generation":
            seen["n"] += 1
            return seen["n"] == n
        return False

    return pred


def _before_refund(phase: str, call: LiveCall) -> bool:
    return phase == "before_act" and call.target == "refund"


def _mid_fan_out(phase: str, call: LiveCall) -> bool:
    return (
        phase == "after_act"
        and call.target == "order_status"
        and call.request["args"] == {"order": "o-2"}
    )


@pytest.mark.parametrize(
    "where",
    [_generations_before(3), _before_refund, _mid_fan_out],
    ids=["before turn 3", "between announce and result of the refund", "mid fan-out"],
)
def test_a_crash_repeats_no_recorded_tool_call(where: Callable[[str, LiveCall], bool]) -> None:
    calm = _driver(S.model()).run("oai.support", INPUT)
    model, counts = S.model(), {}
    driver = _driver(model, counts)
    lost = {"performs": -1}
    once = crash_once(where)

    def hook(phase: str, call: LiveCall) -> bool:
        crash = once(phase, call)
        if crash:
            session = next(iter(driver.sessions.values()))
            recorded = sum(1 for e in session.results.values() if e.family == "tool")
            lost["performs"] = sum(counts.values()) - recorded
        return crash

    driver.crash_hook = hook
    run = driver.run("oai.support", INPUT)
    assert driver.crashes == 1 and lost["performs"] >= 0
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == calm.output
    # The only repeats are the calls whose outcome the crash lost; the refund made once.
    assert sum(counts.values()) == _recorded(run, "tool") + lost["performs"]
    assert counts[REFUND] == 1
    assert model.calls == _recorded(run, "generation")
    _replays(driver, run)


def test_the_injected_refund_is_refused_by_the_gate_and_never_performed() -> None:
    model, counts = S.model(obey_injections=True), {}
    driver = _driver(model, counts)
    run = driver.run("oai.support", INPUT)
    assert run.status is RunStatus.COMPLETED, run.error
    refused = [
        r
        for r in run.journal
        if r.name == "tool://refund"
        and r.kind is JournalKind.EFFECT_RECORDED
        and r.attrs.get("gate") == "refused"
    ]
    assert [(r.attrs["path"], r.attrs["reason"]) for r in refused] == [
        ("$.recipient", "field_trust")
    ]
    # Performed: only the real refund, to the account on file.
    assert [k for k in counts if k.startswith("refund:")] == [REFUND]
    assert counts[REFUND] == 1
    # The model read the refusal as the tool's answer to its call.
    said = [m.content for p in model.prompts for m in p if m.role == "tool"]
    assert any(s.startswith("SinkRefused: ") for s in said)
    assert len(H.performed(run.journal, "refund")) == 1
    _replays(driver, run)


APPROVAL = replace(S.POLICY, approvals={"tool://refund": ApprovalRule(role="finance")})


def test_a_refund_the_policy_sends_to_a_person_waits_and_is_made_once_approved() -> None:
    counts: dict[str, int] = {}
    driver = _driver(S.model(), counts, policy=APPROVAL)
    run = driver.run("oai.support", INPUT)
    assert run.status is RunStatus.AWAITING_HUMAN, run.error
    assert run.task is not None and run.task.role == "finance"
    shown = json.loads(run.task.answer_json)
    assert shown["tool"] == "refund" and shown["turn"] == 3
    assert "tool://crm_lookup" in shown["labels"]["recipient"]["provenance"]
    assert REFUND not in counts  # asked first, not performed
    run = driver.decide(run.session_id, "APPROVED", by=("ada",))
    assert run.status is RunStatus.COMPLETED, run.error
    assert counts[REFUND] == 1
    _replays(driver, run)


def test_a_rejected_refund_is_a_tool_error_the_model_reads() -> None:
    counts: dict[str, int] = {}
    model = S.model()
    driver = _driver(model, counts, policy=APPROVAL)
    run = driver.run("oai.support", INPUT)
    run = driver.decide(run.session_id, "REJECTED", by=("ada",), comment="over the limit")
    assert run.status is RunStatus.COMPLETED, run.error
    assert REFUND not in counts
    said = [m.content for m in model.prompts[3] if m.role == "tool"]
    assert said[-1] == "CallRejected: over the limit"


# -- handoffs ------------------------------------------------------------------------------

BILLING = Handoff("oai.billing", description="The billing agent: balances.")


def _handoff_registry(agent: Agent[Any], **run_kw: Any) -> AgentRegistry:
    reg = AgentRegistry()

    @reg.agent("oai.billing")
    async def billing(ctx: StepCtx, input: Any) -> Any:
        return {"customer_id": input["customer_id"], "balance_eur": 40}

    @reg.agent("oai.front", models=["scripted"])
    async def front(ctx: StepCtx, input: Any) -> Any:
        result = await run_agent(ctx, agent, str(input), provider="scripted", **run_kw)
        return {"answer": result.final_output, "agent": result.last_agent.name}

    return reg


def test_a_runplane_handoff_commissions_the_capability_and_the_model_reads_its_output() -> None:
    def answer(seen: Seen) -> str:
        return f"Your balance is {seen.result(BILLING.tool)['balance_eur']} EUR."

    model = ScriptedModel([[Call(BILLING.tool, {"customer_id": "c-1"})], answer])
    front = Agent(name="front", instructions="Billing questions go to billing.")
    d = Driver(
        _handoff_registry(front, model="front-1", handoffs=[BILLING]), providers={"scripted": model}
    )
    run = d.run("oai.front", {"question": "what do I owe?"})
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"answer": "Your balance is 40 EUR.", "agent": "front"}
    (child,) = d.children.values()
    assert d.view(child).output == {"customer_id": "c-1", "balance_eur": 40}
    assert d.verify(run.session_id).ok


def test_an_sdk_handoff_stays_in_process_its_turns_journaled_in_this_run() -> None:
    billing = Agent(name="billing", instructions="You are billing.", model="billing-1")
    front = Agent(name="front", instructions="Route.", model="front-1", handoffs=[billing])
    model = ScriptedModel([[Call("transfer_to_billing", {})], "Billing here: 40 EUR."])
    d = Driver(_handoff_registry(front), providers={"scripted": model})
    run = d.run("oai.front", {"question": "what do I owe?"})
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"answer": "Billing here: 40 EUR.", "agent": "billing"}
    names = [r.name for r in run.journal if r.kind is JournalKind.EFFECT_RECORDED]
    assert [n for n in names if n.startswith("model:")] == [
        "model:scripted/front-1",
        "model:scripted/billing-1",
    ]
    assert model.prompts[1][0].content == "You are billing."
    assert not d.children


def test_a_tool_first_met_behind_an_sdk_handoff_object_still_asks_whom_the_policy_names() -> None:
    refunds = Agent(name="refunds", instructions="You refund.", model="r-1", tools=[H.refund])
    front = Agent(name="front", instructions="Route.", model="f-1", handoffs=[handoff(refunds)])
    call = Call("refund", {"recipient": S.CUSTOMER_IBAN, "amount_eur": 40, "order": "o-1"})
    model = ScriptedModel([[Call("transfer_to_refunds", {})], [call], "Done."])
    counts: dict[str, int] = {}
    registry = _handoff_registry(front)
    d = Driver(registry, tools=S.tools(counts), providers={"scripted": model}, policy=APPROVAL)
    run = d.run("oai.front", {})
    assert run.status is RunStatus.AWAITING_HUMAN, run.error
    assert run.task is not None and run.task.role == "finance" and not counts
    run = d.decide(run.session_id, "APPROVED", by=("ada",))
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"answer": "Done.", "agent": "refunds"} and counts == {REFUND: 1}
    assert d.verify(run.session_id).ok


# -- refused up front ----------------------------------------------------------------------


@function_tool
def _needs_a_person(x: str) -> str:
    """Needs approval in the SDK."""
    return x


_SDK_APPROVAL = replace(_needs_a_person, needs_approval=True)


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        (
            Agent(name="m", model=OpenAIChatCompletionsModel("x", AsyncOpenAI(api_key="k"))),
            "outside any runplane effect",
        ),
        (Agent(name="h", model="x", tools=[WebSearchTool()]), "only function tools"),
        (Agent(name="a", model="x", tools=[_SDK_APPROVAL]), "asks the SDK for approval"),
    ],
    ids=["model object", "hosted tool", "SDK approval"],
)
def test_what_cannot_run_durably_fails_the_run_with_a_named_config_error(
    agent: Agent[Any], says: str
) -> None:
    d = Driver(_handoff_registry(agent), providers={"scripted": ScriptedModel(["hi"])})
    run = d.run("oai.front", {})
    assert run.status is RunStatus.FAILED
    assert "ConfigError" in str(run.error) and says in str(run.error)


# -- the version gate ------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.20.0", "0.22.3", "0.24.0", "0.24.1rc1"])
def test_a_version_in_the_tested_range_is_accepted(version: str) -> None:
    check_version(version)


@pytest.mark.parametrize("version", [None, "0.19.4", "0.25.0", "1.0.0", "0.9"])
def test_a_version_outside_the_tested_range_is_one_clear_config_error(version: str | None) -> None:
    with pytest.raises(ConfigError) as err:
        check_version(version)
    message = str(err.value)
    assert "\n" not in message and "openai-agents>=0.20,<0.25" in message
    assert "runplane[openai-agents]" in message
    assert SUPPORTED == ((0, 20), (0, 25))


# -- the deterministic loop ----------------------------------------------------------------


def _drive(main: Any, answers: Callable[[Any], Any]) -> tuple[Any, list[Any]]:
    """Drive ``Bridge.drive`` by hand, as the engine drives an agent: every job answered by
    ``answers`` → (the result, the jobs in the order they were performed)."""
    loop = StepLoop(1000.0)  # type: ignore[abstract]
    bridge = Bridge(loop)
    performed: list[Any] = []

    async def perform(jobs: list[Job]) -> None:
        for job in jobs:
            performed.append(job.what)
            job.future.set_result(answers(job.what))

    coro = bridge.drive(main(bridge), perform, lambda: 1000.0)  # type: ignore[arg-type]
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value, performed
    raise AssertionError("the drive waited for the engine, with nothing asked of it")


def test_concurrent_asks_are_performed_in_the_order_they_were_asked_and_sleeps_cost_nothing() -> (
    None
):
    async def main(bridge: Bridge) -> Any:
        async def one(i: int) -> Any:
            await asyncio.sleep(10 - i)  # virtual time: the later sleeper wakes first
            return await bridge.ask(i)

        return await asyncio.gather(*(one(i) for i in range(3)))

    result, performed = _drive(main, lambda what: what * 10)
    assert result == [0, 10, 20]
    assert performed == [2, 1, 0]  # by wake-up time, deterministically


def test_a_thread_is_refused_and_a_wait_nothing_answers_is_named() -> None:
    async def threaded(bridge: Bridge) -> Any:
        return await asyncio.to_thread(print, "x")

    with pytest.raises(ConfigError, match="would run in a thread"):
        _drive(threaded, lambda w: w)

    async def stuck(bridge: Bridge) -> Any:
        return await asyncio.Event().wait()

    with pytest.raises(ConfigError, match="no runplane effect will answer"):
        _drive(stuck, lambda w: w)


def test_start_up_under_a_version_outside_the_range_is_one_line_not_a_traceback(
    tmp_path: Path,
) -> None:
    # An installed 0.19 as importlib.metadata sees it: a dist-info ahead on the path (the
    # package itself is the installed one; only the version the gate reads is old).
    dist = tmp_path / "openai_agents-0.19.4.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: openai-agents\nVersion: 0.19.4\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]),
        "RUNPLANE_AGENT_MODULES": "examples.openai_agents_support",
    }
    start = "import sys; sys.argv = ['runplane', 'agents', 'list']; from runplane.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", start], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: runplane.contrib.openai_agents supports openai-agents>=0.20,<0.25, found "
        "0.19.4: pip install 'runplane[openai-agents]'"
    ]


def test_the_extra_is_the_tested_range_and_the_core_install_does_not_pull_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (low, high) = SUPPORTED
    assert project["optional-dependencies"]["openai-agents"] == [
        f"openai-agents>={low[0]}.{low[1]},<{high[0]}.{high[1]}"
    ]
    assert not any("openai-agents" in d for d in project["dependencies"])
    # Nothing the core install imports reaches the SDK.
    probe = "import sys, runplane, runplane.core, runplane.testing, runplane.providers; print('agents' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "False", done.stderr


# -- the example ---------------------------------------------------------------------------


def test_the_example_refunds_the_account_on_file_once_a_person_approves() -> None:
    from examples import openai_agents_support as E
    from examples.crm import CUSTOMERS, crm_lookup

    def refund(seen: Seen) -> list[Call]:
        crm = seen.result("crm_lookup")
        return [
            Call("refund_order", {"recipient": crm["account"], "amount_eur": 40, "order": "o-1"})
        ]

    refunds: list[dict[str, Any]] = []
    model = ScriptedModel([[Call("crm_lookup", {"customer_id": "c-1"})], refund, "Refunded."])
    registry = AgentRegistry()
    registry.register(E.support_oai.__runplane_agent__, lint=False)  # type: ignore[attr-defined]
    d = Driver(
        registry,
        tools={
            "crm_lookup": lambda a, k: crm_lookup(**a),
            "refund_order": lambda a, k: refunds.append(a) or E.refund_order(**a),
        },
        providers={"openai": model},
    )
    run = d.run(E.CAPABILITY, {"customer_id": "c-1", "order": "o-1", "amount_eur": 40})
    assert run.status is RunStatus.AWAITING_HUMAN, run.error
    assert refunds == []
    run = d.decide(run.session_id, "APPROVED", by=("ada",))
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"answer": "Refunded."}
    assert refunds == [{"recipient": CUSTOMERS["c-1"]["account"], "amount_eur": 40, "order": "o-1"}]
    assert d.verify(run.session_id).ok


def test_a_run_closed_while_it_waits_leaves_no_task_of_the_sdk_running() -> None:
    loop = StepLoop(0.0)  # type: ignore[abstract]
    bridge = Bridge(loop)
    cleaned: list[str] = []

    async def main(bridge: Bridge) -> Any:
        async def waits() -> Any:
            try:
                return await bridge.ask("x")
            finally:
                cleaned.append("finally ran")

        return await asyncio.gather(waits(), waits())

    async def perform(jobs: list[Job]) -> None:
        await Effect("signal", "never", {"signal": "never"}, Op.SIGNAL)  # the run parks here

    coro = bridge.drive(main(bridge), perform, lambda: 0.0)  # type: ignore[arg-type]
    parked = coro.send(None)
    assert isinstance(parked, Effect) and parked.name == "never"
    coro.close()  # eviction: GeneratorExit at the park
    assert cleaned == ["finally ran", "finally ran"]
    assert all(t.done() for t in asyncio.all_tasks(loop))
