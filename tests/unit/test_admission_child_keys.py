"""A commissioned child's admission key is the platform's: a tenant's emitter cannot claim one."""

from __future__ import annotations

from test_admission_handler import CAPS, NOW, POS, req

from runplane.keys import child_key
from runplane.signing import Emitter, EmitterKey, SigningKey, Unsigned, Verified
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
