"""The reserved correlation key ``runplane.case``: a run lands on the case it names."""

from __future__ import annotations

import json
import re

import pytest

from runplane.core.keys import CASE_KEY, case_belongs_to, case_id_for, tenant_tag
from runplane.wire import AdmissionRequest, BreachDeadline, CaseRecord, Obligation, RegisterDeadline
from services.admission.decide import (
    Admitted,
    CapabilitySpec,
    Position,
    Refusal,
    Refused,
    decide,
)

CAPS = {"triage.escalate": CapabilitySpec(None), "free": CapabilitySpec(None)}
POS = Position("admission", 0, 7)
NOW = 1_700_000_000_000
CASE = case_id_for("acme", {"ticket": "T-1"})


def _req(
    keys: dict[str, str], *, tenant: str = "default", capability: str = "free"
) -> AdmissionRequest:
    return AdmissionRequest(
        admission_key="k1",
        capability=capability,
        input_json="{}",
        correlation_keys=keys,
        tenant=tenant,
        initiator="someone",
        requested_ms=NOW,
    )


def test_the_case_key_names_the_case_of_the_same_tenant_whatever_the_other_keys() -> None:
    assert CASE is not None
    d = decide(None, "k1", POS, _req({CASE_KEY: CASE, "ticket": "T-2"}, tenant="acme"), CAPS, NOW)
    assert isinstance(d, Admitted)
    assert d.claim.case_id == d.start.case_id == d.reply.case_id == CASE
    assert d.journal.attrs["case_id"] == CASE
    # Without it, the same keys under another tenant would resolve to another case.
    assert case_id_for("default", {"ticket": "T-1"}) != CASE


def test_a_case_id_of_another_tenant_is_refused() -> None:
    # Case ids are deterministic: knowing acme's keys gives acme's case id. The tenant tag in
    # the id stops another tenant from attaching a run to it.
    assert CASE is not None
    d = decide(None, "k1", POS, _req({CASE_KEY: CASE}, tenant="globex"), CAPS, NOW)
    assert isinstance(d, Refused) and d.code is Refusal.BAD_CORRELATION
    assert d.reply.reason == f"{CASE_KEY} {CASE} is not a case of tenant 'globex'"
    assert d.reply.run_id is None


def test_minted_case_ids_keep_the_format_and_start_with_the_tenant_tag() -> None:
    acme = case_id_for("acme", {"ticket": "T-1"})
    other_keys = case_id_for("acme", {"ticket": "T-2"})
    globex = case_id_for("globex", {"ticket": "T-1"})
    assert acme is not None and other_keys is not None and globex is not None
    for case_id in (acme, other_keys, globex):
        assert re.fullmatch(r"c-[0-9a-f]{24}", case_id)
    assert acme[2:10] == other_keys[2:10] == tenant_tag("acme") != tenant_tag("globex")
    assert globex[2:10] == tenant_tag("globex")
    assert case_belongs_to(acme, "acme") and not case_belongs_to(acme, "globex")
    assert not case_belongs_to("case-1", "acme")


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
def test_a_misused_reserved_key_is_refused_with_the_reason(
    keys: dict[str, str], fragment: str
) -> None:
    d = decide(None, "k1", POS, _req(keys), CAPS, NOW)
    assert isinstance(d, Refused) and d.code is Refusal.BAD_CORRELATION
    assert d.reply.reason is not None and fragment in d.reply.reason


def _breached(case_id: str, tenant: str | None) -> tuple[CaseRecord, Obligation, BreachDeadline]:
    """A case with one obligation registered by a run of ``tenant``, then breached, through
    the cases service's pure core."""
    from services.cases.decide import evaluate

    register = RegisterDeadline(
        case_id=case_id,
        request_id="r-1/0/3",
        reply_to="r-1",
        name="first-response",
        due_ms=NOW,
        calendar="wall",
        calendar_digest="d" * 64,
        rule_json='{"days":1}',
        on_breach="triage.escalate",
        tenant=tenant,
    )
    registered = evaluate(None, register, NOW - 10)
    assert registered.reply.accepted and registered.case is not None
    breach = BreachDeadline(
        case_id=case_id,
        request_id="sweep-1/breach",
        name="first-response",
        due_ms=NOW,
        sweep_run_id="sweep-1",
    )
    breached = evaluate(registered.case, breach, NOW)
    assert (
        breached.transition == "breached"
        and breached.case is not None
        and breached.obligation is not None
    )
    return breached.case, breached.obligation, breach


def test_the_cases_service_follow_up_lands_on_the_breached_case_for_the_case_tenant() -> None:
    # End to end in the pure cores: the run that registered the deadline was acme's; the
    # breach's follow-up AdmissionRequest is acme's and is admitted on the breached case.
    from services.cases.breach import followup, sweep_run

    assert CASE is not None
    case, ob, cmd = _breached(CASE, "acme")
    request = followup(case, ob, cmd, NOW)
    assert request is not None and request.correlation_keys == {CASE_KEY: CASE}
    assert request.tenant == "acme"
    d = decide(None, request.admission_key, POS, request, CAPS, NOW)
    assert isinstance(d, Admitted) and d.start.case_id == CASE and d.start.tenant == "acme"
    assert json.loads(d.start.input_json)["case_id"] == CASE
    # The sealed sweep run is journaled under the case's tenant too.
    assert sweep_run(case, ob, cmd, NOW)[0].attrs["tenant"] == "acme"


def test_a_case_that_never_recorded_its_tenant_gets_a_visible_refusal_not_a_foreign_run() -> None:
    # A deadline registered by a writer older than RegisterDeadline.tenant: the follow-up
    # falls back to the default tenant, which admission refuses for acme's case.
    from services.cases.breach import followup

    assert CASE is not None
    case, ob, cmd = _breached(CASE, None)
    request = followup(case, ob, cmd, NOW)
    assert request is not None and request.tenant == "default"
    d = decide(None, request.admission_key, POS, request, CAPS, NOW)
    assert isinstance(d, Refused) and d.code is Refusal.BAD_CORRELATION
