"""The reserved correlation key ``runplane.case``: a run lands on the case it names."""

from __future__ import annotations

import json

import pytest

from runplane.wire import AdmissionRequest, ObligationStatus
from services.admission.handler import (
    CASE_KEY,
    Admitted,
    CapabilitySpec,
    Position,
    Refusal,
    Refused,
    case_id_for,
    decide,
)

CAPS = {"triage.escalate": CapabilitySpec(None), "free": CapabilitySpec(None)}
POS = Position("admission", 0, 7)
NOW = 1_700_000_000_000
CASE = case_id_for("acme", {"ticket": "T-1"})


def _req(keys: dict[str, str], *, tenant: str = "default", capability: str = "free") -> AdmissionRequest:
    return AdmissionRequest(admission_key="k1", capability=capability, input_json="{}", correlation_keys=keys,
                            tenant=tenant, initiator="someone", requested_ms=NOW)


def test_the_case_key_names_the_case_whatever_the_tenant_and_other_keys() -> None:
    assert CASE is not None
    d = decide(None, "k1", POS, _req({CASE_KEY: CASE, "ticket": "T-2"}), CAPS, NOW)
    assert isinstance(d, Admitted)
    assert d.claim.case_id == d.start.case_id == d.reply.case_id == CASE
    assert d.journal.attrs["case_id"] == CASE
    # Without it, the same keys under another tenant would resolve to another case.
    assert case_id_for("default", {"ticket": "T-1"}) != CASE


@pytest.mark.parametrize(
    ("keys", "fragment"),
    [
        ({CASE_KEY: "case-1"}, "must be a case id"),
        ({CASE_KEY: "c-" + "A" * 24}, "must be a case id"),
        ({CASE_KEY: "c-" + "0" * 23}, "must be a case id"),
        ({CASE_KEY: ""}, "must be a case id"),
        ({"runplane.tenant": "x"}, "is reserved"),
    ],
)
def test_a_misused_reserved_key_is_refused_with_the_reason(keys: dict[str, str], fragment: str) -> None:
    d = decide(None, "k1", POS, _req(keys), CAPS, NOW)
    assert isinstance(d, Refused) and d.code is Refusal.BAD_CORRELATION
    assert d.reply.reason is not None and fragment in d.reply.reason


def test_the_cases_service_follow_up_lands_on_the_breached_case() -> None:
    # End to end in the pure cores: a breach's follow-up AdmissionRequest is admitted on the
    # case whose obligation breached (the sweep tenant differs from the run's tenant).
    from runplane.wire import BreachDeadline, CaseRecord, Obligation
    from services.cases.breach import followup

    assert CASE is not None
    ob = Obligation(name="first-response", due_ms=NOW, warn_ms=None, calendar="wall", calendar_digest="d" * 64,
                    rule_json='{"days":1}', on_breach="triage.escalate", status=ObligationStatus.BREACHED,
                    sweep_run_id="sweep-1", registered_by="r-1", updated_ms=NOW)
    case = CaseRecord(case_id=CASE, version=2, state_json="{}", updated_ms=NOW, obligations=(ob,))
    cmd = BreachDeadline(case_id=CASE, request_id="sweep-1/breach", name="first-response", due_ms=NOW,
                         sweep_run_id="sweep-1")
    request = followup(case, ob, cmd, NOW)
    assert request is not None and request.correlation_keys[CASE_KEY] == CASE
    d = decide(None, request.admission_key, POS, request, CAPS, NOW)
    assert isinstance(d, Admitted) and d.start.case_id == CASE
    assert json.loads(d.start.input_json)["case_id"] == CASE
