"""runplane.kafka.feed.TopicFeed on the real broker: a whole topic folded into a store, read
again from the beginning when the store's offsets vanish.

The store here is a dict (the loop is what is tested; the journal's run index and the
worklist's read model test their Redis stores on the same loop in their own suites).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence

import pytest
from confluent_kafka import Message, Producer

from runplane.config import Settings
from runplane.kafka.clients import producer_config
from runplane.kafka.feed import TopicFeed

pytestmark = pytest.mark.integration

TOPIC = "admission"  # any topic of the catalogue: the feed reads bytes


class DictFeed(TopicFeed):
    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, TOPIC, reader="test-feed", retry_on=(ConnectionError,))
        self.lock = threading.Lock()
        self.rows: dict[tuple[int, int], bytes | None] = {}
        self.offsets: dict[int, int] | None = None
        self.rebuilds = 0
        self.fail_next = 0

    def stored_offsets(self) -> Mapping[int, int] | None:
        with self.lock:
            if self.fail_next:
                self.fail_next -= 1
                raise ConnectionError("store away")
            return None if self.offsets is None else dict(self.offsets)

    def start_rebuild(self) -> None:
        with self.lock:
            self.rebuilds += 1
            self.rows.clear()
            self.offsets = {}

    def apply(self, messages: Sequence[Message], offsets: Mapping[int, int]) -> None:
        with self.lock:
            for m in messages:
                value = m.value()
                self.rows[(m.partition() or 0, m.offset() or 0)] = (
                    value.encode() if isinstance(value, str) else value
                )
            assert self.offsets is not None
            self.offsets.update(offsets)

    def values(self) -> set[bytes | None]:
        with self.lock:
            return set(self.rows.values())


def _produce(settings: Settings, n: int, tag: str) -> None:
    producer = Producer(producer_config(settings))
    for i in range(n):
        producer.produce(settings.topic(TOPIC), key=f"k{i}", value=f"{tag}{i}".encode())
    assert producer.flush(30) == 0


def _wait(cond: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(cond) and cond():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.fixture
def running(settings: Settings) -> Iterator[DictFeed]:
    feed = DictFeed(settings)
    stop = threading.Event()
    thread = threading.Thread(target=feed.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield feed
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive()


def test_reads_every_partition_to_its_end_and_rebuilds_when_offsets_vanish(
    settings: Settings, running: DictFeed
) -> None:
    _produce(settings, 40, "a")
    expected = {f"a{i}".encode() for i in range(40)}
    _wait(lambda: running.values() == expected)
    assert running.caught_up.wait(30)
    assert running.rebuilds == 1  # the store was missing at start
    with running.lock:
        assert running.offsets is not None
        # every partition's next offset is stored, one past its last record
        by_partition: dict[int, int] = {}
        for p, o in running.rows:
            by_partition[p] = max(by_partition.get(p, -1), o + 1)
        assert {p: o for p, o in running.offsets.items() if p in by_partition} == by_partition
        assert len(running.offsets) == settings.partitions  # EOF offsets of empty ones too
        running.offsets = None  # "Redis flushed"
        running.rows.clear()
    _produce(settings, 5, "b")
    expected |= {f"b{i}".encode() for i in range(5)}
    _wait(lambda: running.values() == expected)
    assert running.rebuilds == 2


def test_a_store_error_it_retries_on_does_not_end_the_loop(
    settings: Settings, running: DictFeed
) -> None:
    _produce(settings, 3, "c")
    _wait(lambda: len(running.values()) == 3)
    with running.lock:
        running.fail_next = 2
    _produce(settings, 3, "d")
    _wait(lambda: len(running.values()) == 6)
    assert running.fail_next == 0
