"""A case belongs to one tenant (security review M2): recorded from its deadlines, enforced on
later ones, and carried by the breach follow-up."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from runplane.core import AgentRegistry, AgentSpec, Durability, Runtime, StepCtx, days, run_admitted
from runplane.core.keys import CASE_KEY, TENANT_KEY, case_id_for
from runplane.errors import WireError
from runplane.wire import BreachDeadline, CaseRecord, RegisterDeadline, StartRun
from services.cases.breach import followup
from services.cases.decide import evaluate, tenant_of

NOW = 1_700_000_000_000
CASE = case_id_for("acme", {"ticket": "T-1"}) or ""


def _register(
    tenant: str | None, *, name: str = "first-response", request_id: str = "r-1/0/1"
) -> RegisterDeadline:
    return RegisterDeadline(
        case_id=CASE,
        request_id=request_id,
        reply_to=request_id.split("/")[0],
        name=name,
        due_ms=NOW + 1000,
        calendar="wall",
        calendar_digest="d" * 64,
        rule_json='{"days":1}',
        on_breach="triage.escalate",
        tenant=tenant,
    )


def test_the_first_deadline_records_the_case_tenant() -> None:
    d = evaluate(None, _register("acme"), NOW)
    assert d.reply.accepted and d.case is not None
    assert tenant_of(d.case) == "acme" and d.case.correlation_keys == {TENANT_KEY: "acme"}


def test_a_deadline_of_another_tenant_is_refused_and_changes_nothing() -> None:
    first = evaluate(None, _register("acme"), NOW).case
    assert first is not None
    d = evaluate(first, _register("globex", name="other", request_id="r-2/0/1"), NOW + 1)
    assert not d.reply.accepted and d.reply.reason == "the case does not belong to tenant 'globex'"
    assert (
        d.case is not None and d.case.obligations == first.obligations
    )  # only the answer is remembered
    assert tenant_of(d.case) == "acme"
    again = evaluate(first, _register("acme", name="other", request_id="r-3/0/1"), NOW + 2)
    assert again.reply.accepted


def test_an_invalid_tenant_never_reaches_the_cases_service() -> None:
    # A TenantId is valid by construction: the command cannot be built (nor decoded).
    with pytest.raises(WireError, match="RegisterDeadline: tenant must not contain '/'"):
        _register("ac/me")


def test_a_deadline_without_a_tenant_records_none() -> None:
    d = evaluate(None, _register(None), NOW)
    assert d.reply.accepted and d.case is not None and tenant_of(d.case) is None


def test_the_follow_up_carries_the_case_tenant_but_not_its_bookkeeping_keys() -> None:
    registered = evaluate(None, _register("acme"), NOW).case
    assert isinstance(registered, CaseRecord)
    case = dataclasses.replace(
        registered, correlation_keys={**registered.correlation_keys, "ticket": "T-1"}
    )
    cmd = BreachDeadline(
        case_id=CASE,
        request_id="sweep-1/breach",
        name="first-response",
        due_ms=NOW + 1000,
        sweep_run_id="sweep-1",
    )
    d = evaluate(case, cmd, NOW + 2000)
    assert d.case is not None and d.obligation is not None
    request = followup(d.case, d.obligation, cmd, NOW + 2000)
    assert request is not None and request.tenant == "acme"
    assert request.correlation_keys == {"ticket": "T-1", CASE_KEY: CASE}


def test_the_runtime_sends_its_tenant_with_a_deadline() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        return {"due": await ctx.deadline("first-response", days(1))}

    spec = AgentRegistry().register(
        AgentSpec("t", agent, Durability.REPLAYABLE, None, {}), lint=False
    )
    admitted = run_admitted(
        "s-1",
        capability="t",
        admission_key="k",
        tenant="acme",
        initiator="ivan",
        input_json="{}",
        now_ms=NOW,
        case_id=CASE,
    )
    start = StartRun(
        session_id="s-1",
        capability="t",
        input_json="{}",
        case_id=CASE,
        admission_key="k",
        tenant="acme",
        initiator="ivan",
        admitted_hash=admitted.hash,
        admitted_ms=NOW,
    )
    _, step = Runtime.start(spec, start, now_ms=NOW + 1)
    (command,) = [c for c in step.commands if isinstance(c, RegisterDeadline)]
    assert command.tenant == "acme"
