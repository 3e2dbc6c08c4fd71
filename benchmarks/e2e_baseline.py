"""The raw-Kafka baseline of ``benchmarks.e2e``: the run's path with no runplane in it.

A request goes ``admission`` → hop 1 → ``runs.inbox`` → hop 2 → ``sessions``, where the
watcher times it: two plain confluent-kafka consume→produce loops with the services'
transactional discipline (read_committed consumer, one transactional producer,
``send_offsets_to_transaction`` with the group metadata). Each hop takes whatever input is
ready and commits at once (``ready_batch``): the best a transactional hop can do when quiet,
and batches as large as the backlog under load. Threads of this process, like the services.
Its consumers (and the watcher's) cap a fetch's wait at 5 ms, as the other benchmarks'
watchers do (the executor's consumer: 20 ms).
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from confluent_kafka import Consumer, Message, Producer

from benchmarks.e2e_cpu import CpuMeter
from benchmarks.e2e_drive import Watcher, closed_loop
from runplane.config import Settings
from runplane.kafka.clients import consumer_config, producer_config, transactional_producer_config
from runplane.kafka.txn import TransactionalProducer
from runplane.runs.client import ready_batch

BATCH_MAX = 500
PAYLOAD = b"x" * 300  # about an AdmissionRequest / SessionSnapshot


def _hop(
    settings: Settings, source: str, sink: str, stop: threading.Event, ready: threading.Event
) -> None:
    txp = TransactionalProducer(
        transactional_producer_config(settings, f"bench-hop-{uuid.uuid4().hex[:8]}", linger_ms=0)
    )
    txp.init()
    consumer = Consumer(
        consumer_config(settings, f"{settings.topic_prefix}{source}.hop", fetch_wait_max_ms=5)
    )
    consumer.subscribe([source], on_assign=lambda *_: ready.set())
    try:
        while not stop.is_set():
            msgs = [m for m in ready_batch(consumer, BATCH_MAX, 0.1) if m.error() is None]
            if not msgs:
                continue
            txp.begin()
            for msg in msgs:
                txp.produce(sink, msg.key(), PAYLOAD)
            positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            txp.commit(positions, consumer.consumer_group_metadata())
    finally:
        consumer.close()


@contextmanager
def _hops(settings: Settings) -> Iterator[None]:
    stop = threading.Event()
    path = [settings.topic(n) for n in ("admission", "runs.inbox", "sessions")]
    threads, readies = [], []
    for source, sink in itertools.pairwise(path):
        ready = threading.Event()
        t = threading.Thread(target=_hop, args=(settings, source, sink, stop, ready), daemon=True)
        t.start()
        threads.append(t)
        readies.append(ready)
    try:
        for ready in readies:
            if not ready.wait(60):
                raise TimeoutError("a baseline hop never got its partitions")
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(30)


def _judge(msg: Message) -> tuple[str | None, dict[str, float]]:
    return (msg.key() or b"").decode(), {}


def measure(settings: Settings, levels: Sequence[tuple[int, int]], warm: int) -> dict[str, Any]:
    """The same closed loops as the runplane measurement, on the raw path."""
    producer = Producer(producer_config(settings, linger_ms=0))
    topic = settings.topic("admission")

    def send(key: str) -> None:
        producer.produce(topic, key=key.encode(), value=PAYLOAD)
        producer.poll(0)

    watcher = Watcher(settings, [settings.topic("sessions")], _judge)
    # The hops are threads of this process, like the driver.
    meter = CpuMeter.with_broker(settings, {"hops and driver": os.getpid()})
    try:
        with _hops(settings):
            first = closed_loop(send, watcher, in_flight=16, total=warm, tag="raw-warm")
            measured = [
                meter.level(
                    total,
                    partial(
                        closed_loop, send, watcher, in_flight=n, total=total, tag=f"raw{i}-{n}"
                    ),
                )
                for i, (n, total) in enumerate(levels)
            ]
    finally:
        watcher.close()
        producer.flush(10)
    return {"warm_up_runs_per_s": first.runs_per_s, "levels": measured}
