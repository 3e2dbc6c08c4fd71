"""A refused, signed request replayed with its original timestamp is refused again (issue 31).

On the real broker, signed admission on: a request signed by a key not yet registered is
refused; the key is registered and admission restarts (the refusal is a row of its claims
table, restored by the new instance); the very same record —
key, value, signature headers and its original timestamp — produced again is refused again,
and so is one signed long ago and produced with that old time (the ``admission`` topic is
stamped by the broker, LogAppendTime). Nothing is admitted; a request the key signs now is.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from test_admission import CAPS, SERDE, committed_replies, running
from test_processor import read_all

from runplane.config import Settings
from runplane.kafka.clients import admin, producer_config
from runplane.kafka.topics import describe_topics
from runplane.runs.client import Client
from runplane.signing.admission import SigningKey
from runplane.wire import (
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    RefusedSignature,
    StartRun,
)
from services.admission.serve import authentication, build
from services.admission.settings import AdmissionSettings
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration


def _register(path: Path, *keys: SigningKey) -> None:
    entry = {
        "name": "acme-gw",
        "tenant": "acme",
        "keys": [{"id": k.key_id, "public_key": k.public_b64()} for k in keys],
    }
    path.write_text(yaml.safe_dump({"emitters": [entry]}))


def _request(adm_key: str) -> AdmissionRequest:
    return AdmissionRequest(
        admission_key=adm_key,
        capability="refund",
        input_json='{"invoice_id":"inv-1"}',
        tenant="acme",
        initiator="ivan",
        requested_ms=1,
    )


def _replies(settings: Settings, adm_key: str) -> list[AdmissionReply]:
    return [r for r in committed_replies(settings) if r.admission_key == adm_key]


def test_a_refused_request_replayed_after_its_key_is_registered_is_refused_again(
    settings: Settings, tmp_path: Path
) -> None:
    registry = tmp_path / "emitters.yaml"
    earlier, key = SigningKey.generate("acme-gw-6"), SigningKey.generate("acme-gw-7")
    _register(registry, earlier)  # acme-gw-7 not yet
    [report] = describe_topics(settings, admin(settings), names=["admission"])
    assert report.config.get("message.timestamp.type") == "LogAppendTime", report.drift

    now_ms = time.time_ns() // 1_000_000
    value = SERDE.encode("admission", _request("pay-1"))
    signed = key.headers(b"pay-1", value, now_ms)
    old_ms = now_ms - 3_600_000  # signed an hour ago, produced with that time
    old_value = SERDE.encode("admission", _request("pay-old"))
    old_signed = key.headers(b"pay-old", old_value, old_ms)
    producer = Producer(producer_config(settings))
    topic = settings.topic("admission")

    def produce(k: bytes, v: bytes, headers: list[tuple[str, bytes]], at_ms: int) -> None:
        producer.produce(topic, key=k, value=v, headers=headers, timestamp=at_ms)
        assert producer.flush(30) == 0

    own = AdmissionSettings(base=settings, emitters_file=registry)
    with running(build(own, capabilities=CAPS, auth=authentication(own))):
        produce(b"pay-1", value, list(signed), now_ms)
        first = wait_for(lambda: _replies(settings, "pay-1"), what="the first refusal")
        assert first[0].outcome is AdmissionOutcome.REFUSED
        assert "unknown key id" in (first[0].reason or "")
    # The refusal is remembered in the claims table, committed with it.
    [remembered] = [v for _, v in read_all(settings, "admission.claims")]
    assert isinstance(remembered, RefusedSignature) and remembered.admission_key == "pay-1"

    _register(registry, earlier, key)  # the key is registered
    # A new admission instance (nothing in memory): it restores the refusal with the table.
    with running(build(own, capabilities=CAPS, auth=authentication(own))):
        produce(b"pay-1", value, list(signed), now_ms)  # the same bytes, the original time
        produce(b"pay-old", old_value, list(old_signed), old_ms)
        again = wait_for(
            lambda: (r := _replies(settings, "pay-1")) and len(r) >= 2 and r,
            what="the replay answered",
        )
        old = wait_for(lambda: _replies(settings, "pay-old"), what="the old one answered")
        # The key is in force: what it signs now is admitted.
        with Client(settings, signing_key=key) as client:
            fresh = client.admit(
                "refund", "pay-2", {"invoice_id": "inv-1"}, tenant="acme", initiator="ivan"
            )

    assert again[1].outcome is AdmissionOutcome.REFUSED and again[1].run_id is None
    assert "replay of a refused request" in (again[1].reason or "")
    assert old[0].outcome is AdmissionOutcome.REFUSED and "window" in (old[0].reason or "")
    assert fresh.outcome is AdmissionOutcome.ADMITTED, fresh.reason
    starts = [
        v.admission_key for _, v in read_all(settings, "runs.inbox") if isinstance(v, StartRun)
    ]
    assert starts == ["pay-2"]  # nothing of the replays was admitted
