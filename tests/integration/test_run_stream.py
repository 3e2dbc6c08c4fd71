"""A run's live stream on the real broker: a generation streamed from the fake model over HTTP,
published by the executor as it arrives, served as server-sent events by the journal API's
``GET /runs/{id}/stream`` — and a reconnect with ``Last-Event-ID`` mid-stream resumes with no
gap and no duplicate. ``Client.stream`` reads the same events."""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from executor_process_support import ExecutorProcess

from runplane.config import Settings
from runplane.core import AgentRegistry, Generation
from runplane.fakes import FakeOpenAIServer
from runplane.journal.summary import RunSummary
from runplane.runs.client import Client
from runplane.runs.stream import follow
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import JournalKind, RunStatus
from services.executor.settings import ExecutorSettings
from services.journal.api import build_api
from tests.helpers.harness import admit, chain_of, executor_thread, plain_producer, sessions
from tests.helpers.known_runs import KnownRuns
from tests.helpers.stream_agent import narrate
from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

AGENTS = AgentRegistry()
WORDS = " ".join(f"word{i}" for i in range(40))
READERS = Principals.from_data(
    [{"name": "ada", "token_sha256": token_digest("a"), "roles": [], "tenant": "acme"}]
)


AGENTS.agent("narrate", durability="replayable")(narrate)


@pytest.fixture
def api(settings: Settings) -> Iterator[tuple[httpx.Client, KnownRuns]]:
    index = KnownRuns()
    app = build_api(
        lambda: index,  # type: ignore[arg-type,return-value]
        None,  # type: ignore[arg-type]  (no journal reads here)
        READERS,
        ui=False,
        stream=functools.partial(follow, settings),
    )
    stop = threading.Event()
    with (
        run_http(app, "127.0.0.1", 0, stop) as server,
        httpx.Client(
            base_url=f"http://127.0.0.1:{server.port}",
            headers={"Authorization": "Bearer a"},
            timeout=60,
        ) as c,
    ):
        yield c, index
    stop.set()


