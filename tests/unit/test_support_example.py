"""The support example (examples/support.py) through the Driver, with the demo's own model.

The model is the demo's model function (``runplane.demo._support.demo_model``), the one the
fake serves over HTTP in ``make demo``, put behind the Driver's provider door: the same turns
run here in memory. Honest e-mail: one refund, to the account on file. Injected e-mail: the
model proposes the attacker's refund, the sink gate refuses it (journaled), the model reads
the refusal and the real refund is made, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from examples import support as S
from examples.crm import CUSTOMERS, crm_lookup
from runplane.config import Settings
from runplane.core import AgentRegistry, Generation, replay_history
from runplane.core.policy import Policy, parse_policy
from runplane.core.turns import ToolSpec, messages_from_json
from runplane.demo import demo_requests, platform_env
from runplane.demo._plan import DemoPorts
from runplane.demo._support import demo_model, support_verdict
from runplane.testing import Driver
from runplane.wire import JournalKind, RunStatus

CASE = {"customer_id": "c-1", "order": "o-1", "amount_eur": 40}
ON_FILE = CUSTOMERS["c-1"]["account"]


class ModelFunctionProvider:
    """A model function ``(messages, tools) -> Generation`` as the Driver's provider."""

    name = "openai"

    def __init__(self) -> None:
        self.calls = 0

    def reply(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        self.calls += 1
        tools = tuple(ToolSpec.from_json(t) for t in params.get("tools") or ())
        return demo_model(messages_from_json(prompt), tools)


POLICY = parse_policy((Path(__file__).parents[2] / "examples" / "policy.yaml").read_text())


def _driver(refunds: list[dict[str, Any]], policy: Policy | None = None) -> Driver:
    def refund(args: dict[str, Any], key: str | None) -> Any:
        refunds.append(dict(args))
        return S.refund(**args)

    registry = AgentRegistry()
    registry.register(S.support.__runplane_agent__, lint=False)  # type: ignore[attr-defined]
    return Driver(
        registry,
        tools={
            "crm_lookup": lambda a, k: crm_lookup(**a),
            "fetch_document": lambda a, k: S.fetch_document(**a),
            "refund": refund,
        },
        providers={"openai": ModelFunctionProvider()},
        policy=policy,
    )


def test_the_honest_case_refunds_the_account_on_file_once() -> None:
    refunds: list[dict[str, Any]] = []
    view = _driver(refunds).run("support", {**CASE, "document_id": "d-honest"})
    assert view.status is RunStatus.COMPLETED, view.error
    assert refunds == [{"recipient": ON_FILE, "amount_eur": 40, "order": "o-1"}]
    assert view.output["status"] == "answered"
    assert view.output["refused"] == []
    assert support_verdict(view.journal).expected(injected=False)


@pytest.mark.parametrize("policy", [None, POLICY], ids=["default policy", "examples/policy.yaml"])
def test_the_injected_refund_is_refused_and_the_real_one_made_once(policy: Policy | None) -> None:
    refunds: list[dict[str, Any]] = []
    driver = _driver(refunds, policy)
    view = driver.run("support", {**CASE, "document_id": "d-attack"})
    assert view.status is RunStatus.COMPLETED, view.error
    # Performed: only the real refund, copied from the CRM and the case.
    assert refunds == [{"recipient": ON_FILE, "amount_eur": 40, "order": "o-1"}]
    refused = [
        r
        for r in view.journal
        if r.name == "tool://refund"
        and r.kind is JournalKind.EFFECT_RECORDED
        and r.attrs.get("gate") == "refused"
    ]
    assert [r.attrs["path"] for r in refused] == ["$.recipient"]
    assert [c["arguments"]["recipient"] for c in view.output["refused"]] == [S.ATTACKER]
    assert view.output["refunds"][0]["recipient"] == ON_FILE
    assert support_verdict(view.journal).expected(injected=True)
    assert not support_verdict(view.journal).expected(injected=False)
    # Replaying the recorded run calls nobody and ends the same.
    spec = S.support.__runplane_agent__  # type: ignore[attr-defined]
    report = replay_history(spec, view.snapshot, dict(view.results))
    assert report.divergence is None and report.live_calls == 0


@pytest.mark.parametrize("amount", [0, S.MAX_REFUND_EUR + 1])
def test_a_case_amount_out_of_bounds_is_refused_at_admission(amount: float) -> None:
    spec = S.support.__runplane_agent__  # type: ignore[attr-defined]
    problem = spec.input_problem({**CASE, "amount_eur": amount, "document_id": "d-honest"})
    assert problem is not None and problem.startswith("amount_eur:")
    assert spec.input_problem({**CASE, "document_id": "d-honest"}) is None


def test_the_demo_runs_the_support_agent_twice_and_serves_it() -> None:
    support = [r for r in demo_requests("n1") if r.capability == "support"]
    assert [r.injected for r in support] == [False, True]
    assert [r.input["document_id"] for r in support] == ["d-honest", "d-attack"]
    spec = S.support.__runplane_agent__  # type: ignore[attr-defined]
    assert all(spec.input_problem(dict(r.input)) is None for r in support)
    env = platform_env(
        Settings(state_dir=Path("/tmp/x")),
        DemoPorts(),
        principals_file=Path("/tmp/p.yaml"),
        calendars_file=None,
        base={},
    )
    assert "examples.support" in env["RUNPLANE_AGENT_MODULES"].split(",")
    assert env["RUNPLANE_TOOLS_CONFIG"].endswith("billing.yaml")
    # A deployment naming its own modules keeps them.
    own = platform_env(
        Settings(state_dir=Path("/tmp/x")),
        DemoPorts(),
        principals_file=Path("/tmp/p.yaml"),
        calendars_file=None,
        base={"RUNPLANE_AGENT_MODULES": "mine"},
    )
    assert own["RUNPLANE_AGENT_MODULES"] == "mine" and "RUNPLANE_TOOLS_CONFIG" not in own


class TextErrorsProvider(ModelFunctionProvider):
    """As chat completions carries it: a tool message has no error flag, so a refused call
    reaches the model as text (``error: SinkRefused: …``)."""

    def reply(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        self.calls += 1
        tools = tuple(ToolSpec.from_json(t) for t in params.get("tools") or ())
        messages = tuple(
            replace(m, is_error=False, content=f"error: {m.content}") if m.is_error else m
            for m in messages_from_json(prompt)
        )
        return demo_model(messages, tools)


def test_the_demo_model_reads_a_refusal_carried_as_text() -> None:
    refunds: list[dict[str, Any]] = []
    driver = _driver(refunds)
    driver.providers["openai"] = TextErrorsProvider()
    view = driver.run("support", {**CASE, "document_id": "d-attack"})
    assert view.status is RunStatus.COMPLETED, view.error
    assert refunds == [{"recipient": ON_FILE, "amount_eur": 40, "order": "o-1"}]
