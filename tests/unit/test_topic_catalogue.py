"""The topic catalogue and the client factories: pure values, checked against docs/design.md."""

from __future__ import annotations

import pytest

from runplane.config import Settings
from runplane.errors import ConfigError
from runplane.kafka.clients import (
    consumer_config,
    producer_config,
    transactional_producer_config,
)
from runplane.kafka.topics import (
    CATALOGUE,
    COMPACTED,
    FAST_COMPACTION,
    expected_config,
    fast_compaction_overrides,
    topic_name,
    topic_names,
)

DESIGN_TOPICS = {
    "admission", "admission.claims", "admission.replies", "runs.inbox", "journal", "results",
    "sessions", "cases.commands", "cases", "tasks.commands", "tasks", "schedules",
    "schedules.fired", "runs.stream", "runs.updates", "audit", "deadletter",
}  # fmt: skip


def test_the_catalogue_is_every_topic_of_the_design() -> None:
    assert {t.name for t in CATALOGUE} == DESIGN_TOPICS
    assert {
        "admission.claims",
        "results",
        "sessions",
        "cases",
        "tasks",
        "schedules",
        "schedules.fired",
    } == COMPACTED


def test_state_never_expires_and_the_journal_is_kept_forever() -> None:
    settings = Settings()
    for name in COMPACTED:
        assert expected_config(settings, name) == {"cleanup.policy": "compact"}
    assert expected_config(settings, "journal")["retention.ms"] == "-1"
    assert int(expected_config(settings, "audit")["retention.ms"]) >= 365 * 86_400_000
    # The live stream is a view: bounded, a day.
    assert expected_config(settings, "runs.stream")["retention.ms"] == str(86_400_000)


def test_names_carry_the_prefix() -> None:
    settings = Settings(topic_prefix="acme.")
    assert topic_name(settings, "runs.inbox") == "acme.runs.inbox"
    assert topic_names(settings)["journal"] == "acme.journal"
    with pytest.raises(ConfigError):
        topic_name(settings, "nope")


def test_overrides_and_replicated_clusters() -> None:
    overrides = fast_compaction_overrides(["sessions"])
    config = expected_config(Settings(replication_factor=3), "sessions", overrides)
    assert config == {"cleanup.policy": "compact", "min.insync.replicas": "2", **FAST_COMPACTION}


def test_every_producer_places_keys_with_murmur2() -> None:
    settings = Settings(instance_id="i-1")
    for config in (producer_config(settings), transactional_producer_config(settings, "x-0")):
        assert config["partitioner"] == "murmur2_random"
        assert config["enable.idempotence"] is True
    txn = transactional_producer_config(settings, "exec-0", linger_ms=0)
    assert txn["transactional.id"] == "exec-0" and txn["linger.ms"] == 0
    with pytest.raises(ValueError):
        transactional_producer_config(settings, "")


def test_consumers_read_committed_and_never_auto_commit() -> None:
    config = consumer_config(Settings(), "g", **{"enable.partition.eof": True})
    assert config["isolation.level"] == "read_committed"
    assert config["enable.auto.commit"] is False
    assert config["group.id"] == "g" and config["enable.partition.eof"] is True
