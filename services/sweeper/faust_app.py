"""The Faust app the sweeper runs on: its configuration and its topics, nothing else.

Checked against faust-streaming 0.15.3's source:

- **App id = consumer group id** (``conf.id`` is passed to aiokafka as ``group_id``), so it is
  derived from the topic prefix (:func:`services.sweeper.topology.group_id`): deployments and
  tests with their own prefix never share a group.
- **No topic is ever created.** ``topic_allow_declare=False`` (our broker runs with
  ``auto.create.topics.enable=false`` and topics come from ``runplane topics create``);
  ``topic_disable_leader=True`` drops the ``<id>-__assignor-__leader`` topic the leader
  assignor would declare; no tables, so no changelog topics; ``reply_create_topic`` stays off.
  Without tables or standbys the worker consumer uses aiokafka's round-robin assignor.
- **No web server** (``web_enabled=False``): ``/healthz`` and ``/metrics`` come from
  ``runplane.serving.shell`` on the sweeper's port, like every other service.
- **Placement = murmur2**, as every runplane producer: :func:`murmur2_partitioner` is
  :func:`runplane.kafka.partition_for`, so a decision lands on its case's partition of
  ``cases.commands`` exactly where librdkafka's ``murmur2_random`` and Java put it.
- **Raw bytes on the wire**: the ``raw`` codec hands us the record bytes, decoded and encoded
  by :class:`runplane.wire.Serde` (never Faust's JSON codec, which would quote keys).
- ``processing_guarantee`` stays ``at_least_once``: the consumer then reads
  ``read_uncommitted`` (see :mod:`services.sweeper.sweeper` for why that is tolerated).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import faust

from runplane.config import Settings
from runplane.kafka.clients import faust_credentials
from runplane.kafka.partition import partition_for
from services.sweeper.topology import DEADLETTER, INPUT, OUTPUT, SERVICE, group_id

__all__ = ["SweeperApp", "broker_urls", "murmur2_partitioner"]


def murmur2_partitioner(
    key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]
) -> int:
    """aiokafka's partitioner hook, placing keys as Java and ``murmur2_random`` do."""
    if key is None:
        # Every record the sweeper sends is keyed by its case; a keyless one is a bug here.
        raise ValueError("the sweeper never produces a record without a key")
    ordered = sorted(all_partitions)
    return ordered[partition_for(key, len(ordered))]


def broker_urls(bootstrap_servers: str) -> list[str]:
    """``host:port,host:port`` → Faust's ``kafka://host:port`` URLs."""
    return [f"kafka://{hp.strip()}" for hp in bootstrap_servers.split(",") if hp.strip()]


class SweeperApp:
    """A configured Faust app and the three topics the sweeper uses (all raw bytes)."""

    def __init__(self, base: Settings, loop: asyncio.AbstractEventLoop) -> None:
        datadir = base.state_dir / "faust" / f"{group_id(base)}-{base.instance_id}"
        # Faust makes its data directories on first start (one level, no parents); with no
        # tables they stay empty, and the sweeper removes them when it stops.
        datadir.parent.mkdir(parents=True, exist_ok=True)
        self.datadir = datadir
        self.app = faust.App(
            group_id(base),
            broker=broker_urls(base.bootstrap_servers),
            broker_credentials=faust_credentials(base),  # RUNPLANE_KAFKA_*, as every client
            loop=loop,
            broker_client_id=f"runplane-{SERVICE}-{base.instance_id}",
            processing_guarantee="at_least_once",
            consumer_auto_offset_reset="earliest",
            producer_partitioner=murmur2_partitioner,
            producer_acks=-1,
            topic_allow_declare=False,
            topic_disable_leader=True,
            web_enabled=False,
            datadir=str(datadir),
        )
        self.cases = self._raw(base.topic(INPUT))
        self.commands = self._raw(base.topic(OUTPUT))
        self.deadletter = self._raw(base.topic(DEADLETTER))

    def _raw(self, name: str) -> faust.TopicT:
        return self.app.topic(name, key_serializer="raw", value_serializer="raw")
