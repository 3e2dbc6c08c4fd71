"""Drive a closed loop of runs and watch them end: shared by ``benchmarks.e2e`` and its
raw-Kafka baseline, so both are timed by the same code.

The loop keeps ``in_flight`` requests outstanding: it sends that many, then one more each
time one completes, until ``total`` have completed. A request's latency is from just before
its produce to the moment its completion record is readable (read_committed) by the watcher;
throughput is completions over the time from the first send to the last completion.

The watcher follows its topics from their end as it was when it started (one ListOffsets
request, read_committed: the last stable offset) and uses ``ready_batch``, so it hands a
record on as soon as it arrives rather than after a consume timeout.
"""

from __future__ import annotations

import queue
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Message, TopicPartition

from runplane.config import Settings
from runplane.kafka.clients import consumer_config
from runplane.runs.client import last_stable_offsets, ready_batch

# What a watcher makes of one record: the request key it completes (or None), and any
# timestamps worth keeping for the per-hop breakdown (name -> seconds since the epoch).
Judge = Callable[[Message], tuple[str | None, dict[str, float]]]


@dataclass
class Stamps:
    """Per request key: when it was sent and what the watcher saw (epoch seconds)."""

    sent: dict[str, float] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)
    hops: dict[str, dict[str, float]] = field(default_factory=dict)
    #: request key -> the key of the record that completed it (a run id, for runplane)
    record_key: dict[str, str] = field(default_factory=dict)


class Watcher:
    """Follows ``topics`` from their current end in a thread; queues each completed key."""

    def __init__(self, settings: Settings, topics: Iterable[str], judge: Judge) -> None:
        self._consumer = Consumer(
            consumer_config(
                settings, f"bench-e2e-watch-{uuid.uuid4().hex[:8]}", fetch_wait_max_ms=5
            )
        )
        asked = []
        for topic in topics:
            parts = self._consumer.list_topics(topic, timeout=10).topics[topic].partitions
            asked += [TopicPartition(topic, p) for p in parts]
        # Resolve the end now, so a record produced right after this returns is never missed.
        ends = last_stable_offsets(self._consumer, asked)
        self._consumer.assign(
            [
                TopicPartition(tp.topic, tp.partition, end)
                for tp, end in zip(asked, ends, strict=True)
            ]
        )
        self._judge = judge
        self.stamps = Stamps()
        self.completed: queue.Queue[str] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-watch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for msg in ready_batch(self._consumer, 1000, 0.1):
                if msg.error() is not None or msg.value() is None:
                    continue
                now = time.time()
                key, hops = self._judge(msg)
                if hops:
                    for name, at in hops.items():
                        self.stamps.hops.setdefault(name, {}).setdefault(_hop_key(msg), at)
                if key is not None and key not in self.stamps.done:
                    self.stamps.done[key] = now
                    self.stamps.record_key[key] = _hop_key(msg)
                    self.completed.put(key)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


def _hop_key(msg: Message) -> str:
    return (msg.key() or b"").decode("utf-8", "replace")


@dataclass(frozen=True)
class Level:
    """One measured point: a closed loop at ``in_flight`` for ``total`` completions."""

    in_flight: int
    total: int
    p50_ms: float
    p99_ms: float
    runs_per_s: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "in_flight": self.in_flight,
            "runs": self.total,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "runs_per_s": self.runs_per_s,
        }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def closed_loop(
    send: Callable[[str], None],
    watcher: Watcher,
    *,
    in_flight: int,
    total: int,
    tag: str,
    timeout_s: float = 120.0,
) -> Level:
    """Keep ``in_flight`` requests outstanding until ``total`` complete; keys ``tag-<i>``."""
    stamps = watcher.stamps
    keys = [f"{tag}-{i}" for i in range(total)]
    mine = set(keys)
    sent = 0

    def one() -> None:
        nonlocal sent
        key = keys[sent]
        stamps.sent[key] = time.time()
        send(key)
        sent += 1

    began = time.time()
    for _ in range(min(in_flight, total)):
        one()
    completed = 0
    while completed < total:
        try:
            key = watcher.completed.get(timeout=timeout_s)
        except queue.Empty:
            raise TimeoutError(
                f"{tag}: {total - completed} of {total} runs never completed"
            ) from None
        if key not in mine:
            continue  # a straggler of an earlier level
        completed += 1
        if sent < total:
            one()
    last = max(stamps.done[k] for k in keys)
    lat = [(stamps.done[k] - stamps.sent[k]) * 1000 for k in keys]
    return Level(
        in_flight=in_flight,
        total=total,
        p50_ms=round(statistics.median(lat), 1),
        p99_ms=round(percentile(lat, 0.99), 1),
        runs_per_s=round(total / max(1e-9, last - began), 1),
    )
