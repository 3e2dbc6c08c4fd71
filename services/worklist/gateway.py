"""How an API action reaches the single writer, and how the API learns what the writer did.

The API never writes ``tasks``: only the worklist processor does, so the four-eyes rules have
exactly one authoritative enforcement point and a decision and its TaskDecision commit
together. An action goes like this:

1. the API checks the action against the read model with the same pure ``decide`` the writer
   runs (a refusal is answered at once: 403/404/409 with the reason);
2. it produces ClaimTask/ReleaseTask/DecideTask — ``principal`` from the bearer token — to
   ``tasks.commands`` (idempotent producer, murmur2 placement) and notes the command's offset;
3. it waits, bounded, until the worklist's consumer group has committed past that offset:
   the writer has then handled the command, and whatever it wrote (in the same transaction
   as that offset commit) is committed on ``tasks``;
4. it waits until this instance's read-model indexer has read ``tasks`` to that point, and
   answers from the record: applied, or refused by the writer (a race another person won),
   with the reason recomputed by ``decide`` on the current record.

A writer that does not answer within the bound is a 503 ("queued; may still apply"), never
a guess. The wait costs a few tens of milliseconds on a healthy stack, which is fine for a
person's click and keeps the API honest about the authoritative outcome.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from runplane.config import Settings
from runplane.errors import RetryableError
from runplane.kafka.clients import consumer_config, producer_config
from runplane.kafka.partition import partition_for
from runplane.wire import ClaimTask, DecideTask, ReleaseTask, serde_for
from services.worklist.readmodel import Indexer
from services.worklist.topology import INPUT, TABLE, group_id

__all__ = ["Gateway", "Sent", "WriterTimeout"]

HumanCommand = ClaimTask | ReleaseTask | DecideTask


class WriterTimeout(RetryableError):
    """The writer did not confirm the command in time; it is queued and may still apply."""


@dataclass(frozen=True)
class Sent:
    partition: int
    offset: int


class Gateway:
    """Produces human commands and waits until the writer and the read model have them."""

    def __init__(self, settings: Settings, indexer: Indexer, *, wait_ms: int = 10_000) -> None:
        self._settings = settings
        self._indexer = indexer
        self._wait_s = wait_ms / 1000
        self._serde = serde_for(settings)
        self._input = settings.topic(INPUT)
        self._table = settings.topic(TABLE)
        self._producer = Producer(producer_config(settings, linger_ms=0))
        # Never subscribes, so it never joins the writer's group: it only reads the group's
        # committed offsets (OffsetFetch) and the table's watermarks.
        self._offsets = Consumer(consumer_config(settings, group_id(settings)))
        self._lock = threading.Lock()
        self._partitions: int | None = None

    def close(self) -> None:
        self._producer.flush(5)
        self._offsets.close()

    def _count(self) -> int:
        if self._partitions is None:
            meta = self._producer.list_topics(self._input, timeout=10).topics.get(self._input)
            if meta is None or meta.error is not None or not meta.partitions:
                raise WriterTimeout(f"topic {self._input} is not available")
            self._partitions = len(meta.partitions)
        return self._partitions

    def send(self, command: HumanCommand) -> Sent:
        """Produce ``command`` and wait for the broker's acknowledgement."""
        partition = partition_for(command.task_id, self._count())
        result: dict[str, Message | KafkaError | None] = {}

        def delivered(err: KafkaError | None, msg: Message) -> None:
            result["err"], result["msg"] = err, msg

        self._producer.produce(
            self._input,
            key=command.task_id.encode("utf-8"),
            value=self._serde.encode(INPUT, command),
            partition=partition,
            on_delivery=delivered,
        )
        deadline = time.monotonic() + self._wait_s
        while "msg" not in result and time.monotonic() < deadline:
            self._producer.poll(0.05)
        err, msg = result.get("err"), result.get("msg")
        if not isinstance(msg, Message) or err is not None:
            raise WriterTimeout(f"the command was not acknowledged by Kafka: {err}")
        offset = msg.offset()
        assert offset is not None
        return Sent(partition, offset)

    def await_applied(self, sent: Sent, done: Callable[[], bool] | None = None) -> None:
        """Block until the writer handled ``sent`` and the read model shows its outcome."""
        deadline = time.monotonic() + self._wait_s
        while not self._writer_past(sent):
            if done is not None and done():
                return  # the read model already shows the outcome: no need to ask Kafka
            if time.monotonic() >= deadline:
                raise WriterTimeout("the worklist writer did not handle the command in time")
            time.sleep(0.03)
        end = self._table_end(sent.partition)
        with self._indexer.changed:
            while self._indexer.position(sent.partition) < end:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WriterTimeout("the read model did not catch up in time")
                self._indexer.changed.wait(min(left, 0.2))

    def _writer_past(self, sent: Sent) -> bool:
        tp = TopicPartition(self._input, sent.partition)
        try:
            with self._lock:
                (committed,) = self._offsets.committed([tp], timeout=5)
        except KafkaException as exc:
            raise WriterTimeout(f"cannot read the writer's progress: {exc}") from exc
        return committed.offset > sent.offset

    def _table_end(self, partition: int) -> int:
        # The TaskRecord the writer made for this command sits on the same partition number
        # (co-partitioned, same key) below the current end.
        try:
            with self._lock:
                _, high = self._offsets.get_watermark_offsets(
                    TopicPartition(self._table, partition), timeout=5, cached=False
                )
        except KafkaException as exc:
            raise WriterTimeout(f"cannot read the tasks topic's end: {exc}") from exc
        return int(high)
