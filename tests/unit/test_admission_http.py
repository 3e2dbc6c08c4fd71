"""Admission's HTTP API: one JSON error format with the other services, its reference at /docs
served offline, and ``POST /admit`` in dev mode taking unsigned requests as the Kafka path does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from runplane.serving.auth import Principals, token_digest
from runplane.serving.health import Health
from runplane.signing.admission import Headers
from runplane.wire import AdmissionOutcome, AdmissionReply, AdmissionRequest, RunStatus
from services.admission.http import HttpAdmission
from services.admission.identity import Authentication
from services.admission.operate import HttpOperate
from services.admission.serve import http_app

pytestmark = pytest.mark.unit

BODY = {
    "admission_key": "order-17",
    "capability": "refund",
    "input": {"invoice_id": "inv-1"},
    "tenant": "acme",
    "initiator": "web",
}


class Sender:
    """Records what the endpoint forwards to Kafka and answers as admission would."""

    def __init__(self) -> None:
        self.sent: list[tuple[AdmissionRequest, tuple[Headers, int] | None]] = []

    def send(
        self,
        request: AdmissionRequest,
        *,
        timeout: float = 30.0,
        signed: tuple[Headers, int] | None = None,
    ) -> AdmissionReply:
        self.sent.append((request, signed))
        return AdmissionReply(
            admission_key=request.admission_key,
            outcome=AdmissionOutcome.ADMITTED,
            run_id="r-1",
            status=RunStatus.ADMITTED,
            replied_ms=1,
        )


class NoTarget:
    def latest(self, topic: str, key: str, *, partition_key: str | None = None) -> Any | None:
        return None

    def to_inbox(self, record: Any) -> None:
        raise AssertionError("nothing is sent in these tests")


def _client(*, dev: bool) -> tuple[TestClient, Sender]:
    sender = Sender()
    ops = Principals.from_data(
        [{"name": "ops", "token_sha256": token_digest("t-ops"), "roles": ["operator"]}]
    )
    app = http_app(
        Health(),
        HttpAdmission(Authentication(allow_unsigned=dev), sender),
        HttpOperate(ops, NoTarget()),
    )
    return TestClient(app), sender


def test_dev_mode_admits_an_unsigned_request_as_the_kafka_path_does() -> None:
    http, sender = _client(dev=True)
    answer = http.post("/admit", content=json.dumps(BODY))
    assert answer.status_code == 200, answer.text
    assert answer.json()["outcome"] == "ADMITTED"
    ((request, signed),) = sender.sent
    # Tenant and initiator are the body's (dev mode), and it goes on with no signature at all:
    # not signed with a key of admission's own.
    assert (request.tenant, request.initiator) == ("acme", "web")
    assert signed is not None and list(signed[0]) == []


def test_outside_dev_mode_an_unsigned_request_is_refused_in_json() -> None:
    http, sender = _client(dev=False)
    answer = http.post("/admit", content=json.dumps(BODY))
    assert answer.status_code == 401 and not sender.sent
    assert answer.json()["refused"] == "unauthenticated"
    assert "requires a signature" in answer.json()["detail"]


def test_a_partial_signature_is_refused_even_in_dev_mode() -> None:
    http, sender = _client(dev=True)
    answer = http.post("/admit", content=json.dumps(BODY), headers={"Runplane-Key-Id": "k"})
    assert answer.status_code == 401 and not sender.sent
    assert answer.json()["refused"] == "unauthenticated"


@pytest.mark.parametrize(
    ("method", "path", "kw", "status"),
    [
        ("post", "/admit", {"content": b"{not json"}, 400),
        ("get", "/no-such-path", {}, 404),
        ("get", "/admit", {}, 405),
        ("post", "/runs/r-1/signals", {}, 401),  # no token
        ("post", "/runs/r-1/cancel", {"headers": {"Authorization": "Bearer nope"}}, 401),
        (
            "post",
            "/runs/r-1/signals",
            {"headers": {"Authorization": "Bearer t-ops"}, "content": b"[1, 2"},
            400,
        ),
    ],
)
def test_every_error_is_the_one_json_format(
    method: str, path: str, kw: dict[str, Any], status: int
) -> None:
    http, _ = _client(dev=False)
    answer = getattr(http, method)(path, **kw)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/json"), answer.text
    assert isinstance(answer.json()["detail"], str) and answer.json()["detail"]


def test_the_reference_is_served_with_local_assets() -> None:
    http, _ = _client(dev=False)
    page = http.get("/docs")
    assert page.status_code == 200
    assert "/docs/assets/swagger-ui-bundle.js" in page.text
    assert "http://" not in page.text and "https://" not in page.text, page.text  # no CDN
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        got = http.get(f"/docs/assets/{asset}")
        assert got.status_code == 200 and len(got.content) > 10_000
    paths = http.get("/openapi.json").json()["paths"]
    assert {"/admit", "/runs/{run}/signals", "/runs/{run}/cancel"} <= set(paths)
    assert "requestBody" in paths["/admit"]["post"]
