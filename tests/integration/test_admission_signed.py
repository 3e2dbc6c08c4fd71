"""Signed admission on the real broker: the emitter client signs, admission verifies.

A signed request of the emitter's tenant is admitted; an unsigned one, one signed with a key
that does not match the registered id, and one naming another tenant are each refused with
the reason — a REFUSED reply to the emitter and a dead letter (with the request's bytes) for
the operator — and start no run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_admission import CAPS, committed_replies, running
from test_processor import read_all, wait_for

from runplane.client import Client
from runplane.config import Settings
from runplane.signing import SigningKey
from runplane.wire import AdmissionOutcome, AdmissionReply, DeadLetter, StartRun
from services.admission.serve import build
from services.admission.settings import AdmissionSettings

pytestmark = pytest.mark.integration

INPUT = {"invoice_id": "inv-1"}


def _registry(path: Path, *keys: SigningKey) -> Path:
    entry = {
        "name": "billing-gw",
        "tenant": "acme",
        "keys": [{"id": k.key_id, "public_key": k.public_b64()} for k in keys],
    }
    path.write_text(yaml.safe_dump({"emitters": [entry]}))
    return path


def _admit(settings: Settings, key: SigningKey | None, adm_key: str, tenant: str) -> AdmissionReply:
    with Client(settings, signing_key=key) as client:
        return client.admit("refund", adm_key, INPUT, tenant=tenant, initiator="ivan", timeout=60)


def test_signed_admitted_and_unsigned_wrong_or_forged_refused(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client reads the environment when given no key: make "unsigned" really unsigned.
    monkeypatch.delenv("RUNPLANE_EMITTER_KEY", raising=False)
    monkeypatch.delenv("RUNPLANE_EMITTER_KEY_FILE", raising=False)
    current, previous = SigningKey.generate("gw-2"), SigningKey.generate("gw-1")
    impostor = SigningKey("gw-2", SigningKey.generate("x").private)  # right id, wrong key
    own = AdmissionSettings(
        base=settings, emitters_file=_registry(tmp_path / "emitters.yaml", current, previous)
    )
    assert own.allow_unsigned is False  # signatures are required unless dev mode is asked for
    with running(build(own, capabilities=CAPS)):
        signed = _admit(settings, current, "order-signed", "acme")
        rotated = _admit(settings, previous, "order-rotated", "acme")
        unsigned = _admit(settings, None, "order-unsigned", "acme")
        wrong = _admit(settings, impostor, "order-wrong", "acme")
        forged = _admit(settings, current, "order-forged", "globex")

    assert signed.outcome is AdmissionOutcome.ADMITTED and signed.run_id
    assert rotated.outcome is AdmissionOutcome.ADMITTED  # both registered keys are active
    refused = {"order-unsigned": unsigned, "order-wrong": wrong, "order-forged": forged}
    for reply in refused.values():
        assert reply.outcome is AdmissionOutcome.REFUSED and reply.run_id is None
    assert "unsigned request" in (unsigned.reason or "")
    assert "does not verify with key gw-2" in (wrong.reason or "")
    assert "speaks for tenant 'acme', not 'globex'" in (forged.reason or "")

    letters: dict[str, DeadLetter] = {}

    def dead_lettered() -> bool:
        for _, v in read_all(settings, "deadletter"):
            if isinstance(v, DeadLetter) and v.key is not None:
                letters[v.key.decode()] = v
        return set(refused) <= set(letters)

    wait_for("three dead letters", dead_lettered)
    assert letters["order-unsigned"].reason.startswith("unauthenticated: unsigned request")
    assert letters["order-wrong"].reason.startswith("unauthenticated: bad signature")
    assert letters["order-forged"].reason.startswith("forged_tenant: ")
    assert all(v.service == "admission" and v.value for v in letters.values())
    assert "order-signed" not in letters

    starts = {
        v.admission_key for _, v in read_all(settings, "runs.inbox") if isinstance(v, StartRun)
    }
    assert starts == {"order-signed", "order-rotated"}
    assert {r.admission_key for r in committed_replies(settings)} == {
        "order-signed",
        "order-rotated",
        *refused,
    }
