"""Signed admission on the real broker: the emitter client signs, admission verifies.

A signed request of the emitter's tenant is admitted; an unsigned one, one signed with a key
that does not match the registered id, and one naming another tenant are each refused with
the reason — a REFUSED reply to the emitter and a dead letter (with the request's bytes) for
the operator — and start no run.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml
from test_admission import CAPS, committed_replies, running
from test_case_tenancy import acme_deadline_breached
from test_cases_support import cases_service, reply_to, send
from test_processor import read_all

from runplane.config import Settings
from runplane.core.keys import case_id_for
from runplane.runs.client import Client
from runplane.serving.auth import Principals
from runplane.serving.health import Health
from runplane.serving.shell import run_http
from runplane.signing.admission import (
    KEY_ID_HEADER,
    SIGNATURE_HEADER,
    SIGNED_JSON_HEADER,
    SIGNED_MS_HEADER,
    SigningKey,
    message,
)
from runplane.wire import (
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    DeadLetter,
    StartRun,
)
from services.admission.decide import CapabilitySpec
from services.admission.http import HttpAdmission
from services.admission.operate import HttpOperate
from services.admission.serve import authentication, build, http_app
from services.admission.settings import AdmissionSettings
from services.cases.breach import SWEEP_INITIATOR
from tests.helpers.waiting import wait_for

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

    wait_for(dead_lettered, what="three dead letters")
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


def test_the_cases_service_signs_its_breach_follow_ups(settings: Settings, tmp_path: Path) -> None:
    """Where signatures are required, a breach's follow-up (the cases service's own request,
    for the case's tenant) is admitted because the cases service signs it with its key,
    registered for any tenant and the sweeper's initiator only."""
    cases_key = SigningKey.generate("runplane-cases-1")
    registry = tmp_path / "emitters.yaml"
    registry.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "runplane-cases",
                    "any_tenant": True,
                    "initiators": [SWEEP_INITIATOR],
                    "keys": [{"id": cases_key.key_id, "public_key": cases_key.public_b64()}],
                }
            ]
        )
    )
    case = case_id_for("acme", {"ticket": "T-9"})
    assert case is not None
    register, breach = acme_deadline_breached(case)
    caps = {"escalate": CapabilitySpec(None)}
    admission = build(AdmissionSettings(base=settings, emitters_file=registry), capabilities=caps)
    with cases_service(settings, emitter_key=cases_key), running(admission):
        send(settings, register)
        assert reply_to(settings, "r-acme", register.request_id).accepted
        send(settings, breach)

        def answered() -> AdmissionReply | None:
            replies = [r for _, r in read_all(settings, "admission.replies")]
            return next((r for r in replies if isinstance(r, AdmissionReply)), None)

        reply = wait_for(answered, what="the follow-up answered")
    assert reply.outcome is AdmissionOutcome.ADMITTED, reply.reason
    assert reply.case_id == case


def _http_headers(key: SigningKey, adm_key: str, body: bytes, at_ms: int) -> dict[str, str]:
    sig = key.private.sign(message(key.key_id, at_ms, adm_key.encode(), body))
    return {
        KEY_ID_HEADER: key.key_id,
        SIGNED_MS_HEADER: str(at_ms),
        SIGNATURE_HEADER: base64.b64encode(sig).decode(),
        "Content-Type": "application/json",
    }


def _body(adm_key: str, tenant: str = "acme") -> bytes:
    return json.dumps(
        {
            "admission_key": adm_key,
            "capability": "refund",
            "input": INPUT,
            "tenant": tenant,
            "initiator": "ivan",
        }
    ).encode()


def test_http_admission_forwards_signed_requests_and_refuses_the_rest(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNPLANE_EMITTER_KEY", raising=False)
    monkeypatch.delenv("RUNPLANE_EMITTER_KEY_FILE", raising=False)
    key = SigningKey.generate("gw-http")
    own = AdmissionSettings(base=settings, emitters_file=_registry(tmp_path / "e.yaml", key))
    auth = authentication(own)
    stop = threading.Event()
    with (
        running(build(own, capabilities=CAPS, auth=auth)),
        Client(settings) as client,
        run_http(
            http_app(
                Health(), HttpAdmission(auth, client), HttpOperate(Principals.from_data([]), client)
            ),
            "127.0.0.1",
            0,
            stop,
        ) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=90) as http,
    ):
        now = time.time_ns() // 1_000_000
        ok = http.post(
            "/admit",
            content=_body("web-1"),
            headers=_http_headers(key, "web-1", _body("web-1"), now),
        )
        again = http.post(
            "/admit",
            content=_body("web-1"),
            headers=_http_headers(key, "web-1", _body("web-1"), now),
        )
        unsigned = http.post("/admit", content=_body("web-2"))
        tampered = http.post(
            "/admit",
            content=_body("web-3").replace(b"inv-1", b"inv-9"),
            headers=_http_headers(key, "web-3", _body("web-3"), now),
        )
        forged = http.post(
            "/admit",
            content=_body("web-4", "globex"),
            headers=_http_headers(key, "web-4", _body("web-4", "globex"), now),
        )
        # Straight to Kafka: a valid signed JSON body riding on a record that says otherwise.
        signed_body = _body("web-5")
        record = AdmissionRequest(
            admission_key="web-5",
            capability="refund",
            input_json=json.dumps({"invoice_id": "inv-666"}),
            tenant="acme",
            initiator="ivan",
        )
        # The emitter's signature over the JSON, exactly as the endpoint forwards it.
        headers = [*key.headers(b"web-5", signed_body, now), (SIGNED_JSON_HEADER, signed_body)]
        swapped = client.send(record, timeout=60, signed=(headers, now))
    stop.set()

    assert ok.status_code == 200 and ok.json()["outcome"] == "ADMITTED", ok.text
    assert again.status_code == 200 and again.json()["outcome"] == "DUPLICATE"
    assert again.json()["run_id"] == ok.json()["run_id"]
    assert unsigned.status_code == 401 and unsigned.json()["refused"] == "unauthenticated"
    assert tampered.status_code == 401 and "does not verify" in tampered.json()["detail"]
    assert forged.status_code == 403 and forged.json()["refused"] == "forged_tenant"
    assert swapped.outcome is AdmissionOutcome.REFUSED
    assert "signed JSON body does not say what the request says" in (swapped.reason or "")
    starts = {
        v.admission_key for _, v in read_all(settings, "runs.inbox") if isinstance(v, StartRun)
    }
    assert starts == {"web-1"}  # nothing the endpoint refused reached Kafka; web-5 was refused
