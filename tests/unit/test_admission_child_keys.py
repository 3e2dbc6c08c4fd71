"""A commissioned child's admission key is the platform's: a tenant's emitter cannot claim one."""

from __future__ import annotations

import json

from test_admission_handler import CAPS, NOW, POS, req

from runplane.core.keys import carried_child_key, child_key, parent_of
from runplane.core.plan import Delegation, Scope
from runplane.signing.admission import Emitter, EmitterKey, SigningKey, Unsigned, Verified
from runplane.wire import AdmissionOutcome
from services.admission.decide import Admitted, Refusal, Refused, decide

KEY = SigningKey.generate("gw")
PUBLIC = EmitterKey(KEY.key_id, KEY.private.public_key().public_bytes_raw())


def test_a_tenant_emitter_cannot_pre_empt_a_child_but_the_platform_can() -> None:
    child = child_key("r-parent", 0, 3)
    tenant = Verified(Emitter("billing-gw", "acme", (PUBLIC,)), KEY.key_id)
    refused = decide(None, child, POS, req(admission_key=child), CAPS, NOW, verification=tenant)
    assert isinstance(refused, Refused) and refused.reply.outcome is AdmissionOutcome.REFUSED
    assert refused.code is Refusal.BAD_KEY
    platform = Verified(Emitter("platform", None, (PUBLIC,), any_tenant=True), KEY.key_id)
    for verification in (platform, Unsigned()):
        admitted = decide(
            None, child, POS, req(admission_key=child), CAPS, NOW, verification=verification
        )
        assert isinstance(admitted, Admitted)
        assert admitted.journal.attrs["parent_run"] == "r-parent"
        assert admitted.journal.attrs["parent_call"] == "0/3"
    ordinary = decide(None, "k1", POS, req(admission_key="k1"), CAPS, NOW, verification=tenant)
    assert isinstance(ordinary, Admitted) and "parent_run" not in ordinary.journal.attrs


def test_a_checkpointed_parents_child_key_is_the_platforms_too() -> None:
    child = carried_child_key("r-parent", "ab" * 32, 2)
    assert parent_of(child) == ("r-parent", f"w{'ab' * 16}/2")
    tenant = Verified(Emitter("billing-gw", "acme", (PUBLIC,)), KEY.key_id)
    refused = decide(None, child, POS, req(admission_key=child), CAPS, NOW, verification=tenant)
    assert isinstance(refused, Refused) and refused.code is Refusal.BAD_KEY
    assert parent_of("runplane.child/r-parent/wxyz/2") is None  # not a witness


def test_the_delegation_travels_to_the_child_and_a_widened_one_starts_nothing() -> None:
    root = Delegation(Scope(frozenset({"refund"}), frozenset({"tool://crm"}), frozenset({"p"})))
    child = child_key("r-parent", 0, 4)
    text = json.dumps(root.to_json())
    admitted = decide(None, child, POS, req(admission_key=child, delegation_json=text), CAPS, NOW)
    assert isinstance(admitted, Admitted)
    assert admitted.start.delegation_json == text
    assert admitted.journal.attrs["delegation"] == text  # seq 0 commits to it
    wide = Scope(frozenset({"refund", "other"}), frozenset(), frozenset({"p"}))
    forged = json.dumps({"chain": [root.scope.to_json(), wide.to_json()]})
    refused = decide(None, child, POS, req(admission_key=child, delegation_json=forged), CAPS, NOW)
    assert isinstance(refused, Refused) and refused.code is Refusal.BAD_REQUEST
    assert "widens" in (refused.reply.reason or "")
    plain = decide(None, "k2", POS, req(admission_key="k2"), CAPS, NOW)
    assert isinstance(plain, Admitted) and plain.start.delegation_json is None
    assert "delegation" not in plain.journal.attrs


def test_a_tenant_emitter_cannot_pre_empt_a_schedule_tick_but_the_platform_can() -> None:
    tick = "runplane.schedule/acme/nightly/1767225600000"
    tenant = Verified(Emitter("billing-gw", "acme", (PUBLIC,)), KEY.key_id)
    refused = decide(None, tick, POS, req(admission_key=tick), CAPS, NOW, verification=tenant)
    assert isinstance(refused, Refused) and refused.code is Refusal.BAD_KEY
    assert "schedule ticks" in refused.reply.reason
    platform = Verified(Emitter("platform", None, (PUBLIC,), any_tenant=True), KEY.key_id)
    for verification in (platform, Unsigned()):
        admitted = decide(
            None, tick, POS, req(admission_key=tick), CAPS, NOW, verification=verification
        )
        assert isinstance(admitted, Admitted)
