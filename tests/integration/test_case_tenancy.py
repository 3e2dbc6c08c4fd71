"""Cases belong to a tenant (security review M2), on the real broker.

The cases service and admission run side by side. A run of tenant ``acme`` registers a
deadline on acme's case; the breach's follow-up request (written by the cases service to
``admission``) is acme's and admission admits it onto that case. A request of tenant
``globex`` naming acme's case id is refused by admission with the reason and claims nothing.
"""

from __future__ import annotations

import json
import time

import pytest
from test_admission import running
from test_cases_support import cases_service, read_all, reply_to, send

from runplane.config import Settings
from runplane.core.calendars import WallClock
from runplane.core.keys import CASE_KEY, case_id_for
from runplane.runs.client import Client
from runplane.wire import (
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    BreachDeadline,
    RegisterDeadline,
    StartRun,
)
from services.admission.decide import CapabilitySpec
from services.admission.serve import build
from services.admission.settings import AdmissionSettings
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

CAPS = {"escalate": CapabilitySpec(None), "refund": CapabilitySpec(None)}


def acme_deadline_breached(case: str) -> tuple[RegisterDeadline, BreachDeadline]:
    """A deadline of tenant acme on ``case`` with an ``escalate`` follow-up, and its breach."""
    wall = WallClock()
    due = wall.resolve({"days": 1}, time.time_ns() // 1_000_000)
    register = RegisterDeadline(
        case_id=case,
        request_id="r-acme/0/1",
        reply_to="r-acme",
        name="first-response",
        due_ms=due,
        calendar=wall.name,
        calendar_digest=wall.digest,
        rule_json=json.dumps({"days": 1}),
        on_breach="escalate",
        tenant="acme",
    )
    breach = BreachDeadline(
        case_id=case,
        request_id="sweep/breach",
        name="first-response",
        due_ms=due,
        sweep_run_id="sweep-t9",
    )
    return register, breach


def test_the_breach_follow_up_runs_for_the_case_tenant_and_another_tenant_is_refused(
    settings: Settings,
) -> None:
    case = case_id_for("acme", {"ticket": "T-9"})
    assert case is not None
    register, breach = acme_deadline_breached(case)
    admission = build(
        AdmissionSettings(base=settings, batch_ms=5, allow_unsigned=True), capabilities=CAPS
    )
    with cases_service(settings), running(admission), Client(settings) as client:
        assert admission.ready.wait(60)
        send(settings, register)
        assert reply_to(settings, "r-acme", register.request_id).accepted
        send(settings, breach)

        def admitted_follow_up() -> AdmissionReply | None:
            return next(
                (
                    r
                    for _, r in read_all(settings, "admission.replies")
                    if isinstance(r, AdmissionReply) and r.outcome is AdmissionOutcome.ADMITTED
                ),
                None,
            )

        reply = wait_for(admitted_follow_up, what="the follow-up admitted")
        assert reply.case_id == case

        foreign = client.admit(
            "refund",
            "globex-1",
            {},
            tenant="globex",
            initiator="mallory",
            correlation={CASE_KEY: case},
        )

    [request] = [
        r
        for _, r in read_all(settings, "admission")
        if isinstance(r, AdmissionRequest) and r.capability == "escalate"
    ]
    assert request.tenant == "acme" and request.correlation_keys[CASE_KEY] == case
    [start] = [r for _, r in read_all(settings, "runs.inbox") if isinstance(r, StartRun)]
    assert start.tenant == "acme" and start.case_id == case and start.session_id == reply.run_id

    assert foreign.outcome is AdmissionOutcome.REFUSED and foreign.run_id is None
    assert foreign.reason == f"{CASE_KEY} {case} is not a case of tenant 'globex'"
