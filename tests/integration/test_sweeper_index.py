"""The due-time index on the real Redis: replace per case, postpone only what is still there,
and the read position stored with the index (gone with it on a flush)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis
from test_cases_support import redis_url

from services.sweeper.decide import Entry
from services.sweeper.index import DueIndex

pytestmark = pytest.mark.integration


@pytest.fixture
def index(stack: object) -> Iterator[DueIndex]:
    client = redis.Redis.from_url(redis_url(13))
    namespace = f"t{uuid.uuid4().hex[:8]}."
    yield DueIndex(client, namespace)
    leftovers = list(client.scan_iter(f"runplane:sweeper:{namespace}*"))
    if leftovers:
        client.delete(*leftovers)


def test_apply_replaces_a_cases_entries_and_records_the_offset(index: DueIndex) -> None:
    warn = Entry(100, "c1", "a", 200, "warn")
    breach = Entry(200, "c1", "a", 200, "breach")
    other = Entry(150, "c2", "b", 150, "breach")
    assert index.offset(0) is None
    index.apply(0, {"c1": [warn, breach], "c2": [other]}, next_offset=7)
    assert index.offset(0) == 7
    assert index.due(0, 160) == [warn, other]
    # c1 was warned: only its breach entry remains; c2 was met: nothing remains.
    index.apply(0, {"c1": [breach], "c2": []}, next_offset=9)
    assert index.due(0, 10_000) == [breach]
    assert index.size(0) == 1 and index.offset(0) == 9


def test_postpone_does_not_resurrect_a_replaced_entry(index: DueIndex) -> None:
    breach = Entry(200, "c1", "a", 200, "breach")
    index.apply(1, {"c1": [breach]}, next_offset=1)
    index.postpone(1, [breach], until_ms=500)
    assert index.due(1, 499) == []
    assert index.due(1, 500) == [Entry(500, "c1", "a", 200, "breach")]
    index.apply(1, {"c1": []}, next_offset=2)  # the case answered: breached
    index.postpone(1, [breach], until_ms=900)  # a late postpone from a slow tick
    assert index.due(1, 10_000) == []


def test_reset_forgets_the_partition(index: DueIndex) -> None:
    index.apply(2, {"c1": [Entry(1, "c1", "a", 1, "breach")]}, next_offset=5)
    index.reset(2)
    assert index.offset(2) == 0
    assert index.due(2, 10) == []
