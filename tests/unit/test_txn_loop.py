"""The loop skeleton's pure-ish parts against stub consumers: adaptive batches, stopping."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from runplane.config import Settings
from runplane.kafka.loop import LoopConfig, LoopHooks, TxnLoop
from runplane.kafka.restore import Stopping, await_previous_owner


class StubConsumer:
    """poll() hands out ``first``; each consume(timeout=0) the next of ``rounds``."""

    def __init__(self, first: Any, rounds: list[list[Any]]) -> None:
        self.first = first
        self.rounds = rounds
        self.timeouts: list[float] = []

    def poll(self, timeout: float) -> Any:
        self.timeouts.append(timeout)
        return self.first

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        self.timeouts.append(timeout)
        return self.rounds.pop(0) if self.rounds else []


def _loop(consumer: StubConsumer) -> TxnLoop:
    loop = TxnLoop(
        Settings(),
        LoopConfig(service="t", group_id="g", topics=("in",), transactional_id="t-0"),
        LoopHooks(restore=lambda parts, deadline: None, revoke=lambda parts, lost: None),
    )
    loop._consumer = consumer  # type: ignore[assignment]
    return loop


def test_a_lone_record_is_taken_at_once_without_waiting_for_more() -> None:
    consumer = StubConsumer("m1", [])
    assert _loop(consumer).take(wait_s=0.1, max_records=500, max_s=1.0) == ["m1"]
    assert consumer.timeouts == [0.1, 0]  # the one wait is for the first record


def test_a_batch_grows_while_records_keep_waiting_and_stops_when_drained() -> None:
    consumer = StubConsumer("m1", [["m2", "m3"], ["m4"], [], ["never"]])
    assert _loop(consumer).take(wait_s=0.1, max_records=500, max_s=1.0) == [
        "m1",
        "m2",
        "m3",
        "m4",
    ]
    assert all(t == 0 for t in consumer.timeouts[1:])


def test_a_batch_is_bounded_by_max_records() -> None:
    consumer = StubConsumer("m1", [["m2", "m3"], ["m4"]])
    assert len(_loop(consumer).take(wait_s=0.1, max_records=3, max_s=1.0)) == 3


def test_nothing_waiting_is_an_empty_batch() -> None:
    assert _loop(StubConsumer(None, [["x"]])).take(wait_s=0.1, max_records=5, max_s=1.0) == []


class NeverStable:
    """committed() keeps timing out, as while a previous owner's transaction stays open."""

    def __init__(self, stop: threading.Event, after: int) -> None:
        self.calls = 0
        self.stop = stop
        self.after = after

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.calls += 1
        assert timeout <= 1.0  # asks again at least every second, to see the stop
        if self.calls == self.after:
            self.stop.set()
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))


def test_a_stop_ends_the_wait_for_the_previous_owner() -> None:
    stop = threading.Event()
    consumer = NeverStable(stop, after=3)
    with pytest.raises(Stopping):
        await_previous_owner(
            consumer,  # type: ignore[arg-type]
            [TopicPartition("in", 0)],
            timeout_s=120.0,
            stop=stop,
        )
    assert consumer.calls == 3
