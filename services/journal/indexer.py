"""The run indexer: folds the ``audit`` topic into the Redis run index.

Delivery: at least once into Redis, made exactly-once in effect by the index's per-run
``last_seq`` guard (see ``index.py``). Offsets live in Redis beside the index (written after
the records they cover), so a lost Redis means both are gone together and we start over from
the beginning of ``audit`` — the rebuild. Every instance indexes every audit partition (no
group): the writes are idempotent, and a query served by any instance sees every run.

A flushed Redis is noticed while running too: the offsets hash disappears, and the indexer
seeks every partition back to the beginning.
"""

from __future__ import annotations

import logging
import threading
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from runplane.config import Settings
from runplane.errors import WireError
from runplane.kafka.clients import consumer_config
from runplane.service import Probe
from runplane.wire import AuditRecord, Serde
from services.journal import metrics as m
from services.journal.index import RunIndex

log = logging.getLogger(__name__)


class Indexer:
    """Reads ``audit`` (read_committed) into a :class:`RunIndex` until stopped."""

    def __init__(self, settings: Settings, index: RunIndex, *, probe: Probe | None = None) -> None:
        self._settings = settings
        self._index = index
        self._probe = probe
        self._serde = Serde.from_settings(settings)
        self._topic = settings.topic("audit")
        self.caught_up = threading.Event()

    def run(self, stop: threading.Event) -> None:
        consumer = Consumer(
            consumer_config(
                self._settings,
                f"runplane-indexer-{uuid.uuid4().hex[:12]}",  # never commits: offsets live in Redis
                **{"enable.partition.eof": True, "fetch.wait.max.ms": 100},
            )
        )
        try:
            partitions = self._assign(consumer)
            at_end: set[int] = set()
            while not stop.is_set():
                if self._index.offsets() is None:
                    self._rebuild(consumer, partitions)
                    at_end.clear()
                self._step(consumer, at_end, len(partitions))
        finally:
            consumer.close()

    def _assign(self, consumer: Consumer) -> list[int]:
        meta = consumer.list_topics(self._topic, timeout=30)
        partitions = sorted(meta.topics[self._topic].partitions)
        stored = self._index.offsets()
        if stored is None:
            m.INDEX_REBUILDS.inc()
            self._index.mark_started()
            stored = {}
            log.info("run index missing: rebuilding from the beginning of audit")
        consumer.assign(
            [TopicPartition(self._topic, p, stored.get(p, OFFSET_BEGINNING)) for p in partitions]
        )
        if self._probe is not None:
            self._probe.set_ready(True)
        return partitions

    def _rebuild(self, consumer: Consumer, partitions: list[int]) -> None:
        log.info("run index vanished (Redis flushed?): rebuilding from the beginning of audit")
        m.INDEX_REBUILDS.inc()
        self.caught_up.clear()
        self._index.mark_started()
        for p in partitions:
            consumer.seek(TopicPartition(self._topic, p, OFFSET_BEGINNING))

    def _step(self, consumer: Consumer, at_end: set[int], n_partitions: int) -> None:
        msgs = consumer.consume(num_messages=1000, timeout=0.2)
        if self._probe is not None:
            self._probe.beat()
        audits: list[AuditRecord] = []
        offsets: dict[int, int] = {}
        for msg in msgs:
            p = msg.partition() or 0
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(p)
                continue
            at_end.discard(p)
            offsets[p] = (msg.offset() or 0) + 1
            value = msg.value()
            if value is None:
                continue
            try:
                rec = self._serde.decode(
                    "audit", value if isinstance(value, bytes) else value.encode()
                )
            except WireError as exc:
                log.warning(
                    "skipping undecodable audit record", extra={"partition": p, "reason": str(exc)}
                )
                continue
            if isinstance(rec, AuditRecord):
                audits.append(rec)
        if audits:
            self._index.apply(audits)
            m.INDEXED.inc(len(audits))
        self._index.set_offsets(offsets)
        if len(at_end) >= n_partitions:
            self.caught_up.set()
