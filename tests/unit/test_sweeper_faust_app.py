"""The sweeper's Faust app: configured to declare nothing, serve nothing and place keys with
murmur2 exactly as every other runplane producer does. No broker needed: nothing here starts."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import cast

import faust
import pytest
from aiokafka.partitioner import DefaultPartitioner
from hypothesis import given
from hypothesis import strategies as st

from runplane.config import Settings
from runplane.kafka.partition import partition_for
from services.sweeper.faust_app import SweeperApp, broker_urls, murmur2_partitioner

pytestmark = pytest.mark.unit


@given(key=st.binary(min_size=0, max_size=64), n=st.integers(1, 64))
def test_placement_is_runplane_murmur2_and_aiokafka_default(key: bytes, n: int) -> None:
    parts = list(range(n))
    ours = murmur2_partitioner(key, parts, parts)
    assert ours == partition_for(key, n)
    assert ours == DefaultPartitioner()(key, parts, parts)


def test_placement_of_a_known_key() -> None:
    # Measured: b"session-1" over 12 partitions lands on 4 with murmur2 (10 with CRC32).
    assert murmur2_partitioner(b"session-1", list(range(12)), []) == 4


def test_a_keyless_record_is_refused() -> None:
    with pytest.raises(ValueError):
        murmur2_partitioner(None, [0, 1], [0, 1])


def test_broker_urls() -> None:
    assert broker_urls("a:1, b:2,") == ["kafka://a:1", "kafka://b:2"]


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_app_declares_nothing_serves_nothing_and_is_isolated_by_prefix(
    tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> None:
    base = replace(Settings(), topic_prefix="t1234.", instance_id="i-1", state_dir=tmp_path)
    built = SweeperApp(base, loop)
    conf = built.app.conf
    assert conf.id == "t1234.sweeper"  # = the consumer group
    assert conf.web_enabled is False
    assert conf.topic_allow_declare is False
    assert conf.topic_disable_leader is True
    assert str(conf.processing_guarantee.value) == "at_least_once"
    # mypy reads this setting as a method (its value is a callable): compare as objects.
    assert cast(object, conf.producer_partitioner) is murmur2_partitioner
    assert [str(u) for u in conf.broker] == ["kafka://127.0.0.1:19092"]
    assert Path(conf.datadir).parent == tmp_path / "faust"
    assert built.app.tables.changelog_topics == set()
    for topic, logical in (
        (built.cases, "cases"),
        (built.commands, "cases.commands"),
        (built.deadletter, "deadletter"),
    ):
        assert isinstance(topic, faust.Topic)
        assert topic.get_topic_name() == f"t1234.{logical}"
        assert (topic.key_serializer, topic.value_serializer) == ("raw", "raw")
