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
from concurrent.futures import Future, ThreadPoolExecutor
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
                self._producer.produce(out.topic, out.key, value, out.partition, out.headers)
            self._producer.commit(offsets, metadata)
        except TxnAbortable:
            self._metrics.txn_aborts.inc()
            self._producer.abort()
            raise
        self._metrics.txn_commit_seconds.observe(self._clock() - started)
        self._metrics.txn_batch_records.observe(len(batch.records))


class GroupCommit:
    """The executor's pipelined, adaptive group commit: one batch filling, one committing.

    The batch in flight commits on a single worker thread (a producer's transactions are
    sequential) while the loop goes on serving and filling the next one. ``maybe_commit``
    seals the batch as soon as the loop is drained (nothing in hand): a lone run commits at
    once, while under load the batch grows by itself during the previous commit;
    ``batch_max`` / ``batch_ms`` only bound a batch whose input never drains.
    """

    def __init__(self, *, max_records: int, max_s: float) -> None:
        self._max_records = max_records
        self._max_s = max_s
        self.batch = Batch()
        self.stats = {"commits": 0, "records": 0}
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="executor-commit")
        self._in_flight: tuple[Future[None], Batch] | None = None
        self._producer: TransactionalProducer | None = None
        self._committer: Committer | None = None

    def bind(self, producer: TransactionalProducer, committer: Committer) -> None:
        """The producer and consumer exist once the loop started; batches fill before."""
        self._producer = producer
        self._committer = committer

    def _bound(self) -> Committer:
        assert self._committer is not None, "GroupCommit.bind() first"
        return self._committer

    @property
    def in_flight(self) -> bool:
        return self._in_flight is not None

    def serve_delivery_reports(self) -> None:
        """Serve the producer's delivery reports here, on the loop thread, while a commit runs.

        confluent-kafka takes the GIL once per delivered message to run its delivery-report
        callback. ``commit_transaction`` (on the commit worker) waits for every message of the
        transaction to be reported, and with this thread busy each of those GIL hand-offs
        waited for a switch interval: a 1,000-record commit took 100-300 ms instead of ~10.
        Served from the thread that already holds the GIL, the same reports cost microseconds;
        librdkafka allows polling from any thread while another commits.
        """
        if self._in_flight is not None and self._producer is not None:
            self._producer.poll(0)

    def maybe_commit(self, now: float, *, drained: bool) -> None:
        """Collect the previous commit if it is done (raises ``TxnAbortable`` if it aborted),
        then start committing the batch if it is due."""
        if self._in_flight is not None:
            if not self._in_flight[0].done():
                return
            self.settle()
        if self.batch.empty:
            return
        if not drained and not self.batch.due(now, self._max_records, self._max_s):
            return
        committer = self._bound()
        batch, self.batch = self.batch, Batch()
        offsets, metadata = committer.seal()
        future = self._pool.submit(committer.commit_sealed, batch, offsets, metadata)
        self._in_flight = (future, batch)

    def settle(self) -> None:
        """Wait for the commit in flight, if any; run its after-commit work (raises
        ``TxnAbortable`` when it aborted, ``TxnFatal`` when the producer is gone)."""
        if self._in_flight is None:
            return
        future, batch = self._in_flight
        self._in_flight = None
        future.result()
        self._committed(batch)

    def commit_now(self) -> None:
        """Commit the current batch synchronously (stop, revocation); raises like settle."""
        self.settle()
        committer = self._bound()
        batch, self.batch = self.batch, Batch()
        offsets, metadata = committer.seal()
        committer.commit_sealed(batch, offsets, metadata)
        self._committed(batch)

    def discard(self) -> None:
        """The batch was built on state that is void now (an abort, a lost partition)."""
        self.batch = Batch()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _committed(self, batch: Batch) -> None:
        self.stats["commits"] += 1
        self.stats["records"] += len(batch.records)
        for fn in batch.callbacks:
            fn()
