"""The pages' live streams without a broker: the runs UI's ``/ui/stream/{run}`` (the sign-in
cookie, the principal's tenant, Last-Event-ID) and the worklist's ``/tasks/{id}/live`` (the
task's run, kept to proposed calls and the end, for people who may see the task)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from test_journal_api_guards import START, FakeIndex, FakeReader
from test_journal_api_stream import FakeFollow, _events
from test_worklist_hardening import _worklist, record

from runplane.journal.summary import RunSummary
from runplane.runs.stream import StreamItem
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import RunStatus, StreamEvent, StreamKind
from services.journal.api import build_api
from services.worklist.index import MemoryTasks
from services.worklist.serve import build_app

pytestmark = pytest.mark.unit

READERS = Principals.from_data(
    [
        {"name": "ada", "token_sha256": token_digest("a"), "roles": [], "tenant": "acme"},
        {"name": "gil", "token_sha256": token_digest("g"), "roles": [], "tenant": "globex"},
    ]
)


@pytest.fixture
def runs_ui() -> Iterator[tuple[str, FakeFollow]]:
    running = RunSummary("r-1", status=RunStatus.RUNNING, started_ms=START, tenant="acme")
    follow = FakeFollow()
    app = build_api(lambda: FakeIndex({"r-1": running}), FakeReader(), READERS, stream=follow)  # type: ignore[arg-type,return-value]
    stop = threading.Event()
    with run_http(app, "127.0.0.1", 0, stop) as server:
        yield f"http://127.0.0.1:{server.port}", follow
    stop.set()


def _sign_in(c: httpx.Client, token: str) -> httpx.Client:
    assert c.post("/ui/signin", data={"token": token}).status_code == 303
    return c


def test_the_run_page_reads_the_stream_with_its_sign_in_cookie(
    runs_ui: tuple[str, FakeFollow],
) -> None:
    base, follow = runs_ui
    with httpx.Client(base_url=base, timeout=20) as anonymous:
        assert anonymous.get("/ui/stream/r-1").status_code == 401
        # A bearer token is the API's way, not the page's: the cookie is what this one reads.
        assert (
            anonymous.get("/ui/stream/r-1", headers={"Authorization": "Bearer a"}).status_code
            == 401
        )
    with httpx.Client(base_url=base, timeout=20) as c:
        _sign_in(c, "a")
        page = c.get("/ui/runs/r-1")
        assert 'data-stream="/ui/stream/r-1"' in page.text and "/ui/static/live.js" in page.text
        assert 'data-over="false"' in page.text  # running: the panel follows it
        r = c.get("/ui/stream/r-1")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        assert [(i, k) for i, k, _ in _events(r.text)] == [
            (3, "TEXT_DELTA"),
            (7, "TEXT_DELTA"),
            (8, "ENDED"),
        ]
        assert follow.calls[-1]["run_id"] == "r-1" and follow.calls[-1]["since_ms"] is not None
        resumed = c.get("/ui/stream/r-1", headers={"Last-Event-ID": "3"})
        assert [i for i, _, _ in _events(resumed.text)] == [7, 8]
        assert follow.calls[-1]["after"] == 3
        bad = c.get("/ui/stream/r-1", headers={"Last-Event-ID": "x3"})
        assert bad.status_code == 400 and "Last-Event-ID" in bad.text
        assert c.get("/ui/stream/r-nope").status_code == 404
    with httpx.Client(base_url=base, timeout=20) as other:
        _sign_in(other, "g")  # another tenant: as if the run did not exist
        assert other.get("/ui/stream/r-1").status_code == 404
    assert len(follow.calls) == 2  # neither refusal reached the stream


def test_the_live_panel_script_writes_text_never_markup() -> None:
    from services.journal.ui import HERE

    script = (HERE / "static" / "live.js").read_text()
    assert "innerHTML" not in script and "textContent" in script
    assert "http://" not in script and "https://" not in script  # nothing from elsewhere


# --- the worklist's task page -----------------------------------------------------------------


def _stream_event(seq: int, kind: StreamKind, payload: dict[str, Any]) -> StreamEvent:
    return StreamEvent(
        session_id="run-1",
        era=0,
        call_seq=4,
        attempt=100,
        seq=seq,
        kind=kind,
        payload_json=json.dumps(payload),
        stamp_ms=START,
    )


PROPOSED = {"index": 0, "name": "refund", "arguments": {"a": 5}}
RUN_EVENTS = [
    StreamItem(1, _stream_event(0, StreamKind.TEXT_DELTA, {"text": "thinking"})),
    StreamItem(2, _stream_event(1, StreamKind.TOOL_CALL_PROPOSED, PROPOSED)),
    StreamItem(3, _stream_event(2, StreamKind.TOOL_CALL_STARTED, {"name": "refund"})),
    StreamItem(4, _stream_event(3, StreamKind.ENDED, {"status": "completed"})),
]


@pytest.fixture
def worklist() -> Iterator[tuple[str, FakeFollow]]:
    principals = Principals.from_data(
        [
            {"name": "ada", "token_sha256": token_digest("ada-token"), "roles": ["finance"]},
            {"name": "cy", "token_sha256": token_digest("cy-token"), "roles": ["support"]},
        ]
    )
    follow = FakeFollow(RUN_EVENTS)
    app = build_app(_worklist(MemoryTasks({"run-1/0/1": record()})), principals, stream=follow)
    stop = threading.Event()
    with run_http(app, "127.0.0.1", 0, stop) as server:
        yield f"http://127.0.0.1:{server.port}", follow
    stop.set()


def test_the_task_page_gets_the_calls_its_run_proposes_and_its_end(
    worklist: tuple[str, FakeFollow],
) -> None:
    base, follow = worklist
    with httpx.Client(base_url=base, timeout=20) as c:
        assert c.get("/tasks/run-1/0/1/live").status_code == 401
        assert c.post("/signin", data={"token": "ada-token"}).status_code == 303
        page = c.get("/tasks/run-1/0/1")
        assert 'id="live-calls"' in page.text
        assert 'data-stream="/tasks/run-1%2F0%2F1/live"' in page.text
        assert c.get("/tasks/run-1%2F0%2F1/live").status_code == 200  # the page's own href
        r = c.get("/tasks/run-1/0/1/live")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        got = _events(r.text)
        assert [(i, k) for i, k, _ in got] == [(2, "TOOL_CALL_PROPOSED"), (4, "ENDED")]
        assert got[0][2]["payload"] == PROPOSED
        # The task's run, from the task's opening on.
        assert follow.calls[-1] == {
            "run_id": "run-1",
            "after": None,
            "since_ms": 1_000,
            "to_end": False,  # open: followed until the run's end
        }
        resumed = c.get("/tasks/run-1/0/1/live", headers={"Last-Event-ID": "2"})
        assert [i for i, _, _ in _events(resumed.text)] == [4]
        assert c.get("/tasks/run-1/0/1/live", headers={"Last-Event-ID": "-1"}).status_code == 400
        assert c.get("/tasks/nope/0/1/live").status_code == 404
    with httpx.Client(base_url=base, timeout=20) as cy:  # not the task's role: not visible
        cy.post("/signin", data={"token": "cy-token"})
        assert cy.get("/tasks/run-1/0/1/live").status_code == 404
    assert len(follow.calls) == 3  # no refusal reached the stream
