"""Following a run's live stream (``runs.stream``), and writing it as server-sent events.

The stream is keyed by run, so one run's events are one partition's, in order; an event's
**id is its offset** in that partition. Resuming after the last event seen is then exact —
read from that offset + 1 and keep the run's events — whatever executor produced them and
however often they restarted (a per-run counter minted by producers could not survive a
crash without state; the offset can). Each event also carries its attempt and its ``seq``
within the attempt (``runplane.wire.StreamEvent``), so a reader sees a restart and a gap.

* :func:`follow` — the run's events from a position on, as an async iterator: ``after`` (an
  event id: resume after it), else ``since_ms`` (the first event at or after that instant),
  else the partition's retained beginning. It ends after the run's ``ENDED`` event, or —
  with ``to_end`` (a run already over) — at the partition's end.
* :func:`sse` — one event as a server-sent event (``id``, ``event`` = the kind, ``data`` =
  the JSON of :func:`event_json`); :func:`last_event_id` reads a ``Last-Event-ID`` header.
* :func:`sse_body` — a follower's items as the bytes of an event stream (keep-alive comments
  when idle, a failing follower ending the stream rather than the response), for every HTTP
  endpoint that serves a stream; :class:`Follow` is :func:`follow` with settings bound.

The journal service's ``GET /runs/{id}/stream`` (and the runs UI's live panel), the
worklist's live proposed calls and ``Client.stream`` are all this.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from runplane.config import Settings
from runplane.errors import RetryableError, RunplaneError, WireError
from runplane.kafka.clients import consumer_config
from runplane.kafka.partition import partition_for
from runplane.wire import StreamEvent, StreamKind, serde_for

log = logging.getLogger(__name__)

TOPIC = "runs.stream"
# An idle stream sends a comment this often, so proxies and browsers keep it open.
KEEP_ALIVE_S = 15.0
# What a server-sent event stream's response carries besides its type: no caching, and no
# buffering by a proxy (nginx honours X-Accel-Buffering), so a fragment leaves at once.
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class BadEventId(ValueError):
    """A ``Last-Event-ID`` that is not an event id of ours (a non-negative offset)."""


@dataclass(frozen=True)
class StreamItem:
    """One event of a run's stream and its id (its offset in the run's partition)."""

    id: int
    event: StreamEvent


def last_event_id(header: str | None) -> int | None:
    """The event id a ``Last-Event-ID`` header names (None: absent or empty)."""
    if header is None or not header.strip():
        return None
    raw = header.strip()
    if not raw.isdigit() or len(raw) > 19:
        raise BadEventId(f"Last-Event-ID must be an event id (a non-negative integer): {raw!r}")
    return int(raw)


def event_json(item: StreamItem) -> dict[str, Any]:
    """The event as JSON: its id, run, era, slot, attempt, seq, kind, payload and stamp."""
    e = item.event
    try:
        payload = json.loads(e.payload_json)
    except ValueError:
        payload = {"raw": e.payload_json}
    return {
        "id": item.id,
        "run_id": e.session_id,
        "era": e.era,
        "call_seq": e.call_seq,
        "attempt": e.attempt,
        "seq": e.seq,
        "kind": str(e.kind),
        "payload": payload,
        "stamp_ms": e.stamp_ms,
    }


def sse(item: StreamItem) -> bytes:
    """``item`` as one server-sent event."""
    data = json.dumps(event_json(item), separators=(",", ":"))
    return f"id: {item.id}\nevent: {item.event.kind}\ndata: {data}\n\n".encode()


class Follow(Protocol):
    """:func:`follow` with the deployment's settings bound (what a service is handed)."""

    def __call__(
        self,
        run_id: str,
        *,
        after: int | None,
        since_ms: int | None,
        to_end: bool,
        idle_s: float | None,
    ) -> AsyncGenerator[StreamItem | None]: ...


async def sse_body(
    events: AsyncGenerator[StreamItem | None],
    run_id: str,
    keep: Callable[[StreamItem], bool] | None = None,
) -> AsyncIterator[bytes]:
    """The follower's items as server-sent events, ``None`` as a keep-alive comment; with
    ``keep``, only the events it keeps. A follower that fails once the head is sent ends the
    stream (the client reconnects with ``Last-Event-ID``); a watcher gone closes the follower
    at once, so its reader thread stops."""
    try:
        async for item in events:
            if item is None:
                yield b": keep-alive\n\n"
            elif keep is None or keep(item):
                yield sse(item)
    except (RunplaneError, KafkaException) as exc:
        log.warning("run stream %s ended early: %s", run_id, exc)
    finally:
        await events.aclose()


