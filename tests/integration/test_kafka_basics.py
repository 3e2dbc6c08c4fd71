"""The broker behaves as the platform relies on: placement, compaction, transactions.

Each test talks to the real local Kafka through the same client factories the services use.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from runplane.config import Settings
from runplane.kafka.clients import consumer_config, producer_config, transactional_producer_config
from runplane.kafka.topics import FAST_COMPACTION, create_topics, topic_name


def murmur2_partition(key: bytes, partitions: int) -> int:
    """Java's ``Utils.murmur2`` placement, written out so the test does not trust our code."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (0x9747B28C ^ len(key)) & mask
    whole = len(key) // 4 * 4
    for i in range(0, whole, 4):
        k = int.from_bytes(key[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    rest = key[whole:]
    if rest:
        for shift, byte in reversed(list(enumerate(rest))):
            h ^= byte << (8 * shift)
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def read_to_end(
    settings: Settings, topic: str, *, isolation: str = "read_committed", timeout: float = 30.0
) -> list[Message]:
    """Every record of ``topic`` from the beginning to the end (the LSO under read_committed)."""
    consumer = Consumer(
        consumer_config(
            settings,
            f"{settings.topic_prefix}reader-{uuid.uuid4().hex[:6]}",
            isolation_level=isolation,
            enable_partition_eof=True,
        )
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        partitions = sorted(metadata.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])  # 0 = from the start
        pending, records = set(partitions), []
        deadline = time.monotonic() + timeout
        while pending:
            assert time.monotonic() < deadline, f"no EOF on partitions {pending} of {topic}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                pending.discard(msg.partition())
                continue
            assert error is None, error
            records.append(msg)
        return records
    finally:
        consumer.close()


def produce(
    producer: Producer, topic: str, items: Iterable[tuple[str, str | None]], **kw: int
) -> None:
    for key, value in items:
        producer.produce(
            topic, key=key.encode(), value=None if value is None else value.encode(), **kw
        )
    assert producer.flush(30) == 0


def test_produce_and_consume_with_murmur2_placement(
    settings: Settings, topics: dict[str, str]
) -> None:
    topic = topics["runs.inbox"]
    placed: dict[str, int] = {}

    def delivered(err: KafkaError | None, msg: Message) -> None:
        assert err is None, err
        placed[msg.key().decode()] = msg.partition()

    producer = Producer(producer_config(settings))
    for i in range(30):
        producer.produce(
            topic, key=f"session-{i % 10}".encode(), value=f"{i}".encode(), on_delivery=delivered
        )
    assert producer.flush(30) == 0

    # Same key bytes → same partition as a Java, aiokafka or Faust client would choose.
    assert placed == {k: murmur2_partition(k.encode(), settings.partitions) for k in placed}
    assert len(set(placed.values())) > 1

    consumer = Consumer(consumer_config(settings, f"{settings.topic_prefix}g"))
    consumer.subscribe([topic])
    got: list[tuple[str, int]] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < 30 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append((msg.key().decode(), int(msg.value())))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert len(got) == 30
    for key in {k for k, _ in got}:  # per key, the order of production is kept
        values = [v for k, v in got if k == key]
        assert values == sorted(values)


def test_compaction_drops_superseded_values(
    empty_settings: Settings, admin_client: AdminClient
) -> None:
    settings = empty_settings
    create_topics(
        settings, admin_client, names=["sessions"], overrides={"sessions": FAST_COMPACTION}
    )
    topic = topic_name(settings, "sessions")
    producer = Producer(producer_config(settings))
    produce(producer, topic, [("s1", f"v{i}") for i in range(10)], partition=0)
    produce(producer, topic, [("s2", f"w{i}") for i in range(5)], partition=0)
    produce(producer, topic, [("gone", "x"), ("gone", None)], partition=0)  # then a tombstone

    # The active segment is never cleaned: after segment.ms, each append rolls a new segment
    # and leaves the older ones to the cleaner (log.cleaner.backoff.ms is small in our stack).
    deadline = time.monotonic() + 90
    while True:
        time.sleep(0.5)
        produce(producer, topic, [("roll", str(time.monotonic()))], partition=0)
        rows = [
            (m.key().decode(), m.value())
            for m in read_to_end(settings, topic)
            if m.partition() == 0
        ]
        s1 = [v for k, v in rows if k == "s1"]
        s2 = [v for k, v in rows if k == "s2"]
        gone = [v for k, v in rows if k == "gone"]
        if s1 == [b"v9"] and s2 == [b"w4"] and gone == []:
            break
        assert time.monotonic() < deadline, f"not compacted: s1={s1} s2={s2} gone={gone}"
    # Last write wins survives compaction: the latest value of every live key is still there.
    assert rows[0][0] in {"s1", "s2"}


def test_read_committed_never_sees_aborted_records(
    settings: Settings, topics: dict[str, str]
) -> None:
    topic = topics["journal"]
    producer = Producer(transactional_producer_config(settings, f"{settings.instance_id}-txn"))
    producer.init_transactions(60)

    producer.begin_transaction()
    produce(producer, topic, [(f"run-{i}", f"aborted-{i}") for i in range(5)])
    producer.abort_transaction(30)

    producer.begin_transaction()
    produce(producer, topic, [(f"run-{i}", f"committed-{i}") for i in range(5)])
    producer.commit_transaction(30)

    committed = sorted(m.value().decode() for m in read_to_end(settings, topic))
    assert committed == [f"committed-{i}" for i in range(5)]
    # The aborted records are in the log: a read_uncommitted reader (aiokafka's and Faust's
    # default) does see them, which is why the platform's readers use read_committed.
    everything = {
        m.value().decode() for m in read_to_end(settings, topic, isolation="read_uncommitted")
    }
    assert {f"aborted-{i}" for i in range(5)} <= everything
