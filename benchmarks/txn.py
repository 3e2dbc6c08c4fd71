"""What one Kafka transaction costs the services' loops, phase by phase, on the real broker.

    python -m benchmarks.txn        # needs the local stack (`runplane up` / `make up`)

Every runplane service commits consume→produce transactions back to back under load: the
next one begins the moment the last commit returns. The coordinator is then still writing the
previous transaction's markers and answers the new transaction's first request with
``CONCURRENT_TRANSACTIONS``; librdkafka retries after ``retry.backoff.ms``. This measures a
transaction shaped like admission's (records to 4 partitions, then the input offsets with the
group metadata, then the commit) with our producer settings:

- back to back, with ``retry.backoff.ms`` as we set it and as it was (5 ms) — the baseline;
- spaced 10 ms apart (the markers are written by then: no retry at all);
- back to back writing 1, 3 and every partition of the topic (the cost of a partition more).

Medians of ``ROUNDS`` transactions after ``SKIP`` warm-up ones. Numbers only.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.executor import scratch_topics
from runplane.config import Settings
from runplane.kafka.clients import consumer_config, transactional_producer_config

ROUNDS = 80
SKIP = 10
PAYLOAD = b"x" * 300
TOPIC = "journal"  # any scratch topic of the catalogue; its partition count is the settings'


def _phases(
    settings: Settings, *, partitions: int, gap_s: float, **overrides: Any
) -> dict[str, float]:
    topic = settings.topic(TOPIC)
    config = transactional_producer_config(
        settings, f"{settings.topic_prefix}bench-txn-{uuid.uuid4().hex[:8]}", **overrides
    )
    producer = Producer(config)
    producer.init_transactions(60)
    consumer = Consumer(consumer_config(settings, f"{settings.topic_prefix}bench-txn"))
    consumer.assign([TopicPartition(topic, 0, 0)])
    offsets, totals = [], []
    try:
        for i in range(ROUNDS + SKIP):
            if gap_s:
                time.sleep(gap_s)
            started = time.perf_counter()
            producer.begin_transaction()
            for p in range(partitions):
                producer.produce(topic, PAYLOAD, key=b"k", partition=p)
            sent = time.perf_counter()
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, 0, i)], consumer.consumer_group_metadata(), 30
            )
            offsets.append((time.perf_counter() - sent) * 1000)
            producer.commit_transaction(30)
            totals.append((time.perf_counter() - started) * 1000)
    finally:
        consumer.close()
    return {
        "send_offsets_p50_ms": round(statistics.median(offsets[SKIP:]), 2),
        "transaction_p50_ms": round(statistics.median(totals[SKIP:]), 2),
    }


def run(settings: Settings | None = None) -> dict[str, Any]:
    base = settings if settings is not None else Settings.from_env()
    with scratch_topics(base) as s:
        ours = _phases(s, partitions=4, gap_s=0)
        before = _phases(s, partitions=4, gap_s=0, retry_backoff_ms=5)
        spaced = _phases(s, partitions=4, gap_s=0.01)
        by_partitions = {
            f"partitions_{n}": _phases(s, partitions=n, gap_s=0)["transaction_p50_ms"]
            for n in sorted({1, min(3, s.partitions), s.partitions})
        }
    return {
        "back_to_back": ours,
        "back_to_back_retry_backoff_5ms": before,
        "spaced_10ms": spaced,
        "ratio_back_to_back_vs_backoff_5ms": round(
            ours["transaction_p50_ms"] / before["transaction_p50_ms"], 3
        ),
        "back_to_back_by_partitions_ms": by_partitions,
    }


def main() -> None:
    for key, value in run().items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
