"""A zombie executor's late commit is fenced by the consumer group and never read.

Instance A consumes an inbox record and prepares a group commit, then stalls (no poll) past
``max.poll.interval.ms`` — a GC pause, a stuck call. The group moves its partition to B, which
serves the same record and commits. When A wakes and commits its batch through the executor's
``Committer``, the broker refuses A's offsets (stale generation): the transaction aborts, and a
read_committed reader sees B's records only.
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from runplane.config import Settings
from runplane.kafka.clients import consumer_config, producer_config, transactional_producer_config
from runplane.kafka.txn import TransactionalProducer, TxnAbortable, TxnFatal
from services.executor.batch import Batch, Out
from services.executor.committer import Committer
from services.executor.topology import group_id

pytestmark = pytest.mark.integration


def _consumer(settings: Settings, name: str) -> Consumer:
    return Consumer(
        consumer_config(
            settings,
            group_id(settings),
            **{
                "client.id": name,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                "max.poll.interval.ms": 6000,
            },
        )
    )


def _producer(settings: Settings, name: str) -> TransactionalProducer:
    txp = TransactionalProducer(
        transactional_producer_config(settings, f"executor-{name}-{uuid.uuid4().hex[:6]}")
    )
    txp.init()
    return txp


def _poll_until_record(consumer: Consumer, timeout_s: float) -> tuple[int, int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            return msg.partition() or 0, msg.offset() or 0
    raise AssertionError("no record consumed")


def _read_committed(settings: Settings, topic: str) -> list[bytes]:
    reader = Consumer(
        consumer_config(settings, f"reader-{uuid.uuid4().hex[:6]}", enable_partition_eof=True)
    )
    parts = sorted(reader.list_topics(topic, timeout=10).topics[topic].partitions)
    reader.assign([TopicPartition(topic, p, 0) for p in parts])
    pending, values = set(parts), []
    deadline = time.monotonic() + 30
    while pending and time.monotonic() < deadline:
        msg = reader.poll(0.2)
        if msg is None:
            continue
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                pending.discard(msg.partition())
            continue
        values.append(msg.value() or b"")
    reader.close()
    assert not pending, "reader never reached the end"
    return values


def _committed_offset(settings: Settings, topic: str, partition: int) -> int:
    probe = Consumer(consumer_config(settings, group_id(settings)))
    try:
        [tp] = probe.committed([TopicPartition(topic, partition)], timeout=10)
        return int(tp.offset)
    finally:
        probe.close()


def test_zombie_commit_is_fenced_and_invisible(settings: Settings) -> None:
    # The scenario runs in a child process: closing the evicted zombie's consumer can deadlock
    # inside librdkafka (rd_kafka_rebalance_protocol from the close-time rebalance callback,
    # librdkafka#4041) while holding the GIL, which no in-process timeout can interrupt. The
    # child reports its verdict before it closes anything; the parent kills a child stuck after.
    ctx = multiprocessing.get_context("spawn")
    verdicts: Any = ctx.Queue()
    child = ctx.Process(target=_zombie_scenario, args=(settings, verdicts), daemon=True)
    child.start()
    try:
        verdict = verdicts.get(timeout=240)
    finally:
        child.join(20)
        if child.is_alive():
            child.kill()
            child.join(5)
    assert verdict == "ok", verdict


def _zombie_scenario(settings: Settings, verdicts: Any) -> None:
    try:
        consumers = _fence_a_zombie(settings)
    except BaseException:  # the parent asserts on the text; nothing here may hang it
        verdicts.put(traceback.format_exc())
        return
    verdicts.put("ok")
    for c in consumers:
        c.close()


def _fence_a_zombie(settings: Settings) -> tuple[Consumer, Consumer]:
    inbox, journal = settings.topic("runs.inbox"), settings.topic("journal")
    seed = Producer(producer_config(settings))
    seed.produce(inbox, key=b"s-1", value=b"start")
    seed.flush(10)

    a_consumer, a_txp = _consumer(settings, "a"), _producer(settings, "a")
    a_consumer.subscribe([inbox])
    partition, offset = _poll_until_record(a_consumer, 30)
    zombie_batch = Batch()
    zombie_batch.add(Out(journal, b"s-1", b"from-zombie"), time.monotonic())
    fired: list[str] = []
    zombie_batch.after_commit(lambda: fired.append("zombie"), time.monotonic())

    # A stalls; B joins and, once A is evicted for not polling, gets the partition.
    b_consumer, b_txp = _consumer(settings, "b"), _producer(settings, "b")
    b_consumer.subscribe([inbox])
    b_partition, b_offset = _poll_until_record(b_consumer, 40)
    assert (b_partition, b_offset) == (partition, offset)  # B serves the same record again
    b_batch = Batch()
    b_batch.add(Out(journal, b"s-1", b"from-b"), time.monotonic())
    Committer(b_txp, b_consumer).commit(b_batch)

    with pytest.raises((TxnAbortable, TxnFatal)):
        Committer(a_txp, a_consumer).commit(zombie_batch)

    assert fired == []  # nothing that waits for durability ran for the zombie
    assert _read_committed(settings, journal) == [b"from-b"]
    assert _committed_offset(settings, inbox, partition) == offset + 1
    return a_consumer, b_consumer
