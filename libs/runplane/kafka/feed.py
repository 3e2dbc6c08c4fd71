"""A whole topic folded into a rebuildable store: the loop under the journal's run index and
the worklist's read model.

Every instance reads every partition of the topic (assigned, no group, ``read_committed``,
never committing): the store's writes are idempotent — each store guards a key by the
position it came from — so any instance can serve any query. The store keeps the next offset
of each partition beside its data, written after the records they cover, so losing Redis
loses both together. The loop notices offsets that are gone, at start and while running
(someone flushed Redis), and reads the topic again from the beginning: the rebuild.

Delivery: at least once into the store, exactly once in effect through the store's own guard.
"""

from __future__ import annotations

import abc
import logging
import threading
import uuid
from collections.abc import Mapping, Sequence

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from runplane.config import Settings
from runplane.errors import WireError
from runplane.kafka.clients import consumer_config
from runplane.serving.health import Probe

log = logging.getLogger(__name__)


class TopicFeed(abc.ABC):
    """Reads every partition of ``topic`` into a store until stopped.

    A subclass says where the store's offsets are (:meth:`stored_offsets`), how it starts
    over (:meth:`start_rebuild`) and how a batch lands in it (:meth:`apply`). ``caught_up``
    is set once every partition was read to its end (and cleared by a rebuild).
    ``retry_on``: errors of the store that leave the consumer where it is and are tried again
    a second later (the store is away for a while); any other error ends :meth:`run`.
    """

    def __init__(
        self,
        settings: Settings,
        topic: str,
        *,
        reader: str,
        probe: Probe | None = None,
        batch: int = 500,
        poll_s: float = 0.1,
        fetch_wait_ms: int = 50,
        retry_on: tuple[type[Exception], ...] = (),
    ) -> None:
        self._settings = settings
        self._topic = settings.topic(topic)
        self._reader = reader
        self._probe = probe
        self._batch = batch
        self._poll_s = poll_s
        self._fetch_wait_ms = fetch_wait_ms
        self._retry_on = retry_on
        self.caught_up = threading.Event()

    # -- what a store provides ----------------------------------------------------------------

    @abc.abstractmethod
    def stored_offsets(self) -> Mapping[int, int] | None:
        """The next offset per partition the store has applied; None: missing, rebuild."""

    @abc.abstractmethod
    def start_rebuild(self) -> None:
        """Prepare the store to be filled again from the beginning of the topic."""

    @abc.abstractmethod
    def apply(self, messages: Sequence[Message], offsets: Mapping[int, int]) -> None:
        """Land a batch: its records (tombstones included) in topic order per partition, and
        the next offset of each partition it covers (stored after the records)."""

    # -- the loop ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        consumer = Consumer(
            consumer_config(
                self._settings,
                # A group id is required even for assign(); offsets live in the store.
                f"{self._reader}-{uuid.uuid4().hex[:12]}",
                **{"enable.partition.eof": True, "fetch.wait.max.ms": self._fetch_wait_ms},
            )
        )
        try:
            partitions = self._assign(consumer)
            at_end: set[int] = set()
            while not stop.is_set():
                try:
                    if self.stored_offsets() is None:
                        log.info("%s vanished (Redis flushed?): rebuilding", self._topic)
                        self._rebuild(consumer, partitions)
                        at_end.clear()
                    self._step(consumer, at_end, len(partitions))
                except self._retry_on as exc:
                    log.warning("store of %s unavailable: %s", self._topic, exc)
                    if self._probe is not None:
                        self._probe.beat()
                    stop.wait(1.0)
        finally:
            consumer.close()

    def _assign(self, consumer: Consumer) -> list[int]:
        meta = consumer.list_topics(self._topic, timeout=30)
        topic = meta.topics.get(self._topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise WireError(f"topic {self._topic} does not exist")
        partitions = sorted(topic.partitions)
        stored = self.stored_offsets()
        if stored is None:
            log.info("store of %s missing: rebuilding from its beginning", self._topic)
            self.start_rebuild()
            stored = {}
        consumer.assign(
            [TopicPartition(self._topic, p, stored.get(p, OFFSET_BEGINNING)) for p in partitions]
        )
        if self._probe is not None:
            self._probe.set_ready(True)
        return partitions

    def _rebuild(self, consumer: Consumer, partitions: list[int]) -> None:
        self.caught_up.clear()
        self.start_rebuild()
        for p in partitions:
            consumer.seek(TopicPartition(self._topic, p, OFFSET_BEGINNING))

    def _step(self, consumer: Consumer, at_end: set[int], n_partitions: int) -> None:
        msgs = consumer.consume(num_messages=self._batch, timeout=self._poll_s)
        if self._probe is not None:
            self._probe.beat()
        records: list[Message] = []
        offsets: dict[int, int] = {}
        for msg in msgs:
            p = msg.partition() or 0
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(p)
                    # EOF under read_committed is the last stable offset: everything
                    # committed before it has been applied (transaction markers and aborted
                    # records included, which no message would move the offset past).
                    offsets[p] = max(offsets.get(p, 0), msg.offset() or 0)
                continue
            at_end.discard(p)
            offsets[p] = (msg.offset() or 0) + 1
            records.append(msg)
        if records or offsets:
            self.apply(records, offsets)
        if len(at_end) >= n_partitions:
            self.caught_up.set()
