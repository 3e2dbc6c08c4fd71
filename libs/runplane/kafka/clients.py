"""Configuration factories for every confluent-kafka client runplane creates.

Every service, CLI command and test builds its clients here, so the platform-wide choices are
made once:

* producers use ``partitioner=murmur2_random`` (Java's, aiokafka's and Faust's placement; the
  librdkafka default ``consistent_random`` would put a key on another partition), are
  idempotent and wait for ``acks=all``;
* consumers read ``read_committed``, never auto-commit (offsets are committed in the
  transaction that made their outputs durable, or explicitly after the work), and start from
  the earliest offset when their group is new.

Extra settings are passed as keyword arguments; an underscore in a keyword stands for a dot
(``linger_ms=0`` → ``linger.ms``), and dotted names can be passed with ``**{"linger.ms": 0}``.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import AdminClient

from runplane.config import Settings

ClientConfig = dict[str, Any]


def _normalise(extra: dict[str, Any]) -> ClientConfig:
    return {key.replace("_", "."): value for key, value in extra.items()}


def _common(settings: Settings, role: str) -> ClientConfig:
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "client.id": f"runplane-{role}-{settings.instance_id}",
    }


def producer_config(settings: Settings, **extra: Any) -> ClientConfig:
    """An idempotent producer placing keys with murmur2, like every other client of ours."""
    return {
        **_common(settings, "producer"),
        "partitioner": "murmur2_random",
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        **_normalise(extra),
    }


def transactional_producer_config(
    settings: Settings, transactional_id: str, **extra: Any
) -> ClientConfig:
    """A transactional producer; ``transactional_id`` must be stable per instance.

    A restarted instance with the same id aborts its predecessor's open transaction at
    ``init_transactions()``; with a random id, read_committed readers would stall at the last
    stable offset until the old transaction timed out.
    """
    if not transactional_id:
        raise ValueError("transactional_id must not be empty")
    return producer_config(
        settings,
        **{
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60_000,
            **_normalise(extra),
        },
    )


def consumer_config(settings: Settings, group_id: str, **extra: Any) -> ClientConfig:
    """A read_committed consumer with auto commit off, starting at the earliest offset."""
    return {
        **_common(settings, "consumer"),
        "group.id": group_id,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **_normalise(extra),
    }


def admin_config(settings: Settings, **extra: Any) -> ClientConfig:
    return {**_common(settings, "admin"), **_normalise(extra)}


def admin(settings: Settings, **extra: Any) -> AdminClient:
    """An AdminClient for ``settings``' cluster."""
    return AdminClient(admin_config(settings, **extra))
