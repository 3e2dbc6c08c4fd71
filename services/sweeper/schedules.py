"""The sweeper fires schedules: reads ``schedules``, sends each due tick to ``admission``, and
records how far it got on ``schedules.fired``. What to send is :mod:`runplane.core.schedules`.

**Who fires what.** ``schedules`` and ``schedules.fired`` are keyed ``tenant/name`` and
co-partitioned with ``cases`` (every topic has the same partition count): the sweeper that
owns partition *p* of ``cases`` fires the schedules of partition *p*, and is the single writer
of their ``schedules.fired`` records. Operators (``runplane schedules``) are the writers of
``schedules``; the sweeper never writes it.

**Why a tick cannot run twice, or be missed.** Each sweep, per schedule: the ticks due after
its recorded ``through_ms`` are sent to ``admission`` and their delivery awaited, *then* the
new ``through_ms`` is written and its delivery awaited. A sweeper killed in between sends the
same ticks again after its restart — the same admission keys, derived from (tenant, name,
tick) alone, byte-identical requests — and admission answers them DUPLICATE. A tick is only
ever passed over by the catch-up rule (``skip`` beyond the grace, ``once``, ``each`` beyond
its max), and those are counted (``skipped``). Two sweepers during a rebalance send the same
keys; :func:`runplane.core.schedules.newest` keeps the further record.

**Refused ticks are visible.** The sweeper reads ``admission.replies`` (every partition: a
reply lands on its admission key's partition, not its schedule's) and records, for the
schedules it owns, each tick's answer on ``schedules.fired`` (``last_outcome``, ``refused``,
``last_refusal``); a refusal is also written to ``deadletter`` with admission's reason. After
a restart, or when it takes over a partition, the replies are read again from the oldest
unanswered tick's record time on.

**Reading.** Both tables are read on from where the last sweep stopped (:class:`TableTail`),
under ``read_committed``, to the end each sweep, so an operator's pause is seen within a
sweep. A read that cannot finish in time skips schedules for this sweep (logged); cases are
swept regardless.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from aiokafka.errors import KafkaError as AioKafkaError
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from runplane.config import Settings
from runplane.core.schedules import (
    ScheduleError,
    answered,
    newest,
    parse_tick_key,
    plan,
    schedule_key,
)
from runplane.errors import RetryableError, RunplaneError, WireError
from runplane.kafka.clients import consumer_config
from runplane.kafka.partition import partition_for
from runplane.signing.admission import Headers
from runplane.wire import (
    AdmissionReply,
    AdmissionRequest,
    DeadLetter,
    Record,
    Schedule,
    ScheduleFired,
    Serde,
)
from services.sweeper import metrics
from services.sweeper.faust_app import SweeperApp
from services.sweeper.settings import SweeperSettings
from services.sweeper.topology import (
    ADMISSION,
    DEADLETTER,
    REPLIES,
    SCHEDULES,
    SCHEDULES_FIRED,
    SERVICE,
)

__all__ = ["ScheduleFiring", "TableTail"]

log = logging.getLogger(__name__)

V = TypeVar("V", bound=Record)

READ_TIMEOUT_S = 10.0
SEND_TIMEOUT_S = 10.0
# Replies are read from this long before the oldest unanswered tick was recorded.
REPLY_LOOKBACK_MS = 60_000


@dataclass
class TableTail(Generic[V]):
    """The last committed record per key of some partitions of one compacted topic, read on
    from where the previous read ended (a tombstone deletes the key; an unreadable record
    too, as :mod:`runplane.kafka.restore` does). Blocking: call it off the event loop."""

    settings: Settings
    logical: str
    kind: type[V]
    serde: Serde
    rows: dict[int, dict[str, V]] = field(default_factory=dict)
    _next: dict[int, int] = field(default_factory=dict)
    _consumer: Consumer | None = None

    def read(self, partitions: Iterable[int], timeout_s: float = READ_TIMEOUT_S) -> dict[str, V]:
        wanted = sorted(set(partitions))
        for p in list(self.rows):
            if p not in wanted:  # moved away: read from the beginning if it comes back
                del self.rows[p]
                self._next.pop(p, None)
        if not wanted:
            return {}
        topic = self.settings.topic(self.logical)
        consumer = self._open()
        consumer.assign(
            [TopicPartition(topic, p, self._next.get(p, OFFSET_BEGINNING)) for p in wanted]
        )
        pending = set(wanted)
        deadline = time.monotonic() + timeout_s
        try:
            while pending:
                if time.monotonic() > deadline:
                    raise RetryableError(f"{topic}: no end of {sorted(pending)} within the timeout")
                for msg in consumer.consume(num_messages=1000, timeout=0.2):
                    p = msg.partition() or 0
                    if self._ended(topic, msg.error()):
                        pending.discard(p)
                    elif msg.error() is None:
                        self._next[p] = (msg.offset() or 0) + 1
                        self._apply(p, msg.key(), msg.value())
        finally:
            consumer.unassign()
        out: dict[str, V] = {}
        for p in wanted:
            out.update(self.rows.get(p, {}))
        return out

    def _open(self) -> Consumer:
        if self._consumer is None:
            group = f"{self.settings.topic_prefix}sweeper-committed-{self.logical}-"
            self._consumer = Consumer(
                consumer_config(
                    self.settings,
                    group + uuid.uuid4().hex[:12],
                    **{"enable.partition.eof": True, "fetch.wait.max.ms": 50},
                )
            )
        return self._consumer

    @staticmethod
    def _ended(topic: str, err: KafkaError | None) -> bool:
        """Whether ``err`` is a partition's end; raises for the errors that do not pass."""
        if err is None:
            return False
        if err.code() == KafkaError._PARTITION_EOF:
            return True
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            # Not a wait: an older deployment's topics (runplane topics create).
            raise RetryableError(f"{topic} does not exist", retry_after=60.0)
        if err.fatal():
            raise KafkaException(err)
        return False

    def _apply(self, p: int, raw_key: object, value: object) -> None:
        rows = self.rows.setdefault(p, {})
        if not isinstance(raw_key, bytes):
            return
        key = raw_key.decode("utf-8", "replace")
        if not isinstance(value, bytes):
            rows.pop(key, None)  # a tombstone
            return
        try:
            record = self.serde.decode(self.logical, value)
        except WireError as exc:
            rows.pop(key, None)
            log.warning("unreadable %s record %r dropped: %s", self.logical, key, exc)
            return
        if isinstance(record, self.kind):
            rows[key] = record

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


