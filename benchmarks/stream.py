"""Live streams on the real broker: how soon a token reaches a watcher, and what streaming costs.

    python -m benchmarks.stream        # needs the local stack (`runplane up` / `make up`)

One executor (a thread of this process) runs ``narrate`` (``tests.helpers.stream_agent``: a
progress note, one generation from the fake OpenAI-compatible model over HTTP, a note) and the
journal API's ``GET /runs/{id}/stream`` (in this process too) serves the runs' streams.

1. **Token latency.** The fake model streams ``TOKENS`` tokens, one every ``PACE_S``, each
   token's text the wall clock (ns) at the moment the fake writes it to the socket. An SSE
   client reading the run's stream takes, for every ``TEXT_DELTA``, now minus that stamp: the
   whole path — fake → provider → executor → ``runs.stream`` → the journal API's follower →
   the SSE client. p50 / p99 over ``LATENCY_RUNS`` runs one at a time.
2. **200 runs streaming at once**, each watched by its own SSE client from before it starts:
   per client, events lost (a gap in an attempt's ``seq``) and duplicated (an event id or an
   ``(attempt, seq)`` seen twice), and whether each text arrived whole and the stream ended.
3. **Step throughput, streamed vs not.** ``THROUGHPUT_RUNS`` runs against an instant model
   (no pace: the executor is the bottleneck), admitted in one burst, runs/s from the first
   admission to the last completion, with ``RUNPLANE_EXECUTOR_STREAM`` on and off, in the same
   process one after the other (best of ``REPEAT`` each), and their ratio. No watcher is
   attached here: a watcher costs the journal service, which runs elsewhere in a deployment.

The machine is shared by everything above (broker, executor, API, clients): numbers, never
an assertion.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import statistics
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from benchmarks.executor import CompletionWatch, _percentiles, scratch_topics
from runplane.config import Settings
from runplane.core import AgentRegistry
from runplane.fakes import FakeOpenAIServer
from runplane.fakes._http import Request, Response
from runplane.journal.summary import RunSummary
from runplane.runs.stream import follow
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import RunStatus
from services.executor.settings import ExecutorSettings
from services.journal.api import build_api
from tests.helpers.harness import admit, executor_thread, plain_producer
from tests.helpers.known_runs import KnownRuns
from tests.helpers.stream_agent import narrate

TOKENS = 40
PACE_S = 0.02
LATENCY_RUNS = 5
WATCHED = 200
WATCHED_TOKENS = 20
WATCHED_PACE_S = 0.05
THROUGHPUT_RUNS = 300
REPEAT = 2
STAMP = "@@STAMP@@"  # replaced by the send time (ns) as the fake writes the event

AGENTS = AgentRegistry()
AGENTS.agent("narrate", durability="replayable")(narrate)
READERS = Principals.from_data(
    [{"name": "bench", "token_sha256": token_digest("b"), "roles": [], "tenant": "acme"}]
)


class _Stamped:
    """A streamed reply's events, paced here instead of by the server (``pace_s`` 0), each
    stamped with the wall clock as it is handed to the socket write."""

    def __init__(self, events: Iterable[bytes], pace_s: float) -> None:
        self._events = tuple(events)
        self._pace_s = pace_s

    def __iter__(self) -> Iterator[bytes]:
        pause = threading.Event()
        for i, event in enumerate(self._events):
            if i and self._pace_s > 0:
                pause.wait(self._pace_s)
            yield event.replace(STAMP.encode(), str(time.time_ns()).encode())


class StampingModel(FakeOpenAIServer):
    """The fake OpenAI-compatible model whose every token is its own send time."""

    def _route(self, req: Request) -> Response:
        response = super()._route(req)
        if response.events is None:
            return response
        stamped: Any = _Stamped(response.events, response.pace_s)
        return replace(response, events=stamped, pace_s=0.0)


@dataclass
class Watched:
    """What one SSE client saw of its run."""

    ids: list[int] = field(default_factory=list)
    slots: list[tuple[int, int]] = field(default_factory=list)  # (attempt, seq) per event
    text: str = ""
    ended: bool = False
    latencies_ms: list[float] = field(default_factory=list)

    def lost(self) -> int:
        by_attempt: dict[int, list[int]] = {}
        for attempt, seq in self.slots:
            by_attempt.setdefault(attempt, []).append(seq)
        return sum(max(s) + 1 - len(set(s)) for s in by_attempt.values())

    def duplicated(self) -> int:
        return (len(self.ids) - len(set(self.ids))) + (len(self.slots) - len(set(self.slots)))


async def _watch(client: httpx.AsyncClient, run_id: str, out: Watched) -> None:
    fields: dict[str, str] = {}
    async with client.stream("GET", f"/runs/{run_id}/stream") as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            if not fields:
                continue
            data = json.loads(fields["data"])
            fields = {}
            out.ids.append(int(data["id"]))
            out.slots.append((int(data["attempt"]), int(data["seq"])))
            if data["kind"] == "TEXT_DELTA":
                piece = str(data["payload"].get("text", ""))
                out.text += piece
                stamp = piece.strip()
                if stamp.isdigit():
                    out.latencies_ms.append((time.time_ns() - int(stamp)) / 1e6)
            elif data["kind"] == "ENDED":
                out.ended = True


@contextlib.contextmanager
def _served(settings: Settings) -> Iterator[tuple[str, KnownRuns]]:
    """The journal API's stream endpoint over ``settings``' topics, on a free port."""
    index = KnownRuns()
    app = build_api(
        lambda: index,  # type: ignore[arg-type,return-value]
        None,  # type: ignore[arg-type]
        READERS,
        ui=False,
        stream=functools.partial(follow, settings),
    )
    stop = threading.Event()
    with run_http(app, "127.0.0.1", 0, stop) as server:
        yield f"http://127.0.0.1:{server.port}", index
    stop.set()


def _executor(settings: Settings, model_url: str, *, stream: bool) -> ExecutorSettings:
    return ExecutorSettings(
        base=settings,
        openai_base_url=model_url,
        openai_model="m",
        agent_modules=(),
        stream=stream,
    )


async def _watched_runs(
    settings: Settings, base: str, index: KnownRuns, n: int, timeout_s: float
) -> list[Watched]:
    """Admit ``n`` runs at once and read each one's stream to its end, one client each."""
    limits = httpx.Limits(max_connections=n + 8, max_keepalive_connections=n + 8)
    async with httpx.AsyncClient(
        base_url=base, headers={"Authorization": "Bearer b"}, timeout=timeout_s, limits=limits
    ) as client:
        runs = admit(plain_producer(settings), settings, "narrate", [{}] * n)
        for run in runs:
            index.runs[run.run_id] = RunSummary(
                run.run_id, status=RunStatus.RUNNING, started_ms=run.admitted_ms, tenant="acme"
            )
        seen = [Watched() for _ in runs]
        await asyncio.wait_for(
            asyncio.gather(*(_watch(client, r.run_id, w) for r, w in zip(runs, seen, strict=True))),
            timeout_s,
        )
    return seen


