"""``GET /runs/{id}/stream`` without a broker: the run API's authentication and tenants, the
server-sent events a follower's items become, and where ``Last-Event-ID`` resumes."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import httpx
import pytest
from test_journal_api_guards import START, FakeIndex, FakeReader

from runplane.journal.summary import RunSummary
from runplane.runs.stream import BadEventId, StreamItem, last_event_id
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import RunStatus, StreamEvent, StreamKind
from services.journal.api import build_api

pytestmark = pytest.mark.unit

READERS = Principals.from_data(
    [
        {"name": "ada", "token_sha256": token_digest("a"), "roles": [], "tenant": "acme"},
        {"name": "gil", "token_sha256": token_digest("g"), "roles": [], "tenant": "globex"},
    ]
)


def _event(seq: int, kind: StreamKind, payload: dict[str, Any]) -> StreamEvent:
    return StreamEvent(
        session_id="r-1",
        era=0,
        call_seq=2,
        attempt=100,
        seq=seq,
        kind=kind,
        payload_json=json.dumps(payload),
        stamp_ms=START,
    )


# The run's events at their offsets (other runs' events sit between them on the partition).
EVENTS = [
    StreamItem(3, _event(0, StreamKind.TEXT_DELTA, {"text": "hel"})),
    StreamItem(7, _event(1, StreamKind.TEXT_DELTA, {"text": "lo"})),
    StreamItem(8, _event(2, StreamKind.ENDED, {"status": "completed"})),
]


class FakeFollow:
    """A follower over a fixed list of a run's events (``EVENTS`` unless told)."""

    def __init__(self, events: list[StreamItem] | None = None) -> None:
        self.events = EVENTS if events is None else events
        self.calls: list[dict[str, Any]] = []

    async def __call__(
        self,
        run_id: str,
        *,
        after: int | None,
        since_ms: int | None,
        to_end: bool,
        idle_s: float | None,
    ) -> AsyncGenerator[StreamItem | None]:
        self.calls.append(
            {"run_id": run_id, "after": after, "since_ms": since_ms, "to_end": to_end}
        )
        yield None  # an idle tick: a keep-alive comment
        for item in self.events:
            if after is None or item.id > after:
                yield item


@pytest.fixture
def served() -> Iterator[tuple[httpx.Client, FakeFollow]]:
    running = RunSummary("r-1", status=RunStatus.RUNNING, started_ms=START, tenant="acme")
    index = FakeIndex({"r-1": running})
    follow = FakeFollow()
    app = build_api(lambda: index, FakeReader(), READERS, stream=follow)  # type: ignore[arg-type,return-value]
    stop = threading.Event()
    with (
        run_http(app, "127.0.0.1", 0, stop) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=20) as c,
    ):
        yield c, follow
    stop.set()


def _events(text: str) -> list[tuple[int, str, dict[str, Any]]]:
    out = []
    for block in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if not line.startswith(":")
        )
        if fields:
            out.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    return out


def test_the_stream_is_server_sent_events_with_offsets_for_ids(
    served: tuple[httpx.Client, FakeFollow],
) -> None:
    c, follow = served
    r = c.get("/runs/r-1/stream", headers={"Authorization": "Bearer a"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert r.text.startswith(": keep-alive\n\n")
    got = _events(r.text)
    assert [(i, k) for i, k, _ in got] == [(3, "TEXT_DELTA"), (7, "TEXT_DELTA"), (8, "ENDED")]
    assert got[0][2]["payload"] == {"text": "hel"} and got[0][2]["attempt"] == 100
    assert follow.calls[0]["after"] is None and follow.calls[0]["since_ms"] is not None
    assert follow.calls[0]["to_end"] is False  # running: followed until its end


def test_last_event_id_resumes_right_after_it(served: tuple[httpx.Client, FakeFollow]) -> None:
    c, follow = served
    headers = {"Authorization": "Bearer a", "Last-Event-ID": "3"}
    r = c.get("/runs/r-1/stream", headers=headers)
    assert [i for i, _, _ in _events(r.text)] == [7, 8]
    assert follow.calls[-1]["after"] == 3
    r = c.get("/runs/r-1/stream?after=7", headers={"Authorization": "Bearer a"})
    assert [i for i, _, _ in _events(r.text)] == [8]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer nope"}, 401),
        ({"Authorization": "Bearer g"}, 404),  # another tenant's run: as unknown
        ({"Authorization": "Bearer a", "Last-Event-ID": "x1"}, 400),
    ],
)
def test_the_stream_is_guarded_as_the_run_is(
    served: tuple[httpx.Client, FakeFollow], headers: dict[str, str], status: int
) -> None:
    c, follow = served
    assert c.get("/runs/r-1/stream", headers=headers).status_code == status
    assert follow.calls == []  # nothing was read


def test_an_unknown_run_is_404_and_reads_nothing(served: tuple[httpx.Client, FakeFollow]) -> None:
    c, follow = served
    assert c.get("/runs/r-9/stream", headers={"Authorization": "Bearer a"}).status_code == 404
    assert follow.calls == []


@pytest.mark.parametrize("raw", ["-1", "1.5", "abc", "9" * 30])
def test_a_bad_last_event_id_is_named(raw: str) -> None:
    with pytest.raises(BadEventId):
        last_event_id(raw)
    assert last_event_id(None) is None and last_event_id(" 12 ") == 12