@dataclass(frozen=True)
class _Reply:
    partition: int
    offset: int
    key: bytes
    value: bytes
    reply: AdmissionReply


class _Replies:
    """Every partition of ``admission.replies``, from an instant on; each poll returns what
    arrived since the last (only tick replies). Blocking: call it off the event loop."""

    def __init__(self, settings: Settings, serde: Serde) -> None:
        self._s = settings
        self._serde = serde
        self._consumer: Consumer | None = None
        self.from_ms: int | None = None

    def start(self, from_ms: int) -> None:
        self.close()
        topic = self._s.topic(REPLIES)
        consumer = Consumer(
            consumer_config(
                self._s, f"{self._s.topic_prefix}sweeper-committed-replies-{uuid.uuid4().hex[:12]}"
            )
        )
        wanted = [TopicPartition(topic, p, from_ms) for p in range(self._s.partitions)]
        found = consumer.offsets_for_times(wanted, timeout=READ_TIMEOUT_S)
        # No record at or after from_ms: start at the end (-1 means "none").
        consumer.assign(
            [
                TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END)
                for tp in found
            ]
        )
        self._consumer = consumer
        self.from_ms = from_ms

    def poll(self) -> list[_Reply]:
        assert self._consumer is not None
        out: list[_Reply] = []
        for msg in self._consumer.consume(num_messages=1000, timeout=0.05):
            err = msg.error()
            key, value = msg.key(), msg.value()
            if err is not None:
                if err.fatal():
                    raise KafkaException(err)
                continue
            if not isinstance(key, bytes) or not isinstance(value, bytes):
                continue
            if parse_tick_key(key.decode("utf-8", "replace")) is None:
                continue  # not a schedule's tick: most replies
            try:
                reply = self._serde.decode(REPLIES, value)
            except WireError:
                continue  # admission's own record: not ours to dead-letter
            if isinstance(reply, AdmissionReply):
                out.append(_Reply(msg.partition() or 0, msg.offset() or 0, key, value, reply))
        return out

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class ScheduleFiring:
    """The schedule half of a sweep (the module docstring). One per :class:`Sweeper`."""

    def __init__(self, settings: SweeperSettings, serde: Serde) -> None:
        self._s = settings
        self._serde = serde
        base = settings.base
        self._schedules: TableTail[Schedule] = TableTail(base, SCHEDULES, Schedule, serde)
        self._fired: TableTail[ScheduleFired] = TableTail(
            base, SCHEDULES_FIRED, ScheduleFired, serde
        )
        self._replies = _Replies(base, serde)
        # What this instance wrote last, per schedule: ahead of what it reads back until the
        # broker has it (and kept against a stale record another sweeper wrote meanwhile).
        self._wrote: dict[str, ScheduleFired] = {}

    def close(self) -> None:
        self._schedules.close()
        self._fired.close()
        self._replies.close()

    async def sweep(self, app: SweeperApp, partitions: list[int], now_ms: int) -> int:
        """Fire what is due on ``partitions``; returns how many tick requests were sent."""
        if not partitions:
            return 0
        try:
            defs, states = await asyncio.to_thread(self._read, partitions, now_ms)
            replies = await asyncio.to_thread(self._replies.poll)
        except (RetryableError, KafkaException) as exc:
            log.warning("schedules not read this sweep: %s", exc)
            return 0
        owned = set(partitions)
        changed: dict[str, ScheduleFired | None] = {}
        for r in replies:
            await self._take_reply(app, r, owned, states, changed, now_ms)
        sent = 0
        for key, schedule in sorted(defs.items()):
            try:
                firing = plan(schedule, states.get(key), now_ms, grace_ms=self._s.schedule_grace_ms)
            except ScheduleError as exc:
                log.warning("schedule %s cannot fire: %s", key, exc)
                continue
            if firing.requests and not await self._send_ticks(app, firing.requests):
                continue  # not delivered: through_ms stays, the next sweep sends them again
            sent += len(firing.requests)
            metrics.SCHEDULE_TICKS.inc(len(firing.requests))
            if firing.fired is not None:
                states[key] = firing.fired
                changed[key] = firing.fired
        for key in sorted(set(states) - set(defs)):
            changed[key] = None  # the schedule was deleted: so is its progress
            states.pop(key)
        if changed:
            await self._record(app, changed)
        return sent

    def _read(
        self, partitions: list[int], now_ms: int
    ) -> tuple[dict[str, Schedule], dict[str, ScheduleFired]]:
        defs = self._schedules.read(partitions)
        read = self._fired.read(partitions)
        states: dict[str, ScheduleFired] = {}
        for key in set(read) | {k for k in self._wrote if self._owned(k, partitions)}:
            state = newest(read.get(key), self._wrote.get(key))
            if state is not None:
                states[key] = state
        unanswered = [
            s.updated_ms
            for s in states.values()
            if s.last_tick_ms is not None
            and (s.last_outcome_tick_ms is None or s.last_outcome_tick_ms < s.last_tick_ms)
        ]
        start = min(unanswered, default=now_ms) - REPLY_LOOKBACK_MS
        # First sweep, or a partition just taken over with a tick unanswered from before where
        # the replies are read from: (re)read them from there (an answer read twice is a no-op).
        if self._replies.from_ms is None or start < self._replies.from_ms:
            self._replies.start(start)
        return defs, states

    def _owned(self, key: str, partitions: list[int]) -> bool:
        return partition_for(key, self._s.base.partitions) in partitions

    async def _take_reply(
        self,
        app: SweeperApp,
        r: _Reply,
        owned: set[int],
        states: dict[str, ScheduleFired],
        changed: dict[str, ScheduleFired | None],
        now_ms: int,
    ) -> None:
        parsed = parse_tick_key(r.key.decode("utf-8", "replace"))
        assert parsed is not None  # _Replies keeps tick replies only
        tenant, name, tick = parsed
        key = schedule_key(tenant, name)
        state = states.get(key)
        if state is None or partition_for(key, self._s.base.partitions) not in owned:
            return  # another sweeper's schedule, or one that is gone
        after = answered(state, tick, r.reply, now_ms)
        if after is None:
            return
        states[key] = changed[key] = after
        if after.refused > state.refused:
            metrics.SCHEDULE_REFUSED.inc()
            log.warning(
                "schedule tick refused by admission",
                extra={"schedule": key, "tick_ms": tick, "reason": r.reply.reason},
            )
            letter = DeadLetter(
                source_topic=self._s.base.topic(REPLIES),
                partition=r.partition,
                offset=r.offset,
                service=SERVICE,
                reason=f"schedule {key} tick {tick} refused: {r.reply.reason or 'no reason'}",
                key=r.key,
                value=r.value,
                at_ms=now_ms,
            )
            await self._send(app, DEADLETTER, [(r.key, self._serde.encode(DEADLETTER, letter))])

    async def _send_ticks(self, app: SweeperApp, requests: Iterable[AdmissionRequest]) -> bool:
        batch: list[tuple[bytes, bytes | None]] = []
        heads: list[Headers] = []
        signing = self._s.emitter_key
        for req in requests:
            key = req.admission_key.encode("utf-8")
            value = self._serde.encode(ADMISSION, req)
            batch.append((key, value))
            # Signed like the cases service's follow-ups: admission verifies emitters.
            heads.append(
                signing.headers(key, value, time.time_ns() // 1_000_000)
                if signing is not None
                else []
            )
        return await self._send(app, ADMISSION, batch, heads)

    async def _record(self, app: SweeperApp, changed: dict[str, ScheduleFired | None]) -> None:
        batch = [
            (key.encode("utf-8"), None if f is None else self._serde.encode(SCHEDULES_FIRED, f))
            for key, f in sorted(changed.items())
        ]
        if await self._send(app, SCHEDULES_FIRED, batch):
            for key, f in changed.items():
                if f is None:
                    self._wrote.pop(key, None)
                else:
                    self._wrote[key] = f
        # Not delivered: what is on the topic is behind, never ahead; the next sweep re-sends
        # the same ticks (duplicates to admission) and records them again.

    async def _send(
        self,
        app: SweeperApp,
        logical: str,
        batch: list[tuple[bytes, bytes | None]],
        headers: list[Headers] | None = None,
    ) -> bool:
        # Faust's producer itself (murmur2, acks=all): a tombstone's None value never reaches a
        # codec, and a tick's signature goes in its headers.
        topic = self._s.base.topic(logical)
        producer = app.app.producer
        try:
            pending = [
                await producer.send(topic, k, v, None, None, _raw(headers[i]) if headers else None)
                for i, (k, v) in enumerate(batch)
            ]
            await asyncio.wait_for(asyncio.gather(*pending), SEND_TIMEOUT_S)
        except (AioKafkaError, TimeoutError, RunplaneError) as exc:
            log.warning("schedule records to %s not delivered: %r", logical, exc)
            return False
        return True


def _raw(headers: Headers) -> list[tuple[str, bytes]]:
    """Signature headers as aiokafka takes them (every value bytes)."""
    return [(k, v if isinstance(v, bytes) else (v or "").encode("utf-8")) for k, v in headers]