def _sse(lines: Iterator[str]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """Server-sent events as (id, kind, data), comments skipped."""
    fields: dict[str, str] = {}
    for line in lines:
        if line.startswith(":"):
            continue
        if line:
            name, _, value = line.partition(": ")
            fields[name] = value
        elif fields:
            yield int(fields["id"]), fields["event"], json.loads(fields["data"])
            fields = {}


def _read(c: httpx.Client, run_id: str, last: int | None, stop_after: int | None) -> list[Any]:
    """SSE events (id, kind, data) until the server ends the stream, or ``stop_after``."""
    headers = {} if last is None else {"Last-Event-ID": str(last)}
    out: list[Any] = []
    with c.stream("GET", f"/runs/{run_id}/stream", headers=headers) as r:
        assert r.status_code == 200, r.read()
        for event in _sse(r.iter_lines()):
            out.append(event)
            if stop_after is not None and len(out) >= stop_after:
                break  # a watcher gone mid-stream
    return out


def test_a_streamed_generation_reaches_sse_clients_and_resumes_exactly(
    settings: Settings, api: tuple[httpx.Client, KnownRuns]
) -> None:
    c, index = api
    with FakeOpenAIServer(replies=[WORDS], chunk_delay_s=0.02) as model:
        own = ExecutorSettings(
            base=settings, openai_base_url=model.url, openai_model="m", agent_modules=()
        )
        with executor_thread(own, registry=AGENTS):
            [run] = admit(plain_producer(settings), settings, "narrate", [{}])
            index.runs[run.run_id] = RunSummary(
                run.run_id, status=RunStatus.RUNNING, started_ms=run.admitted_ms, tenant="acme"
            )
            first = _read(c, run.run_id, None, stop_after=6)  # mid-generation
            rest = _read(c, run.run_id, first[-1][0], None)
            wait_for(
                lambda: (
                    getattr(sessions(settings).get(run.run_id), "status", None)
                    is RunStatus.COMPLETED
                ),
                timeout_s=60,
                what="completion",
            )
        assert model.bodies[0]["stream"] is True
    whole = _read(c, run.run_id, None, None)  # the run is over: the stream is all there

    assert first + rest == whole  # no gap, no duplicate, same order
    ids = [i for i, _, _ in whole]
    assert ids == sorted(set(ids))
    kinds = [k for _, k, _ in whole]
    assert kinds[0] == "PROGRESS" and kinds[1] == "TURN_STARTED" and kinds[-1] == "ENDED"
    assert kinds[-2] == "PROGRESS" and whole[-2][2]["payload"] == {"message": "told", "words": 40}
    text = "".join(d["payload"]["text"] for _, k, d in whole if k == "TEXT_DELTA")
    assert text == WORDS and kinds.count("TEXT_DELTA") == 40  # word by word, as sent
    generation = [d for _, _, d in whole if d["call_seq"] >= 0]
    assert len({d["attempt"] for d in generation}) == 1
    assert [d["seq"] for d in generation] == list(range(len(generation)))
    output = json.loads(sessions(settings)[run.run_id].output_json or "null")
    assert output == {"text": WORDS}  # the journal's truth says what the stream showed

    async def by_client() -> list[Any]:
        with Client(settings) as client:
            return [item async for item in client.stream(run.run_id, after=first[2][0])]

    items = asyncio.run(by_client())
    assert [i.id for i in items] == ids[3:]
    assert [str(i.event.kind) for i in items] == kinds[3:]


def test_a_token_reaches_the_sse_client_soon_after_the_model_sent_it(
    settings: Settings, api: tuple[httpx.Client, KnownRuns]
) -> None:
    """A sanity bound, not a benchmark: at a 50 ms pace the text arrives spread out, not in one
    lump at the end of the generation."""
    c, index = api
    with FakeOpenAIServer(replies=[WORDS[:59]], chunk_delay_s=0.05) as model:
        own = ExecutorSettings(
            base=settings, openai_base_url=model.url, openai_model="m", agent_modules=()
        )
        with executor_thread(own, registry=AGENTS):
            [run] = admit(plain_producer(settings), settings, "narrate", [{}])
            index.runs[run.run_id] = RunSummary(
                run.run_id, status=RunStatus.RUNNING, started_ms=run.admitted_ms, tenant="acme"
            )
            seen: list[float] = []
            with c.stream("GET", f"/runs/{run.run_id}/stream") as r:
                for line in r.iter_lines():
                    if line.startswith("event: TEXT_DELTA"):
                        seen.append(time.monotonic())
    assert len(seen) == len(WORDS[:59].split())
    assert seen[-1] - seen[0] >= 0.5 * 0.05 * (len(seen) - 1)  # not held until the end


def test_an_executor_killed_mid_generation_shows_the_restart_then_the_whole_text(
    settings: Settings, api: tuple[httpx.Client, KnownRuns], tmp_path: Path
) -> None:
    """SIGKILL mid-generation: the stream shows the first attempt's partial text, then a new
    attempt at the same slot with the whole text, then the end; the journal records one
    generation, and a note made before the kill is not repeated by the rebuild."""
    c, index = api
    with FakeOpenAIServer(model=lambda m, t: Generation(text=WORDS), chunk_delay_s=0.05) as model:
        env = {
            "RUNPLANE_AGENT_MODULES": "tests.helpers.stream_served",
            "RUNPLANE_OPENAI_BASE_URL": model.url,
            "RUNPLANE_OPENAI_MODEL": "m",
            "RUNPLANE_TOOLS_CONFIG": None,
        }
        procs = [ExecutorProcess(settings, "s0", tmp_path, env)]
        try:
            [run] = admit(plain_producer(settings), settings, "narrate", [{}])
            index.runs[run.run_id] = RunSummary(
                run.run_id, status=RunStatus.RUNNING, started_ms=run.admitted_ms, tenant="acme"
            )
            seen: list[tuple[int, str, dict[str, Any]]] = []
            with c.stream("GET", f"/runs/{run.run_id}/stream") as r:
                for event in _sse(r.iter_lines()):
                    seen.append(event)
                    if len(procs) == 1 and sum(k == "TEXT_DELTA" for _, k, _ in seen) == 5:
                        procs[0].kill()  # mid-generation
                        procs[0].proc.wait(10)
                        procs.append(ExecutorProcess(settings, "s1", tmp_path, env))
            wait_for(
                lambda: (
                    getattr(sessions(settings).get(run.run_id), "status", None)
                    is RunStatus.COMPLETED
                ),
                timeout_s=90,
                what="completion by the second executor",
            )
        finally:
            for proc in procs:
                proc.stop()
        assert model.requests == 2  # asked again: the kill left the generation in doubt

    call = [(i, k, d) for i, k, d in seen if d["call_seq"] >= 0]
    attempts = sorted({d["attempt"] for _, _, d in call})
    assert len(attempts) == 2, attempts
    first = [(k, d) for _, k, d in call if d["attempt"] == attempts[0]]
    second = [(k, d) for _, k, d in call if d["attempt"] == attempts[1]]
    last_of_first = max(i for i, _, d in call if d["attempt"] == attempts[0])
    assert all(i > last_of_first for i, _, d in call if d["attempt"] == attempts[1])
    partial = "".join(d["payload"]["text"] for k, d in first if k == "TEXT_DELTA")
    assert first[0][0] == "TURN_STARTED" and 5 <= len(partial.split()) < 40
    assert WORDS.startswith(partial)
    assert second[0][0] == "TURN_STARTED" and [d["seq"] for _, d in second] == list(
        range(len(second))
    )
    assert "".join(d["payload"]["text"] for k, d in second if k == "TEXT_DELTA") == WORDS
    assert seen[-1][1] == "ENDED" and seen[-1][2]["payload"]["status"] == "completed"
    notes = [d["payload"]["message"] for _, k, d in seen if k == "PROGRESS"]
    assert notes == ["asking the model", "told"]  # the rebuild's replay repeated nothing
    records, _ = chain_of(settings, run.run_id)
    recorded = [
        r for r in records if r.kind is JournalKind.EFFECT_RECORDED and r.family == "generation"
    ]
    assert len(recorded) == 1