class _Reader:
    """The run's partition of ``runs.stream``, read from a position (blocking; one thread)."""

    def __init__(
        self, settings: Settings, run_id: str, after: int | None, since_ms: int | None
    ) -> None:
        self._run_id = run_id
        self._key = run_id.encode("utf-8")
        self._serde = serde_for(settings)
        self._topic = settings.topic(TOPIC)
        self._consumer = Consumer(
            consumer_config(
                settings,
                f"runplane-reader-{uuid.uuid4().hex[:12]}",  # assign() only, never commits
                **{"enable.partition.eof": True, "fetch.wait.max.ms": 10},
            )
        )
        self.at_end = False
        try:
            self._partition = partition_for(run_id, self._partitions())
            start = OFFSET_BEGINNING if after is None else after + 1
            if after is None and since_ms is not None:
                found = self._consumer.offsets_for_times(
                    [TopicPartition(self._topic, self._partition, since_ms)], timeout=10
                )
                if found and found[0].offset >= 0:
                    start = found[0].offset
            self._consumer.assign([TopicPartition(self._topic, self._partition, start)])
        except BaseException:
            self._consumer.close()
            raise

    def _partitions(self, wait_s: float = 10.0) -> int:
        # A topic created a moment ago may not be in the metadata yet: ask again briefly.
        deadline = time.monotonic() + wait_s
        while True:
            meta = self._consumer.list_topics(self._topic, timeout=wait_s).topics.get(self._topic)
            if meta is not None and meta.error is None and meta.partitions:
                return len(meta.partitions)
            if time.monotonic() > deadline:
                raise RetryableError(f"topic {self._topic} is not available", retry_after=1.0)
            time.sleep(0.1)

    def poll(self, timeout_s: float) -> list[StreamItem]:
        out: list[StreamItem] = []
        # poll, not consume(n, timeout): consume waits for n messages or the timeout, and a
        # fragment must go out the moment it arrives.
        first = self._consumer.poll(timeout_s)
        if first is None:
            return out
        for msg in [first, *self._consumer.consume(num_messages=500, timeout=0)]:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self.at_end = True
                elif err.fatal():
                    raise KafkaException(err)
                continue
            self.at_end = False
            if msg.key() != self._key:
                continue  # another run on the same partition
            value = msg.value()
            try:
                event = self._serde.decode(TOPIC, value if isinstance(value, bytes) else b"")
            except WireError as exc:
                log.warning("undecodable stream event at offset %s: %s", msg.offset(), exc)
                continue
            if isinstance(event, StreamEvent):
                out.append(StreamItem(int(msg.offset() or 0), event))
        return out

    def close(self) -> None:
        self._consumer.close()


def _read(
    open_reader: Callable[[Settings, str, int | None, int | None], _Reader],
    args: tuple[Settings, str, int | None, int | None],
    to_end: bool,
    stop: threading.Event,
    put: Callable[[list[StreamItem] | BaseException | None], None],
) -> None:
    """A follower's thread: batches of events to ``put``, then ``None`` (done) or the error."""
    try:
        reader = open_reader(*args)
    except BaseException as exc:
        put(exc)
        return
    try:
        while not stop.is_set():
            items = reader.poll(0.05)
            if items:
                put(items)
            elif to_end and reader.at_end:
                break
    except BaseException as exc:
        put(exc)
        return
    finally:
        reader.close()
    put(None)


async def follow(
    settings: Settings,
    run_id: str,
    *,
    after: int | None = None,
    since_ms: int | None = None,
    to_end: bool = False,
    idle_s: float | None = None,
) -> AsyncGenerator[StreamItem | None]:
    """The run's stream events from ``after`` (or ``since_ms``) on, until its ``ENDED``
    event (with ``to_end``: until the partition's end). With ``idle_s``, ``None`` is yielded
    after each ``idle_s`` without an event (time for a keep-alive).

    Each follower reads on a thread of its own (a blocking consumer), never the event loop's
    default executor, which a few hundred watchers would exhaust."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[list[StreamItem] | BaseException | None] = asyncio.Queue()
    stop = threading.Event()

    def put(got: list[StreamItem] | BaseException | None) -> None:
        if stop.is_set():
            return  # the follower is gone: nobody to hand it to
        with contextlib.suppress(RuntimeError):  # its event loop closed meanwhile
            loop.call_soon_threadsafe(queue.put_nowait, got)

    def read() -> None:
        _read(_Reader, (settings, run_id, after, since_ms), to_end, stop, put)

    thread = threading.Thread(target=read, name=f"stream-{run_id[:32]}", daemon=True)
    thread.start()
    try:
        while True:
            try:
                got = await asyncio.wait_for(queue.get(), idle_s)
            except TimeoutError:
                yield None
                continue
            if got is None:
                return
            if isinstance(got, BaseException):
                raise got
            for item in got:
                yield item
                if item.event.kind is StreamKind.ENDED:
                    return
    finally:
        stop.set()
