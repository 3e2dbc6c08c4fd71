"""``POST /runs/{run}/signals|cancel``: identity and tenant from the token, refusals with
their status codes, and what reaches the run's inbox (an in-memory target in Kafka's place)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from starlette.testclient import TestClient

from runplane.serving.auth import Principals, token_digest
from runplane.wire import AdmissionClaim, RunStatus, SessionSnapshot, Signal
from services.admission.operate import HttpOperate

PRINCIPALS = Principals.from_data(
    [
        {"name": "ada", "token_sha256": token_digest("a"), "roles": ["operator"], "tenant": "acme"},
        {"name": "bob", "token_sha256": token_digest("b"), "roles": [], "tenant": "acme"},
        {
            "name": "gil",
            "token_sha256": token_digest("g"),
            "roles": ["operator"],
            "tenant": "globex",
        },
    ]
)


def _snap(run_id: str, status: RunStatus) -> SessionSnapshot:
    return SessionSnapshot(
        session_id=run_id,
        capability="tally",
        status=status,
        era=0,
        next_seq=3,
        last_hash="0" * 64,
        parked_on=None,
        case_id=None,
        admission_key=f"key-{run_id}",
        tenant="acme",
        initiator="emitter",
        input_json="{}",
        checkpoint_json=None,
        output_json=None,
        error=None,
        started_ms=1,
        updated_ms=2,
    )


class Inbox:
    """The two tables and the inbox, in memory (``runplane.runs.operate.Target``)."""

    def __init__(self) -> None:
        self.tables: dict[tuple[str, str], Any] = {
            ("sessions", "r-live"): _snap("r-live", RunStatus.PARKED),
            ("sessions", "r-done"): _snap("r-done", RunStatus.COMPLETED),
            # A claim written before per-tenant claims (keyed by the key alone): read as acme's.
            ("admission.claims", "order-17"): AdmissionClaim(
                admission_key="order-17",
                run_id="r-live",
                case_id=None,
                capability="tally",
                tenant="acme",
                status=RunStatus.PARKED,
                task_id=None,
                admitted_ms=1,
                updated_ms=2,
            ),
        }
        self.sent: list[Signal] = []

    def latest(self, topic: str, key: str, *, partition_key: str | None = None) -> Any | None:
        return self.tables.get((topic, key))

    def to_inbox(self, record: Signal) -> None:
        self.sent.append(record)


def _client(inbox: Inbox) -> TestClient:
    return TestClient(FastAPI(routes=HttpOperate(PRINCIPALS, inbox).routes()))


def test_a_signal_by_admission_key_carries_the_token_s_identity() -> None:
    inbox = Inbox()
    reply = _client(inbox).post(
        "/runs/order-17/signals",
        json={"name": "vote", "payload": {"v": 1}, "signal_id": "s-1", "sent_by": "mallory"},
        headers={"Authorization": "Bearer b"},
    )
    assert reply.status_code == 202
    assert reply.json() == {"run_id": "r-live", "name": "vote", "signal_id": "s-1"}
    [sent] = inbox.sent
    assert (sent.session_id, sent.sent_by, sent.payload_json) == ("r-live", "bob", '{"v":1}')


def test_refusals_say_why_and_send_nothing() -> None:
    inbox = Inbox()
    client = _client(inbox)
    cases = [
        ("/runs/r-live/signals", {"name": "vote"}, None, 401),
        ("/runs/r-live/signals", {"name": "vote"}, "nope", 401),
        ("/runs/r-live/signals", {"name": "vote"}, "g", 404),  # another tenant's run
        ("/runs/r-none/signals", {"name": "vote"}, "a", 404),
        ("/runs/r-done/signals", {"name": "vote"}, "a", 409),
        ("/runs/r-live/signals", {"payload": 1}, "a", 400),
        ("/runs/r-live/signals", {"name": "runplane.cancel"}, "a", 400),  # reserved
        ("/runs/r-live/cancel", {"reason": "x"}, "b", 403),  # not an operator
    ]
    for path, body, token, status in cases:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        reply = client.post(path, json=body, headers=headers)
        assert reply.status_code == status, (path, body, token, reply.text)
    done = client.post(
        "/runs/r-done/signals", json={"name": "v"}, headers={"Authorization": "Bearer a"}
    )
    assert done.json()["run_status"] == "COMPLETED"
    assert inbox.sent == []


def test_an_operator_cancels_with_a_reason() -> None:
    inbox = Inbox()
    reply = _client(inbox).post(
        "/runs/r-live/cancel",
        json={"reason": "customer withdrew", "request_id": "c-9"},
        headers={"Authorization": "Bearer a"},
    )
    assert reply.status_code == 202 and reply.json()["signal_id"] == "c-9"
    [sent] = inbox.sent
    assert (sent.name, sent.sent_by) == ("runplane.cancel", "ada")
    assert sent.payload_json == '{"reason":"customer withdrew"}'
