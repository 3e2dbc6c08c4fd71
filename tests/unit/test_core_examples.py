"""The example agents wire up: triage's breach handler is registered and accepts what the
cases service sends it, and it works on the case it was started for."""

from __future__ import annotations

import json

import examples.triage  # noqa: F401  (registers "triage" and "escalation")
from runplane.core import REGISTRY
from runplane.testing import Driver, FakeClock, ScriptedProvider
from runplane.wire import BreachDeadline, CaseRecord, Obligation, ObligationStatus, RunStatus
from services.cases.breach import followup

CASE = "c-" + "ab" * 12


def _triage() -> Driver:
    provider = ScriptedProvider(["outage"], name="openai")
    return Driver(
        REGISTRY,
        providers={"openai": provider},
        clock=FakeClock(1_700_000_000_000),
        cases={CASE: {"customer": "c-9"}},
    )


def test_triage_declares_a_breach_handler_that_is_registered_and_accepts_the_follow_up() -> None:
    driver = _triage()
    run = driver.run("triage", {"ticket": "outage since 9"}, case_id=CASE)
    assert run.status is RunStatus.COMPLETED
    registered = driver.obligations[(CASE, "first-response")]
    handler = registered["on_breach"]
    spec = REGISTRY.spec(handler)  # UnknownCapability if the example were not registered

    ob = Obligation(
        name="first-response",
        due_ms=registered["due_ms"],
        warn_ms=registered["warn_ms"],
        calendar="wall",
        calendar_digest="d" * 64,
        rule_json='{"days":1}',
        on_breach=handler,
        status=ObligationStatus.BREACHED,
        sweep_run_id="sweep-1",
        registered_by=run.session_id,
        updated_ms=0,
    )
    case = CaseRecord(case_id=CASE, version=2, state_json="{}", updated_ms=0, obligations=(ob,))
    breach = BreachDeadline(
        case_id=CASE,
        request_id="sweep-1/breach",
        name="first-response",
        due_ms=ob.due_ms,
        sweep_run_id="sweep-1",
    )
    request = followup(case, ob, breach, 0)
    assert request is not None and request.capability == handler
    assert spec.input_problem(json.loads(request.input_json)) is None


def test_the_escalation_run_records_the_breach_on_its_case() -> None:
    driver = _triage()
    driver.run("triage", {"ticket": "outage since 9"}, case_id=CASE)
    payload = {
        "case_id": CASE,
        "obligation": "first-response",
        "due_ms": 5,
        "sweep_run_id": "sweep-1",
    }
    run = driver.run("escalation", payload, case_id=CASE)
    assert run.status is RunStatus.COMPLETED and run.output["case_version"] == 3
    state, version = driver.cases[CASE]
    assert version == 3 and state["priority"] == "high" and state["triage"]["label"] == "outage"
    assert state["escalations"] == [
        {"obligation": "first-response", "due_ms": 5, "sweep_run_id": "sweep-1"}
    ]


def test_an_escalation_started_on_another_case_fails_instead_of_writing_there() -> None:
    driver = _triage()
    payload = {
        "case_id": CASE,
        "obligation": "first-response",
        "due_ms": 5,
        "sweep_run_id": "sweep-1",
    }
    run = driver.run("escalation", payload, case_id="c-" + "cd" * 12)
    assert (
        run.status is RunStatus.FAILED and run.error is not None and "the breach is on" in run.error
    )
    assert driver.cases[CASE] == ({"customer": "c-9"}, 1)
