"""``runplane.contrib.pydantic_ai`` through the in-memory Driver, with Pydantic AI's own
``FunctionModel`` and ``TestModel``: a multi-turn run with tool calls completes, a crash
repeats no recorded call, a replay calls nobody, the chain verifies, the injected refund is
refused by the gate and never performed, a tool that needs approval parks the run, and a
version of the framework outside the tested range is refused at import."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import UsageLimits

from runplane.cli.serve import run_services
from runplane.config import Settings
from runplane.contrib.pydantic_ai import TESTED, DurableAgent, check_version, request_json
from runplane.core import AgentRegistry, EffectDecl, LiveCall, Recovery, StepCtx, replay_history
from runplane.core.canonical import canonical_json
from runplane.core.policy import ApprovalRule, Policy
from runplane.errors import ConfigError
from runplane.providers import ModelRegistry, ToolRegistry
from runplane.testing import Driver, RunView
from runplane.wire import JournalKind, RunStatus
from tests.helpers import pydantic_support as P
from tests.helpers.crashes import crash_once

ROOT = Path(__file__).resolve().parents[2]
PLAIN = {"customer_id": "c-1", "request": "refund my damaged order o-1"}
OBEDIENT = {**PLAIN, "obedient": True}


def _setup(policy: Policy = P.POLICY, **kw: Any) -> tuple[Driver, AgentRegistry]:
    agents = AgentRegistry()
    durable = P.build(agents, ToolRegistry(), ModelRegistry())
    driver = Driver(
        agents,
        tools=durable.tool_functions(),
        providers={durable.provider: durable.model_provider},
        policy=policy,
        **kw,
    )
    return driver, agents


@pytest.fixture(autouse=True)
def _counts() -> None:
    P.PERFORMED.clear()


def _recorded(run: RunView, family: str) -> int:
    return sum(1 for e in run.results.values() if e.family == family)


def _refund_key(recipient: str, amount: int) -> str:
    return P.call_key("refund", {"recipient": recipient, "amount_eur": amount, "order": "o-1"})


def test_a_multi_turn_run_with_tool_calls_completes_and_verifies() -> None:
    driver, _ = _setup()
    run = driver.run("pydai.support", PLAIN)
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output["answer"] == P.ANSWER
    # Four model turns, four tool calls, each a journaled effect performed once.
    assert _recorded(run, "generation") == 4
    assert _recorded(run, "tool") == 4
    assert sum(P.PERFORMED.values()) == 4
    assert P.PERFORMED[_refund_key(P.CUSTOMER_IBAN, 40)] == 1
    tools = [
        r.name for r in run.journal if r.family == "tool" and r.kind is JournalKind.EFFECT_RECORDED
    ]
    assert tools == [
        "tool://crm_lookup",
        "tool://fetch_document",
        "tool://refund",
        "tool://order_status",
    ]
    assert driver.verify(run.session_id).ok


def test_the_recorded_generation_carries_the_model_s_own_call_ids() -> None:
    driver, _ = _setup()
    run = driver.run("pydai.support", PLAIN)
    gens = [e for _, e in sorted(run.results.items()) if e.family == "generation"]
    assert len(gens) == 4
    first = json.loads(gens[0].value_json or "{}")
    # The proposed calls, in Generation.tool_calls' shape, with the FunctionModel's ids: the
    # sink gate finds each tool effect's proposal (option ``proposal``) there.
    assert [(c["id"], c["name"]) for c in first["tool_calls"]] == [
        ("call-0-0", "crm_lookup"),
        ("call-0-1", "fetch_document"),
    ]


def test_the_journaled_conversation_leaves_the_framework_s_clock_out() -> None:
    def asked(at: datetime) -> list[ModelMessage]:
        return [ModelRequest(parts=[UserPromptPart("hi", timestamp=at)], timestamp=at)]

    early = request_json(asked(datetime(2020, 1, 1, tzinfo=UTC)))
    late = request_json(asked(datetime(2030, 1, 1, tzinfo=UTC)))
    assert early == late
    assert early[0]["parts"][0]["content"] == "hi"
    # A tool's own "timestamp" in its result is content, kept.
    returned = ModelRequest(parts=[ToolReturnPart("t", {"timestamp": 5}, tool_call_id="c")])
    assert request_json([returned])[0]["parts"][0]["content"] == {"timestamp": 5}


def _before_turn_3(phase: str, call: LiveCall) -> bool:
    return phase == "before_act" and call.family == "generation" and call.call_seq > 5


def _before_refund(phase: str, call: LiveCall) -> bool:
    return phase == "before_act" and call.target == "refund"


def _after_order_status(phase: str, call: LiveCall) -> bool:
    return phase == "after_act" and call.target == "order_status"


@pytest.mark.parametrize("where", [_before_turn_3, _before_refund, _after_order_status])
def test_a_crash_repeats_no_recorded_tool_call(where: Callable[[str, LiveCall], bool]) -> None:
    calm_driver, _ = _setup()
    calm = calm_driver.run("pydai.support", PLAIN)
    P.PERFORMED.clear()
    driver, _ = _setup(crash_hook=crash_once(where))
    lost = {"performs": 0}
    hook = driver.crash_hook
    assert hook is not None

    def counting(phase: str, call: LiveCall) -> bool:
        crash = hook(phase, call)
        if crash:
            session = next(iter(driver.sessions.values()))
            recorded = sum(1 for e in session.results.values() if e.family == "tool")
            lost["performs"] = sum(P.PERFORMED.values()) - recorded
        return crash

    driver.crash_hook = counting
    run = driver.run("pydai.support", PLAIN)
    assert driver.crashes == 1
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == calm.output
    assert driver.verify(run.session_id).ok
    # Only a call whose outcome the crash lost is performed again; none recorded is.
    assert sum(P.PERFORMED.values()) == _recorded(run, "tool") + lost["performs"]
    assert lost["performs"] <= 1
    assert P.PERFORMED[_refund_key(P.CUSTOMER_IBAN, 40)] == 1


def test_a_replay_of_a_recorded_run_calls_nobody() -> None:
    driver, agents = _setup()
    run = driver.run("pydai.support", OBEDIENT)
    performed = sum(P.PERFORMED.values())
    report = replay_history(agents.spec("pydai.support"), run.snapshot, dict(run.results))
    assert report.divergence is None and report.live_calls == 0
    assert report.output == run.output and report.replayed == len(run.results)
    assert sum(P.PERFORMED.values()) == performed  # no tool reached


def test_the_injected_refund_is_refused_by_the_gate_and_never_performed() -> None:
    driver, _ = _setup()
    run = driver.run("pydai.support", OBEDIENT)
    assert run.status is RunStatus.COMPLETED, run.error
    refused = [
        e for e in run.results.values() if e.family == "tool" and not e.ok and e.error is not None
    ]
    assert [(e.name, e.error.type) for e in refused] == [("tool://refund", "SinkRefused")]
    assert not any(P.ATTACKER in k for k in P.PERFORMED)
    # The model read the refusal as the tool's result and went on to the real refund.
    assert P.PERFORMED[_refund_key(P.CUSTOMER_IBAN, 40)] == 1
    assert run.output["answer"] == P.ANSWER
    assert driver.verify(run.session_id).ok


def test_a_recipient_that_is_no_copy_of_the_crm_s_is_refused_with_nothing_untrusted() -> None:
    # No policy: the Driver's stand-ins carry no label, so the document reads as trusted here
    # (an executor applies the DurableAgent's ``untrusted``); the attacker's recipient is
    # still no verbatim copy of the CRM's value, so the source rule refuses it.
    driver, _ = _setup(policy=Policy())
    run = driver.run("pydai.support", OBEDIENT)
    assert run.status is RunStatus.COMPLETED, run.error
    refused = [e.name for e in run.results.values() if e.error is not None]
    assert refused == ["tool://refund"]
    assert not any(P.ATTACKER in k for k in P.PERFORMED)


@pytest.mark.parametrize("evicted", [False, True])
def test_a_tool_the_policy_marks_for_approval_parks_the_run_until_a_person_decides(
    evicted: bool,
) -> None:
    policy = Policy(sources=P.POLICY.sources, approvals={"tool://refund": ApprovalRule("finance")})
    driver, _ = _setup(policy=policy)
    run = driver.run("pydai.support", PLAIN)
    assert run.status is RunStatus.AWAITING_HUMAN, run.error
    assert run.task is not None and run.task.role == "finance"
    assert P.PERFORMED[_refund_key(P.CUSTOMER_IBAN, 40)] == 0
    before = sum(P.PERFORMED.values())
    if evicted:  # the parked run leaves memory: the decision rebuilds it by replay
        driver.crash(run.session_id)
    run = driver.decide(run.session_id, "APPROVED")
    assert run.status is RunStatus.COMPLETED, run.error
    assert P.PERFORMED[_refund_key(P.CUSTOMER_IBAN, 40)] == 1
    # The reads before the approval were served from the journal, not made again.
    assert sum(P.PERFORMED.values()) == before + 2  # the refund and the order check
    assert driver.verify(run.session_id).ok
    # The evicted era's framework thread was unwound, not left waiting.
    assert _framework_threads() == []


def _framework_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "runplane-pydantic-ai"]


def test_an_error_the_framework_raises_fails_the_run_and_leaves_no_thread() -> None:
    agents = AgentRegistry()
    durable = DurableAgent(
        P.pydantic_agent(), effects=P.EFFECTS, tools=ToolRegistry(), models=ModelRegistry()
    )

    async def limited(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
        result = await durable.run(
            ctx, canonical_json(input), usage_limits=UsageLimits(request_limit=1)
        )
        return {"answer": result.output}

    agents.agent("pydai.limited", effects=durable.effects, models=[durable.provider])(limited)
    driver = Driver(
        agents,
        tools=durable.tool_functions(),
        providers={durable.provider: durable.model_provider},
    )
    run = driver.run("pydai.limited", PLAIN)
    assert run.status is RunStatus.FAILED
    assert run.error is not None and run.error.startswith("UsageLimitExceeded")
    assert _recorded(run, "generation") == 1  # the second request was never sent
    assert _framework_threads() == []


def test_a_rejected_call_is_not_made_and_the_model_reads_why() -> None:
    policy = Policy(sources=P.POLICY.sources, approvals={"tool://refund": ApprovalRule("finance")})
    driver, _ = _setup(policy=policy)
    run = driver.run("pydai.support", PLAIN)
    run = driver.decide(run.session_id, "REJECTED", comment="not this week")
    # The model read the rejection as the tool's result and proposed the refund again.
    assert run.status is RunStatus.AWAITING_HUMAN, run.error
    assert not any(k.startswith("refund:") for k in P.PERFORMED)
    run = driver.decide(run.session_id, "APPROVED")
    assert run.status is RunStatus.COMPLETED, run.error
    assert P.PERFORMED[_refund_key(P.CUSTOMER_IBAN, 40)] == 1


def test_test_model_calls_every_tool_once_and_completes() -> None:
    agents, seen = AgentRegistry(), []
    pa = Agent(TestModel(), name="pydai.test-model")

    @pa.tool_plain
    def lookup(key: str) -> dict[str, str]:
        """Look a key up."""
        seen.append(key)
        return {"key": key, "value": "v"}

    durable = DurableAgent(
        pa,
        effects=[EffectDecl("lookup", mutating=False, recovery=Recovery.RETRY)],
        tools=ToolRegistry(),
        models=ModelRegistry(),
    )

    async def run_it(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
        result = await durable.run(ctx, input["q"])
        return {"output": result.output}

    agents.agent(
        "pydai.test-model", tools=durable.tools, effects=durable.effects, models=[durable.provider]
    )(run_it)
    driver = Driver(
        agents, tools=durable.tool_functions(), providers={durable.provider: durable.model_provider}
    )
    run = driver.run("pydai.test-model", {"q": "hello"})
    assert run.status is RunStatus.COMPLETED, run.error
    assert seen == ["a"] and "lookup" in run.output["output"]
    assert driver.verify(run.session_id).ok


@pytest.mark.parametrize("version", ["2.67.9", "3.0.0", "1.99", "garbage"])
def test_a_version_outside_the_tested_range_is_refused_with_one_line(version: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_version(version)
    message = str(caught.value)
    assert "\n" not in message and TESTED in message and version in message


@pytest.mark.parametrize("version", ["2.68.0", "2.99.1"])
def test_a_version_inside_the_tested_range_is_taken(version: str) -> None:
    check_version(version)


def test_an_agent_without_a_name_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="needs a name"):
        DurableAgent(Agent(TestModel()), tools=ToolRegistry(), models=ModelRegistry())


def test_an_agent_module_under_another_version_stops_at_import_with_the_message(
    tmp_path: Path,
) -> None:
    # The installed version as another one would report it (sitecustomize runs first).
    (tmp_path / "sitecustomize.py").write_text(
        "import importlib.metadata as m\n"
        "_real = m.version\n"
        "m.version = lambda n: '3.1.0' if n == 'pydantic-ai-slim' else _real(n)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "libs"), str(ROOT)]),
    }
    load = "from runplane.core.agents import import_agent_modules; import_agent_modules(['examples.pydantic_ai_support'])"
    done = subprocess.run(
        [sys.executable, "-c", load], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("runplane.errors.ConfigError: ") and "3.1.0 is installed" in last


def test_a_service_refused_at_start_up_logs_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refused(settings: object, stop: object) -> None:
        check_version("3.1.0")

    monkeypatch.setattr("runplane.cli.serve.load", lambda name: refused)
    with caplog.at_level(logging.ERROR, logger="runplane.cli.serve"):
        assert run_services(["executor"], Settings(), threading.Event()) == 1
    [record] = [r for r in caplog.records if r.name == "runplane.cli.serve"]
    assert record.exc_info is None and "\n" not in record.getMessage()
    assert "3.1.0 is installed" in record.getMessage()
