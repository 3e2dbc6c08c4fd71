"""Admission on the real broker: admissions/s with 0 % and 50 % duplicates, produce→reply
latency p50/p99, and a raw confluent-kafka transactional consume→produce loop measured in the
same run as the baseline (same broker, same batch size, one output per input).

    python -m benchmarks.admission          # prints the numbers as JSON

``run(settings) -> dict``; every phase gets its own topic prefix, deleted afterwards.
Throughput phases pre-load the input, start the consumer-side loop, and time from the loop's
first assignment to the last committed reply seen by a read_committed watcher.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from runplane.config import Settings
from runplane.kafka.clients import (
    admin,
    consumer_config,
    producer_config,
    transactional_producer_config,
)
from runplane.kafka.topics import create_topics, delete_topics
from runplane.kafka.txn import TransactionalProducer
from runplane.runs.client import ready_batch
from runplane.wire import AdmissionRequest, TenantId, serde_for
from services.admission.decide import CapabilitySpec
from services.admission.serve import build
from services.admission.settings import AdmissionSettings

N = int(os.environ.get("RUNPLANE_BENCH_ADMISSIONS", "5000"))
PACED_RATE = 200  # requests/s for the latency phase: well below capacity
PACED_S = 5.0
BATCH_MAX = 500
CAPS = {"bench": CapabilitySpec({"type": "object"})}
SERDE = serde_for(Settings())


@contextmanager
def _topics(base: Settings) -> Iterator[Settings]:
    settings = dataclasses.replace(base, topic_prefix=f"bench{uuid.uuid4().hex[:8]}.")
    client = admin(settings)
    create_topics(settings, client)
    try:
        yield settings
    finally:
        delete_topics(settings, client)


def _request(key: str) -> bytes:
    req = AdmissionRequest(
        admission_key=key,
        capability="bench",
        input_json='{"n": 1}',
        tenant=TenantId("bench"),
        initiator="bench",
        requested_ms=time.time_ns() // 1_000_000,
    )
    return SERDE.encode("admission", req)


def _produce(settings: Settings, keys: list[str], sent: dict[str, float] | None = None) -> None:
    producer = Producer(producer_config(settings, linger_ms=5))
    topic = settings.topic("admission")
    for key in keys:
        while True:
            try:
                producer.produce(topic, key=key.encode(), value=_request(key))
                break
            except BufferError:
                producer.poll(0.05)
        if sent is not None:
            sent[key] = time.monotonic()
            producer.poll(0)
    assert producer.flush(60) == 0


class _Watcher:
    """Counts committed records on a topic; notes when each key's first one arrived."""

    def __init__(self, settings: Settings, logical: str) -> None:
        topic = settings.topic(logical)
        self._consumer = Consumer(
            consumer_config(settings, f"bench-watch-{uuid.uuid4().hex[:8]}", fetch_wait_max_ms=5)
        )
        parts = self._consumer.list_topics(topic, timeout=10).topics[topic].partitions
        self._consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        self.count = 0
        self.first_seen: dict[str, float] = {}
        self.last_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for msg in ready_batch(self._consumer, 1000, 0.05):
                if msg.error() is not None:
                    continue
                now = time.monotonic()
                self.count += 1
                self.last_at = now
                self.first_seen.setdefault((msg.key() or b"").decode(), now)

    def wait_for(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.count < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"saw {self.count} of {n} records after {timeout}s")
            time.sleep(0.01)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


def _run_admission(settings: Settings, body: Callable[[threading.Event], None]) -> None:
    processor = build(
        AdmissionSettings(base=settings, batch_max=BATCH_MAX, batch_ms=20, allow_unsigned=True),
        capabilities=CAPS,
    )
    stop = threading.Event()
    thread = threading.Thread(target=processor.run, args=(stop,), daemon=True)
    thread.start()
    try:
        if not processor.ready.wait(120):
            raise TimeoutError("admission never got its partitions")
        body(processor.ready)
    finally:
        stop.set()
        thread.join(60)


def _throughput(base: Settings, duplicate_share: float) -> dict[str, Any]:
    distinct = round(N * (1 - duplicate_share))
    keys = [f"k{i}" for i in range(distinct)]
    keys += [f"k{i % distinct}" for i in range(N - distinct)]
    with _topics(base) as settings:
        _produce(settings, keys)
        watcher = _Watcher(settings, "admission.replies")
        started: list[float] = []
        try:

            def body(_: threading.Event) -> None:
                started.append(time.monotonic())
                watcher.wait_for(N, 300)

            _run_admission(settings, body)
            elapsed = watcher.last_at - started[0]
        finally:
            watcher.close()
    return {
        "requests": N,
        "duplicates": N - distinct,
        "seconds": round(elapsed, 3),
        "admissions_per_s": round(N / elapsed, 1),
    }


