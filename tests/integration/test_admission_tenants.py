"""Admission across tenants on the real broker, signed admission on (not dev mode).

Two tenants, ``acme`` and ``globex``, each with its own emitter key: the same admission key
from both makes two runs, neither answer names the other's run, and a key one tenant used
first does not stop the other's run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_admission import CAPS, committed_replies, running
from test_processor import read_all

from runplane.config import Settings
from runplane.runs.client import Client
from runplane.signing.admission import SigningKey
from runplane.wire import AdmissionClaim, AdmissionOutcome, AdmissionReply, StartRun
from services.admission.serve import build
from services.admission.settings import AdmissionSettings

pytestmark = pytest.mark.integration

INPUT = {"invoice_id": "inv-1"}


def two_tenants(path: Path) -> tuple[Path, dict[str, SigningKey]]:
    """An emitters registry with one emitter (and key) per tenant."""
    keys = {t: SigningKey.generate(f"{t}-gw-1") for t in ("acme", "globex")}
    entries = [
        {
            "name": f"{tenant}-gw",
            "tenant": tenant,
            "keys": [{"id": k.key_id, "public_key": k.public_b64()}],
        }
        for tenant, k in keys.items()
    ]
    path.write_text(yaml.safe_dump({"emitters": entries}))
    return path, keys


def admit(settings: Settings, key: SigningKey, tenant: str, adm_key: str) -> AdmissionReply:
    with Client(settings, signing_key=key) as client:
        return client.admit("refund", adm_key, INPUT, tenant=tenant, initiator="ivan", timeout=60)


def test_one_key_from_two_tenants_makes_two_runs_and_no_answer_crosses(
    settings: Settings, tmp_path: Path
) -> None:
    registry, keys = two_tenants(tmp_path / "emitters.yaml")
    own = AdmissionSettings(base=settings, emitters_file=registry)
    assert own.allow_unsigned is False
    with running(build(own, capabilities=CAPS)):
        acme = admit(settings, keys["acme"], "acme", "order-17")
        globex = admit(settings, keys["globex"], "globex", "order-17")
        # globex first this time: acme's later request with that key still runs.
        globex_first = admit(settings, keys["globex"], "globex", "inv-9")
        acme_later = admit(settings, keys["acme"], "acme", "inv-9")
        acme_again = admit(settings, keys["acme"], "acme", "order-17")
        globex_again = admit(settings, keys["globex"], "globex", "inv-9")

    for reply in (acme, globex, globex_first, acme_later):
        assert reply.outcome is AdmissionOutcome.ADMITTED, reply.reason
        assert reply.run_id is not None
    runs = {
        "acme": {acme.run_id, acme_later.run_id},
        "globex": {globex.run_id, globex_first.run_id},
    }
    assert len(runs["acme"] | runs["globex"]) == 4  # four runs, none shared
    # The retries are answered with their own tenant's run, never the other's.
    assert acme_again.outcome is globex_again.outcome is AdmissionOutcome.DUPLICATE
    assert acme_again.run_id == acme.run_id and globex_again.run_id == globex_first.run_id
    # On the broker: every reply names only runs of the tenant it answers.
    for r in committed_replies(settings):
        assert r.tenant in runs and (r.run_id is None or r.run_id in runs[r.tenant]), r
    starts = [v for _, v in read_all(settings, "runs.inbox") if isinstance(v, StartRun)]
    assert sorted((s.tenant, s.admission_key) for s in starts) == [
        ("acme", "inv-9"),
        ("acme", "order-17"),
        ("globex", "inv-9"),
        ("globex", "order-17"),
    ]
    claims = [v for _, v in read_all(settings, "admission.claims")]
    assert all(isinstance(c, AdmissionClaim) for c in claims) and len(claims) == 4
