"""The sweeper's I/O shell: read ``cases`` into the Redis index, tick, send decisions.

Why a plain confluent-kafka consumer and not faust-streaming: at ``at_least_once`` Faust
reads *uncommitted* records, so it would see case records of aborted cases-service
transactions and index obligations that never existed; its tables need changelog topics of
their own, and the index has to live in Redis anyway. A ``read_committed`` consumer sees only
committed case records, and the index's read position is stored in Redis together with the
index, so the two can never disagree.

Delivery guarantee: **at least once, and harmless when repeated.** Each decision is sent
(and flushed) before its index entry is postponed by ``retry_ms``; a crash in between sends
it again after the restart. Every command is named from (case, obligation, due)
(:mod:`services.sweeper.keys`), so a repeat — or the same decision from a second sweeper —
is a duplicate to the cases service, which confirms each decision and alone writes its
consequences (the obligation's status, the sealed sweep run, the follow-up admission).

Instances share one consumer group, so each partition of ``cases`` is swept by one instance
at a time; during a rebalance two may briefly sweep the same partition, which only repeats
commands. If Redis is unreachable the loop raises and the service exits non-zero: the
supervisor restarts it, and it resumes from the read positions stored in Redis (or rebuilds).
Time comes from an injected clock (``RUNPLANE_SWEEPER_CLOCK_OFFSET_MS`` shifts it,
so a test can pass ``days(1)`` without waiting).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable

import redis
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from runplane.errors import RetryableError, WireError
from runplane.kafka.clients import consumer_config, producer_config
from runplane.kafka.partition import partition_for
from runplane.service import Probe
from runplane.wire import CaseRecord, Serde

from services.sweeper import metrics
from services.sweeper.decide import decide_tick, entries_for
from services.sweeper.index import DueIndex
from services.sweeper.settings import SweeperSettings
from services.sweeper.topology import INPUT, OUTPUT, group_id

__all__ = ["Sweeper"]

log = logging.getLogger(__name__)

Clock = Callable[[], int]


class Sweeper:
    """One sweeper instance. ``run(stop)`` blocks; ``tick()`` can be driven by a test."""

    def __init__(
        self,
        settings: SweeperSettings,
        *,
        clock: Clock | None = None,
        redis_client: redis.Redis | None = None,
        probe: Probe | None = None,
    ) -> None:
        self._s = settings
        base = settings.base
        self._clock: Clock = clock or (
            lambda: time.time_ns() // 1_000_000 + settings.clock_offset_ms
        )
        self._redis = redis_client or redis.Redis.from_url(base.redis_url)
        self._index = DueIndex(self._redis, base.topic_prefix)
        self._serde = Serde.from_settings(base)
        self._probe = probe
        self._input = base.topic(INPUT)
        self._output = base.topic(OUTPUT)
        self._consumer = Consumer(
            consumer_config(base, group_id(base), **{"partition.assignment.strategy": "range"})
        )
        self._producer = Producer(producer_config(base, linger_ms=0))
        self._assigned: set[int] = set()
        self._out_partitions = 0
        self._last_tick = 0
        self.ready = threading.Event()

    # --- lifecycle -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        md = self._consumer.list_topics(self._output, timeout=30).topics.get(self._output)
        if md is None or not md.partitions:
            raise RetryableError(f"topic {self._output} does not exist")
        self._out_partitions = len(md.partitions)
        self._consumer.subscribe(
            [self._input],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        try:
            while not stop.is_set():
                self.poll()
                if self._probe is not None:
                    self._probe.beat()
                if self._assigned and self._clock() - self._last_tick >= self._s.tick_ms:
                    self.tick()
        finally:
            self._consumer.close()
            self._producer.flush(10)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            offset = self._index.offset(tp.partition)
            if offset is None:
                # No index for this partition (first start, or Redis was flushed): rebuild
                # it from the compacted topic's beginning.
                self._index.reset(tp.partition)
                metrics.REBUILDS.inc()
                offset = OFFSET_BEGINNING
            tp.offset = offset
            self._assigned.add(tp.partition)
        consumer.assign(partitions)
        log.info("sweeper assigned", extra={"partitions": sorted(self._assigned)})
        self.ready.set()
        if self._probe is not None:
            self._probe.set_ready(True)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._assigned.discard(tp.partition)
        if self._probe is not None and not self._assigned:
            self._probe.set_ready(False, "waiting for partition assignment")

    # --- reading cases into the index ------------------------------------------------------

    def poll(self) -> int:
        """Index one batch of case records; returns how many were read."""
        msgs = self._consumer.consume(num_messages=500, timeout=min(self._s.tick_ms, 100) / 1000)
        latest: dict[int, dict[str, CaseRecord | None]] = defaultdict(dict)
        next_offset: dict[int, int] = {}
        for msg in msgs:
            if not self._usable(msg):
                continue
            p, offset = msg.partition(), msg.offset()
            assert p is not None and offset is not None
            next_offset[p] = offset + 1
            key = msg.key()
            case_id = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
            latest[p][case_id] = self._decode(msg)
        for p, cases in latest.items():
            self._index.apply(
                p, {cid: entries_for(case) for cid, case in cases.items()}, next_offset[p]
            )
        return len(msgs)

    def _usable(self, msg: Message) -> bool:
        err = msg.error()
        if err is None:
            return True
        if err.code() != KafkaError._PARTITION_EOF:
            log.warning("consumer error: %s", err.str())
        return False

    def _decode(self, msg: Message) -> CaseRecord | None:
        value = msg.value()
        if value is None:
            return None  # a tombstone: the case is gone, so are its entries
        try:
            record = self._serde.decode(
                INPUT, value if isinstance(value, bytes) else value.encode()
            )
        except WireError as exc:
            # Only the cases service writes this topic; a record we cannot read is its bug.
            # Skip it (the next record of the case replaces it) and count it.
            metrics.UNREADABLE.inc()
            log.warning("unreadable case record skipped: %s", exc)
            return None
        return record if isinstance(record, CaseRecord) else None

    # --- the tick --------------------------------------------------------------------------

    def tick(self) -> int:
        """Send every decision whose time has come; returns how many commands were sent."""
        now = self._clock()
        self._last_tick = now
        sent = 0
        for p in sorted(self._assigned):
            if self._index.offset(p) is None:
                self._rebuild(p)
                continue
            sent += self._sweep(p, now)
        metrics.INDEX_ENTRIES.set(self.index_size())
        return sent

    def _rebuild(self, p: int) -> None:
        """Redis lost the index of ``p`` while we ran: read the partition again from 0."""
        log.warning("due-time index of partition %d is missing; rebuilding", p)
        metrics.REBUILDS.inc()
        self._index.reset(p)
        try:
            self._consumer.seek(TopicPartition(self._input, p, OFFSET_BEGINNING))
        except Exception as exc:  # the partition moved away meanwhile: its new owner rebuilds
            log.info("seek for rebuild skipped on %d: %s", p, exc)

    def _sweep(self, p: int, now: int) -> int:
        decisions = decide_tick(self._index.due(p, now), now)
        if not decisions:
            return 0
        send = [(entry, cmd) for entry, cmd in decisions if cmd is not None]
        drop = [entry for entry, cmd in decisions if cmd is None]
        failed: list[str] = []

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                failed.append(err.str())

        for _, cmd in send:
            data = self._serde.encode(OUTPUT, cmd)
            self._producer.produce(
                self._output,
                key=cmd.case_id.encode("utf-8"),
                value=data,
                partition=partition_for(cmd.case_id, self._out_partitions),
                on_delivery=delivered,
            )
        left = self._producer.flush(10)
        if left or failed:
            # Not confirmed: keep the entries due, the next tick sends them again.
            log.warning("sweeper commands not delivered (%d pending, errors %s)", left, failed[:3])
            return 0
        for entry, _ in send:
            metrics.COMMANDS.labels(entry.action).inc()
            log.info(
                "sweeper decision sent",
                extra={"action": entry.action, "case_id": entry.case_id, "obligation": entry.name},
            )
        # The cases service's answer (a new case record) replaces these entries; until it
        # arrives they come back only after retry_ms, so a slow answer is not a storm.
        self._index.postpone(p, [e for e, _ in send], now + self._s.retry_ms)
        self._index.drop(p, drop)
        return len(send)

    def index_size(self) -> int:
        return sum(self._index.size(p) for p in self._assigned)