def _latency(base: Settings) -> dict[str, Any]:
    count = int(PACED_RATE * PACED_S)
    keys = [f"lat{i}" for i in range(count)]
    sent: dict[str, float] = {}
    with _topics(base) as settings:
        watcher = _Watcher(settings, "admission.replies")
        try:

            def body(_: threading.Event) -> None:
                step = 1.0 / PACED_RATE
                producer = Producer(producer_config(settings, linger_ms=0))
                # Warm-up (not measured): the first transaction to each output partition
                # pays for metadata and AddPartitionsToTxn round trips.
                warm = [f"warm{i}" for i in range(100)]
                for key in warm:
                    producer.produce(
                        settings.topic("admission"), key=key.encode(), value=_request(key)
                    )
                producer.flush(30)
                watcher.wait_for(len(warm), 60)
                t0 = time.monotonic()
                for i, key in enumerate(keys):
                    delay = t0 + i * step - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    producer.produce(
                        settings.topic("admission"), key=key.encode(), value=_request(key)
                    )
                    sent[key] = time.monotonic()
                    producer.poll(0)
                producer.flush(30)
                watcher.wait_for(count + len(warm), 120)

            _run_admission(settings, body)
            lat = sorted((watcher.first_seen[k] - sent[k]) * 1000 for k in keys)
        finally:
            watcher.close()
    return {
        "requests": count,
        "rate_per_s_offered": PACED_RATE,
        "reply_p50_ms": round(statistics.median(lat), 2),
        "reply_p99_ms": round(lat[int(0.99 * (len(lat) - 1))], 2),
        "reply_max_ms": round(lat[-1], 2),
    }


def _baseline(base: Settings) -> dict[str, Any]:
    """The same shape of work with no runplane in it: consume a batch, produce one record per
    input, send offsets with the group metadata, commit."""
    keys = [f"b{i}" for i in range(N)]
    with _topics(base) as settings:
        _produce(settings, keys)
        watcher = _Watcher(settings, "admission.replies")
        consumer = Consumer(consumer_config(settings, settings.topic("baseline")))
        producer = TransactionalProducer(
            transactional_producer_config(settings, f"baseline-{uuid.uuid4().hex[:8]}")
        )
        producer.init()
        assigned: list[float] = []
        # Timed from the assignment, like admission (from its processor's ``ready``).
        consumer.subscribe(
            [settings.topic("admission")], on_assign=lambda *_: assigned.append(time.monotonic())
        )
        out = settings.topic("admission.replies")
        deadline = time.monotonic() + 300
        try:
            while watcher.count < N and time.monotonic() < deadline:
                msgs = [m for m in ready_batch(consumer, BATCH_MAX, 0.1) if m.error() is None]
                if not msgs:
                    continue
                producer.begin()
                offsets: dict[tuple[str, int], int] = {}
                for m in msgs:
                    producer.produce(out, m.key(), m.value(), m.partition())
                    offsets[(m.topic() or "", m.partition() or 0)] = (m.offset() or 0) + 1
                tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
                producer.commit(tps, consumer.consumer_group_metadata())
            watcher.wait_for(N, 60)
            elapsed = watcher.last_at - assigned[0]
        finally:
            watcher.close()
            consumer.close()
    return {"messages": N, "seconds": round(elapsed, 3), "messages_per_s": round(N / elapsed, 1)}


def run(settings: Settings | None = None) -> dict[str, Any]:
    base = settings if settings is not None else Settings.from_env()
    baseline = _baseline(base)
    fresh = _throughput(base, 0.0)
    half = _throughput(base, 0.5)
    latency = _latency(base)
    per_s = baseline["messages_per_s"]
    return {
        "baseline": baseline,
        "no_duplicates": fresh,
        "half_duplicates": half,
        "latency": latency,
        "ratio_no_duplicates_vs_baseline": round(fresh["admissions_per_s"] / per_s, 3),
        "ratio_half_duplicates_vs_baseline": round(half["admissions_per_s"] / per_s, 3),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
