"""A run's live stream: what the executor publishes on ``runs.stream`` as it happens.

The stream is a view for people and clients watching a run, never its truth (the journal
is): a generation's text and tool-call fragments the moment the provider sends them, a tool
call started and finished, and — once the batch that journals them has committed — the facts
a watcher waits for (a call proposed or refused, parked, resumed, ended). It is produced
outside the executor's transactions, best effort: an event the producer cannot take is
dropped and counted, and never holds a step back.

Every event names its run, era and slot (``call_seq``; -1 for an event of no call) and an
**attempt**: a stamp (ms) minted when the executor begins an attempt at the slot, strictly
increasing in this process. A live retry, or another executor retrying the call after this
one crashed, starts a new attempt, so a reader sees the restart and drops the fragments of the
attempt it supersedes. ``seq`` numbers an attempt's events from 0 (a gap is a lost event).

:class:`RunStreams` mints the events (pure but for the clock; ``publish`` is handed in);
:class:`KafkaPublish` is the producer behind it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaException, Producer

from runplane.config import Settings
from runplane.kafka.clients import producer_config
from runplane.providers import Delta
from runplane.wire import JournalKind, JournalRecord, Serde, StreamEvent, StreamKind

log = logging.getLogger(__name__)

TOPIC = "runs.stream"
NO_CALL = -1

Publish = Callable[[StreamEvent], None]

# The journaled facts a watcher waits for, by the record that journals them.
_ENDS = {
    JournalKind.RUN_COMPLETED: "completed",
    JournalKind.RUN_FAILED: "failed",
    JournalKind.RUN_CANCELLED: "cancelled",
    JournalKind.RUN_QUARANTINED: "quarantined",
}


class AttemptStream:
    """The events of one attempt at one slot (or of a run's facts outside any call)."""

    __slots__ = ("_publish", "_seq", "_wall_ms", "attempt", "call_seq", "era", "session_id")

    def __init__(
        self,
        publish: Publish,
        wall_ms: Callable[[], int],
        session_id: str,
        era: int,
        call_seq: int,
        attempt: int,
    ) -> None:
        self._publish = publish
        self._wall_ms = wall_ms
        self.session_id = session_id
        self.era = era
        self.call_seq = call_seq
        self.attempt = attempt
        self._seq = 0

    def emit(self, kind: StreamKind, payload: Mapping[str, Any]) -> None:
        event = StreamEvent(
            session_id=self.session_id,
            era=self.era,
            call_seq=self.call_seq,
            attempt=self.attempt,
            seq=self._seq,
            kind=kind,
            payload_json=json.dumps(payload, separators=(",", ":"), default=str),
            stamp_ms=self._wall_ms(),
        )
        self._seq += 1
        self._publish(event)

    def delta(self, delta: Delta) -> None:
        """A provider's fragment (the ``DeltaSink`` a streaming provider is handed)."""
        kind = StreamKind.TEXT_DELTA if delta.kind == "text" else StreamKind.TOOL_CALL_DELTA
        self.emit(kind, delta.to_json())


class RunStreams:
    """Mints the stream events of every run this executor serves."""

    def __init__(self, publish: Publish, wall_ms: Callable[[], int]) -> None:
        self._publish = publish
        self._wall_ms = wall_ms
        self._last_attempt = 0
        # A run's events of no call: one stream per run while it is served here.
        self._facts: dict[str, AttemptStream] = {}

    def _stamp(self) -> int:
        # Strictly increasing even within one millisecond: two attempts never share a stamp.
        self._last_attempt = max(self._wall_ms(), self._last_attempt + 1)
        return self._last_attempt

    def attempt(self, session_id: str, era: int, call_seq: int) -> AttemptStream:
        """A new attempt at the slot (era, call_seq)."""
        return AttemptStream(self._publish, self._wall_ms, session_id, era, call_seq, self._stamp())

    def facts(self, session_id: str, era: int) -> AttemptStream:
        """The stream of the run's events of no call (progress, parked, ended)."""
        stream = self._facts.get(session_id)
        if stream is None or stream.era != era:
            stream = self._facts[session_id] = AttemptStream(
                self._publish, self._wall_ms, session_id, era, NO_CALL, self._stamp()
            )
        return stream

    def journaled(self, session_id: str, records: Iterable[JournalRecord]) -> None:
        """The facts a step's committed records say, for a watcher: a gate's refusal, a
        park, a resume, the end."""
        for record in records:
            kind, payload = _fact(record)
            if kind is None:
                continue
            if kind is StreamKind.TOOL_CALL_REFUSED:
                self.attempt(session_id, record.era, record.call_seq or 0).emit(kind, payload)
                continue
            self.facts(session_id, record.era).emit(kind, payload)
            if kind is StreamKind.ENDED:
                self._facts.pop(session_id, None)


def _fact(record: JournalRecord) -> tuple[StreamKind | None, dict[str, Any]]:
    attrs = dict(record.attrs)
    if record.attrs.get("gate") == "refused":
        return StreamKind.TOOL_CALL_REFUSED, {"name": record.name, **attrs}
    if record.kind is JournalKind.RUN_PARKED:
        return StreamKind.PARKED, {"journal_seq": record.seq, **attrs}
    if record.kind is JournalKind.RUN_RESUMED:
        return StreamKind.RESUMED, {"journal_seq": record.seq, **attrs}
    if record.kind in _ENDS:
        return StreamKind.ENDED, {"status": _ENDS[record.kind], "journal_seq": record.seq}
    return None, {}


class KafkaPublish:
    """Produces stream events to ``runs.stream`` keyed by run, outside any transaction."""

    def __init__(self, settings: Settings, serde: Serde) -> None:
        # No linger: a fragment is worth most the moment it arrives.
        self._producer = Producer(producer_config(settings, **{"linger.ms": 0}))
        self._topic = settings.topic(TOPIC)
        self._serde = serde
        self.dropped = 0

    def __call__(self, event: StreamEvent) -> None:
        try:
            value = self._serde.encode(TOPIC, event)
            self._producer.produce(self._topic, value, event.session_id.encode("utf-8"))
            self._producer.poll(0)
        except (BufferError, KafkaException) as exc:
            # Best effort by design: the journal holds the truth; a watcher sees the gap.
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("stream event dropped (%d so far): %s", self.dropped, exc)

    def close(self, timeout_s: float = 5.0) -> None:
        self._producer.flush(timeout_s)