def _latency(settings: Settings) -> dict[str, Any]:
    words = " ".join([STAMP] * TOKENS)
    # delay_s: the model answers after the client is surely connected, so no token is read
    # back from the topic's past instead of live.
    with (
        StampingModel(replies=[words] * LATENCY_RUNS, chunk_delay_s=PACE_S, delay_s=0.3) as model,
        _served(settings) as (base, index),
        executor_thread(_executor(settings, model.url, stream=True), registry=AGENTS),
    ):
        latencies: list[float] = []
        for _ in range(LATENCY_RUNS):
            [seen] = asyncio.run(_watched_runs(settings, base, index, 1, 60))
            latencies.extend(seen.latencies_ms)
    return {
        "tokens": len(latencies),
        "pace_ms": PACE_S * 1000,
        **_percentiles(latencies),
        "max_ms": round(max(latencies), 1) if latencies else None,
    }


def _many(settings: Settings) -> dict[str, Any]:
    words = " ".join(f"w{i}" for i in range(WATCHED_TOKENS))
    with (
        FakeOpenAIServer(replies=[words] * WATCHED, chunk_delay_s=WATCHED_PACE_S) as model,
        _served(settings) as (base, index),
        executor_thread(_executor(settings, model.url, stream=True), registry=AGENTS),
    ):
        began = time.monotonic()
        seen = asyncio.run(_watched_runs(settings, base, index, WATCHED, 300))
        elapsed = time.monotonic() - began
    return {
        "runs": WATCHED,
        "clients": len(seen),
        "events_per_client": statistics.median(len(w.ids) for w in seen),
        "clients_with_lost_events": sum(w.lost() > 0 for w in seen),
        "events_lost": sum(w.lost() for w in seen),
        "clients_with_duplicates": sum(w.duplicated() > 0 for w in seen),
        "events_duplicated": sum(w.duplicated() for w in seen),
        "texts_whole": sum(w.text == words for w in seen),
        "streams_ended": sum(w.ended for w in seen),
        "wall_s": round(elapsed, 1),
    }


def _throughput(settings: Settings, *, stream: bool) -> float:
    """Runs/s of a burst against an instant model, first admission to last completion."""
    with (
        scratch_topics(settings) as own,
        FakeOpenAIServer(replies=["one two three four five"] * THROUGHPUT_RUNS) as model,
        executor_thread(_executor(own, model.url, stream=stream), registry=AGENTS),
    ):
        watch = CompletionWatch(own)
        try:
            runs = admit(plain_producer(own), own, "narrate", [{}] * THROUGHPUT_RUNS)
            watch.wait({r.run_id for r in runs}, 300)
            first = min(r.admitted_ms for r in runs) / 1000
            last = max(watch.done[r.run_id] for r in runs)
        finally:
            watch.close()
    return THROUGHPUT_RUNS / (last - first)


def run(settings: Settings | None = None) -> dict[str, Any]:
    settings = settings or Settings.from_env()
    with scratch_topics(settings) as own:
        latency = _latency(own)
    with scratch_topics(settings) as own:
        many = _many(own)
    streamed = max(_throughput(settings, stream=True) for _ in range(REPEAT))
    plain = max(_throughput(settings, stream=False) for _ in range(REPEAT))
    return {
        "token_to_sse_client": latency,
        "watched_at_once": many,
        "throughput": {
            "runs": THROUGHPUT_RUNS,
            "streamed_runs_per_s": round(streamed, 1),
            "unstreamed_runs_per_s": round(plain, 1),
            "ratio_streamed_to_unstreamed": round(streamed / plain, 3),
        },
    }


def main() -> None:
    print(json.dumps(run(), indent=2))


if __name__ == "__main__":
    main()
