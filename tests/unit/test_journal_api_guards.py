"""The journal API's guards, over an in-memory index and reader (no Kafka, no Redis).

Every run endpoint needs a principal (401), bodies need an auditor (403), a run the index does
not know is 404 without reading Kafka, a read starts at the run's indexed start, and at most
``max_scans`` reads run at once (503 + Retry-After beyond). The real-broker behaviour of the
same endpoints is ``tests/integration/test_journal_api.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from runplane.journal.index import RunFilter
from runplane.journal.summary import RunSummary
from runplane.runs.read import RunHistory
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import CaseRecord, RunStatus
from services.journal.api import build_api
from services.journal.runs import SCAN_MARGIN_MS
from tests.helpers.sample import sample_run

pytestmark = pytest.mark.unit

READERS = Principals.from_data(
    [
        {"name": "ada", "token_sha256": token_digest("ada-token"), "roles": ["auditor"]},
        {"name": "bob", "token_sha256": token_digest("bob-token"), "roles": []},
    ]
)
ADA = {"Authorization": "Bearer ada-token"}
BOB = {"Authorization": "Bearer bob-token"}
START = 1_700_000_000_000


class FakeIndex:
    def __init__(self, runs: dict[str, RunSummary]) -> None:
        self.runs = runs

    def get(self, run_id: str) -> RunSummary | None:
        return self.runs.get(run_id)

    def list(self, f: RunFilter) -> list[RunSummary]:
        return [s for s in self.runs.values() if f.matches(s)][: f.limit]


class FakeReader:
    """Serves the sample run; records every read; ``gate`` (when set) holds reads open."""

    def __init__(self) -> None:
        self.reads: list[tuple[str, bool, int | None]] = []
        self.gate: threading.Event | None = None
        self.entered = threading.Semaphore(0)
        records, results = sample_run("r-1", calls=2, start_ms=START)
        self.run = RunHistory("r-1", 0, tuple(records), dict(results))

    def history(self, run_id: str, *, bodies: bool, since_ms: int | None = None) -> RunHistory:
        self.reads.append((run_id, bodies, since_ms))
        self.entered.release()
        if self.gate is not None:
            self.gate.wait(10)
        return self.run if run_id == "r-1" else RunHistory(run_id, 0, ())

    def case(self, case_id: str) -> CaseRecord | None:
        return None


@pytest.fixture
def reader() -> FakeReader:
    return FakeReader()


def _summary() -> RunSummary:
    return RunSummary("r-1", status=RunStatus.COMPLETED, capability="refund", started_ms=START)


def _serve(reader: FakeReader, max_scans: int = 4) -> Iterator[httpx.Client]:
    index = FakeIndex({"r-1": _summary()})
    app = build_api(lambda: index, reader, READERS, max_scans=max_scans)  # type: ignore[arg-type,return-value]
    stop = threading.Event()
    with (
        run_http(app, "127.0.0.1", 0, stop) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=20) as c,
    ):
        yield c
    stop.set()


@pytest.fixture
def api(reader: FakeReader) -> Iterator[httpx.Client]:
    yield from _serve(reader)


PATHS = ["/runs", "/runs/r-1", "/runs/r-1/journal", "/runs/r-1/verify"]


@pytest.mark.parametrize("path", PATHS)
def test_every_run_endpoint_needs_a_principal(
    api: httpx.Client, reader: FakeReader, path: str
) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic ada-token"}):
        r = api.get(path, headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", r.text
    assert reader.reads == []  # refused before any Kafka read
    assert api.get(path, headers=BOB).status_code == 200  # any role will do


def test_bodies_need_an_auditor(api: httpx.Client) -> None:
    path = "/runs/r-1/journal"
    assert api.get(path, params={"bodies": True}).status_code == 401
    bob = api.get(path, params={"bodies": True}, headers=BOB)
    assert bob.status_code == 403 and "auditor" in bob.json()["detail"]
    full = api.get(path, params={"bodies": True}, headers=ADA)
    assert full.status_code == 200 and full.json()["bodies"]["0/1"] is not None
    assert api.get(path, headers=BOB).json()["bodies"] is None


@pytest.mark.parametrize(
    "path", ["/runs/r-unknown", "/runs/r-unknown/journal", "/runs/r-unknown/verify"]
)
def test_an_id_the_index_does_not_know_is_404_without_reading_kafka(
    api: httpx.Client, reader: FakeReader, path: str
) -> None:
    r = api.get(path, headers=BOB)
    assert r.status_code == 404 and "r-unknown" in r.json()["detail"]
    assert reader.reads == []


def test_reads_start_at_the_runs_indexed_start(api: httpx.Client, reader: FakeReader) -> None:
    assert api.get("/runs/r-1/journal", headers=BOB).status_code == 200
    v = api.get("/runs/r-1/verify", headers=BOB)
    assert v.status_code == 200 and v.json()["verified"] is True
    assert v.json()["service_verdict"] == "VERIFIED"
    since = START - SCAN_MARGIN_MS
    assert reader.reads == [("r-1", False, since), ("r-1", True, since)]


def test_concurrent_reads_beyond_the_bound_are_503_with_retry_after(reader: FakeReader) -> None:
    reader.gate = threading.Event()
    held: list[int] = []
    for api in _serve(reader, max_scans=1):

        def first(c: httpx.Client = api) -> None:
            held.append(c.get("/runs/r-1/journal", headers=BOB).status_code)

        t = threading.Thread(target=first)
        t.start()
        assert reader.entered.acquire(timeout=10)  # the first read is inside the reader
        busy = api.get("/runs/r-1/verify", headers=BOB)
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
        assert "try again" in busy.json()["detail"]
        assert api.get("/runs/r-1", headers=BOB).status_code == 200  # index reads are not bounded
        reader.gate.set()
        t.join(10)
        assert held == [200]
        # The slot came back: the next read goes through.
        assert api.get("/runs/r-1/verify", headers=BOB).status_code == 200
