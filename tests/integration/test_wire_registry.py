"""Wire records through the real broker, in both wire formats.

The broker is the real local Kafka (``stack`` / ``settings`` fixtures). The schema registry
is confluent-kafka's in-memory one (``mock://``): no registry runs in the local stack, and
what matters here is that bytes framed by our serde survive a real produce/consume with
their keys and partitions, and that a consumer refuses what does not belong on a topic.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from runplane.config import Settings
from runplane.errors import WireError
from runplane.kafka.clients import consumer_config, producer_config
from runplane.wire import Record, Serde, Signal, SingleObjectSerde, Wake
from runplane.wire._confluent import ConfluentSerde

pytestmark = pytest.mark.integration


def _read_all(
    settings: Settings, topic: str, expected: int, timeout: float = 30.0
) -> list[Message]:
    consumer = Consumer(
        consumer_config(settings, f"{settings.topic_prefix}wire-{uuid.uuid4().hex[:6]}")
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected:
            assert time.monotonic() < deadline, f"read {len(out)} of {expected} from {topic}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            assert err is None or err.code() == KafkaError._PARTITION_EOF, err
            if err is None:
                out.append(msg)
        return out
    finally:
        consumer.close()


def _produce(settings: Settings, items: list[tuple[str, str, bytes]]) -> None:
    producer = Producer(producer_config(settings))
    for topic, key, value in items:
        producer.produce(topic, key=key.encode("utf-8"), value=value)
    assert producer.flush(30) == 0


@pytest.mark.parametrize("fmt", ["single-object", "confluent"])
def test_records_survive_the_broker_and_foreign_bytes_are_refused(
    settings: Settings, topics: dict[str, str], fmt: str
) -> None:
    serde: Serde = (
        SingleObjectSerde()
        if fmt == "single-object"
        else ConfluentSerde.from_url(
            f"mock://{uuid.uuid4().hex}", topic_prefix=settings.topic_prefix
        )
    )
    inbox = topics["runs.inbox"]
    sent: list[Record] = [
        Wake(session_id="s-1", reason="evicted", sent_ms=1),
        Signal(session_id="s-2", name="approved", payload_json='{"by": "bob"}', sent_ms=2),
    ]
    garbage = b"\xc3\x01" + bytes(8) + b"\x02x"
    _produce(
        settings,
        [(inbox, r.session_id, serde.encode("runs.inbox", r)) for r in sent]  # type: ignore[attr-defined]
        + [(inbox, "s-3", garbage)],
    )

    received: dict[str, Record] = {}
    refused: list[str] = []
    for msg in _read_all(settings, inbox, expected=3):
        key = (msg.key() or b"").decode()
        try:
            received[key] = serde.decode(inbox, msg.value() or b"")
        except WireError as exc:
            refused.append(f"{key}: {exc}")

    assert received == {"s-1": sent[0], "s-2": sent[1]}
    assert len(refused) == 1 and refused[0].startswith("s-3: ")
    # What landed on runs.inbox must not be accepted as a journal record.
    with pytest.raises(WireError, match="not allowed on journal"):
        serde.decode(topics["journal"], serde.encode("runs.inbox", sent[0]))
