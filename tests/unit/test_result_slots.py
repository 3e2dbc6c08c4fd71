"""A result entry is refused where it is written when its slot holds another call's result.

``results`` is compacted on the slot (session, era, call_seq): a second, different entry would
silently replace the body the chain recorded. The executor's run table refuses it
(``SlotTaken``) before the outbox produces anything, so the step's serving fails (the poison
path) instead; the same call's entry again (a re-applied step) is no conflict.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from runplane.errors import ChainError
from services.executor.outbox import RunSink
from services.executor.state import PartitionState, SlotTaken
from tests.helpers.sample import sample_entry

pytestmark = pytest.mark.unit


class _Outbox:
    """Records what would be produced."""

    def __init__(self) -> None:
        self.produced: list[tuple[str, str]] = []

    def record(self, topic: str, key: str, value: Any, now: float, **kw: Any) -> None:
        self.produced.append((topic, key))


class _Table:
    def __init__(self) -> None:
        self.parts = {0: PartitionState()}


def test_another_calls_result_for_a_held_slot_is_refused_before_it_is_produced() -> None:
    outbox, table = _Outbox(), _Table()
    sink = RunSink(outbox, table, "r-1", 0)  # type: ignore[arg-type]
    first = sample_entry("r-1", 1, {"n": 1})
    sink.put_results((first,))
    assert outbox.produced == [("results", "r-1/0/1")]
    other = dataclasses.replace(sample_entry("r-1", 1, {"n": 2}), request_witness="b" * 64)
    with pytest.raises(SlotTaken, match="slot 0/1 of run r-1") as caught:
        sink.put_results((other,))
    assert isinstance(caught.value, ChainError)
    assert outbox.produced == [("results", "r-1/0/1")]  # nothing more reached the topic
    assert table.parts[0].results["r-1"][(0, 1)] is first


def test_the_same_calls_entry_again_and_other_slots_are_written() -> None:
    part = PartitionState()
    part.put_result(sample_entry("r-1", 1, {"n": 1}))
    part.put_result(sample_entry("r-1", 1, {"n": 1}))
    part.put_result(sample_entry("r-1", 1, {"n": 1}, era=1))
    part.put_result(sample_entry("r-2", 1, {"n": 9}))
    assert sorted(part.results["r-1"]) == [(0, 1), (1, 1)] and list(part.results["r-2"]) == [(0, 1)]
