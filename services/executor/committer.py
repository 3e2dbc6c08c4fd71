"""Commit a group-commit batch as one Kafka transaction, fenced by the consumer group.

The input offsets go in with ``send_offsets_to_transaction(positions,
consumer_group_metadata())`` (KIP-447): if this instance lost its partitions in a rebalance it
did not notice (a zombie), the broker refuses the offsets because the group generation moved
on, the transaction aborts, and nothing it produced is ever visible to a read_committed reader.

Raises only ``TxnAbortable`` (abort was done here; the caller must rewind and rebuild) or
``TxnFatal`` (the producer is unusable; stop).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from runplane.kafka.txn import TransactionalProducer, TxnAbortable
from services.executor.batch import Batch
from services.executor.metrics import executor_metrics


def committable_positions(consumer: Consumer) -> list[TopicPartition]:
    """Positions of assigned partitions that consumed anything (others have no offset yet)."""
    assignment = consumer.assignment()
    if not assignment:
        return []
    return [tp for tp in consumer.position(assignment) if tp.offset >= 0]


class Committer:
    def __init__(
        self,
        producer: TransactionalProducer,
        consumer: Consumer,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._producer = producer
        self._consumer = consumer
        self._clock = clock
        self._metrics = executor_metrics()

    def seal(self) -> tuple[list[TopicPartition], Any]:
        """The consumer's positions and group metadata now: what a batch sealed now commits.

        Taken on the consuming thread, so the transaction itself may run on another one."""
        return committable_positions(self._consumer), self._consumer.consumer_group_metadata()

    def commit(self, batch: Batch) -> None:
        """Produce ``batch`` and the consumer's positions in one transaction, then run its
        after-commit callbacks. On an abortable error the transaction is aborted and
        ``TxnAbortable`` propagates; the callbacks never run."""
        offsets, metadata = self.seal()
        self.commit_sealed(batch, offsets, metadata)
        for fn in batch.callbacks:
            fn()

    def commit_sealed(self, batch: Batch, offsets: list[TopicPartition], metadata: Any) -> None:
        """The transaction alone (no callbacks): safe to run on a worker thread while the
        consumer goes on, because it touches only the producer."""
        started = self._clock()
        try:
            self._producer.begin()
            for out in batch.records:
                value = out.lazy() if out.lazy is not None else out.value
                self._producer.produce(out.topic, out.key, value, out.partition)
            self._producer.commit(offsets, metadata)
        except TxnAbortable:
            self._metrics.txn_aborts.inc()
            self._producer.abort()
            raise
        self._metrics.txn_commit_seconds.observe(self._clock() - started)
        self._metrics.txn_batch_records.observe(len(batch.records))
