"""Run queries on the real broker and Redis: the index, cost, bodies for auditors, rebuild."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import httpx
import pytest
from test_journal_service import produce_run, read_audit, running, sample_run, wait_audit

from runplane.config import Settings
from runplane.journal.index import RunIndex
from runplane.journal.summary import summarize
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import RunStatus
from services.journal.api import build_api
from services.journal.indexer import Indexer
from services.journal.serve import KafkaRunReader
from tests.helpers.waiting import wait_for

AUDITOR_TOKEN = "tok-auditor-" + uuid.uuid4().hex
CLERK_TOKEN = "tok-clerk-" + uuid.uuid4().hex


@pytest.fixture
def index(settings: Settings) -> Iterator[RunIndex]:
    idx = RunIndex.from_url(settings.redis_url, settings.topic_prefix)
    yield idx
    idx.clear()


@pytest.fixture
def indexer(settings: Settings, index: RunIndex) -> Iterator[Indexer]:
    ix = Indexer(settings, index)
    stop = threading.Event()
    t = threading.Thread(target=ix.run, args=(stop,), daemon=True)
    t.start()
    yield ix
    stop.set()
    t.join(30)


@pytest.fixture
def api(settings: Settings, index: RunIndex) -> Iterator[httpx.Client]:
    """The API served for real (uvicorn on a free port), as the service serves it."""
    readers = Principals.from_data(
        [
            {"name": "ada", "token_sha256": token_digest(AUDITOR_TOKEN), "roles": ["auditor"]},
            {"name": "bob", "token_sha256": token_digest(CLERK_TOKEN), "roles": ["clerk"]},
        ]
    )
    app = build_api(lambda: index, KafkaRunReader(settings), readers)
    stop = threading.Event()
    # Every run endpoint needs a principal (any role): the client asks as the clerk.
    with (
        run_http(app, "127.0.0.1", 0, stop) as server,
        httpx.Client(
            base_url=f"http://127.0.0.1:{server.port}",
            timeout=60,
            headers={"Authorization": f"Bearer {CLERK_TOKEN}"},
        ) as c,
    ):
        wait_for(lambda: _up(c), timeout_s=30.0)
        yield c
        stop.set()


def _up(c: httpx.Client) -> bool:
    try:
        c.get("/openapi.json")
        return True
    except httpx.TransportError:
        return False


def test_queries_cost_bodies_and_rebuild(
    settings: Settings, index: RunIndex, indexer: Indexer, api: httpx.Client
) -> None:
    a, b = f"r-api-a-{uuid.uuid4().hex[:6]}", f"r-api-b-{uuid.uuid4().hex[:6]}"
    recs_a, res_a = sample_run(a, calls=3, capability="refund", case_id="c-1", start_ms=10_000)
    recs_b, res_b = sample_run(
        b, calls=1, capability="triage", case_id="c-1", start_ms=20_000, tokens=(100, 50), units=2.0
    )
    produce_run(settings, recs_a, res_a)
    produce_run(settings, recs_b[:3], res_b)  # b is still running (no RunCompleted yet)
    with running(settings):
        wait_audit(settings, a, len(recs_a))
        wait_audit(settings, b, 3)
    wait_for(
        lambda: (
            api.get(f"/runs/{b}").status_code == 200
            and api.get(f"/runs/{b}").json()["records"] == 3
        ),
        timeout_s=30.0,
    )
    wait_for(lambda: api.get(f"/runs/{a}").json().get("records") == len(recs_a), timeout_s=30.0)

    run_a = api.get(f"/runs/{a}").json()
    assert (
        run_a["status"] == "COMPLETED"
        and run_a["capability"] == "refund"
        and run_a["case_id"] == "c-1"
    )
    assert run_a["cost"] == {"tokens_in": 30, "tokens_out": 15, "units": 1.5, "tokens": 45}
    assert run_a["verdict"] == "VERIFIED" and run_a["started_ms"] == 10_000
    assert api.get(f"/runs/{b}").json()["status"] == "RUNNING"
    # the index is the fold of the audit stream
    assert index.get(a) == summarize(a, read_audit(settings, a))

    listed = api.get("/runs").json()["runs"]
    assert [r["run_id"] for r in listed] == [b, a]  # newest first
    assert [
        r["run_id"] for r in api.get("/runs", params={"status": "COMPLETED"}).json()["runs"]
    ] == [a]
    assert [
        r["run_id"] for r in api.get("/runs", params={"capability": "triage"}).json()["runs"]
    ] == [b]
    assert [r["run_id"] for r in api.get("/runs", params={"since_ms": 15_000}).json()["runs"]] == [
        b
    ]
    assert len(api.get("/runs", params={"case": "c-1"}).json()["runs"]) == 2
    case_cost = index.cost("case", "c-1")
    assert (case_cost.tokens_in, case_cost.tokens_out, case_cost.units) == (130, 65, 3.5)

    # journal: records for any principal (none: 401), bodies only for an auditor's token
    j = api.get(f"/runs/{a}/journal").json()
    assert [r["seq"] for r in j["records"]] == list(range(len(recs_a))) and j["bodies"] is None
    for path in ("/runs", f"/runs/{a}", f"/runs/{a}/journal", f"/runs/{a}/verify"):
        assert api.get(path, headers={"Authorization": ""}).status_code == 401
    assert (
        api.get(
            f"/runs/{a}/journal", params={"bodies": True}, headers={"Authorization": ""}
        ).status_code
        == 401
    )
    bad = api.get(
        f"/runs/{a}/journal", params={"bodies": True}, headers={"Authorization": "Bearer nope"}
    )
    assert bad.status_code == 401
    clerk = api.get(
        f"/runs/{a}/journal",
        params={"bodies": True},
        headers={"Authorization": f"Bearer {CLERK_TOKEN}"},
    )
    assert clerk.status_code == 403 and "auditor" in clerk.json()["detail"]
    full = api.get(
        f"/runs/{a}/journal",
        params={"bodies": True},
        headers={"Authorization": f"Bearer {AUDITOR_TOKEN}"},
    )
    assert full.status_code == 200 and full.json()["bodies"]["0/1"]["value_json"] == '{"n": 1}'

    v = api.get(f"/runs/{a}/verify").json()
    assert v["verified"] and v["records"] == len(recs_a) and v["service_verdict"] == "VERIFIED"

    # 4xx, never 500
    assert api.get("/runs/nope-nope").status_code == 404
    assert api.get("/runs/nope-nope/verify").status_code == 404
    assert api.get("/runs/nope-nope/journal").status_code == 404
    assert api.get("/runs", params={"status": "SLEEPING"}).status_code == 422
    assert api.get("/runs", params={"since_ms": 5, "until_ms": 1}).status_code == 400
    assert api.get("/runs", params={"limit": 0}).status_code == 422
    assert "/runs/{run_id}/verify" in api.get("/openapi.json").json()["paths"]

    # flushing the index loses nothing: the indexer rebuilds it from audit
    before = index.get(a)
    index.clear()
    assert index.get(a) is None
    wait_for(lambda: index.get(a) == before and index.get(b) is not None, timeout_s=30.0)
    assert index.cost("case", "c-1").tokens_in == 130  # rebuilt, not doubled


def test_status_filter_uses_run_status_names(index: RunIndex, api: httpx.Client) -> None:
    index.mark_started()
    for status in RunStatus:
        assert api.get("/runs", params={"status": status.value}).status_code == 200
