"""The topic catalogue: every topic of the platform, its key, cleanup policy and retention.

Names are ``Settings.topic_prefix`` + the logical name (``runplane.journal``); partition
counts come from ``Settings.partitions`` and are the same for every topic, so the topics keyed
by session are co-partitioned (never change the count of an existing deployment).

``create_topics`` is idempotent; ``describe_topics`` reports what exists and flags any topic
whose partitions, replication or configuration differ from the catalogue (drift). Both take
per-topic ``overrides`` — tests use :func:`fast_compaction_overrides` to watch compaction
happen within seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # implicit re-exports
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from runplane.config import Settings
from runplane.errors import ConfigError

CleanupPolicy = Literal["delete", "compact"]
ConfigValue = str | int | float
Overrides = Mapping[str, Mapping[str, ConfigValue]]

DAY_MS = 86_400_000
FOREVER = -1


@dataclass(frozen=True)
class TopicSpec:
    """One logical topic of the catalogue (docs/design.md, "Topics")."""

    name: str
    key: str
    cleanup_policy: CleanupPolicy
    retention_ms: int | None
    holds: str
    # Further topic-level settings the topic is created with (and checked for drift).
    extra: tuple[tuple[str, str], ...] = ()

    def base_config(self) -> dict[str, str]:
        config: dict[str, str] = {"cleanup.policy": self.cleanup_policy}
        if self.retention_ms is not None:
            config["retention.ms"] = str(self.retention_ms)
        config.update(self.extra)
        return config


def _spec(
    name: str,
    key: str,
    policy: CleanupPolicy,
    retention_days: int | None,
    holds: str,
    extra: tuple[tuple[str, str], ...] = (),
) -> TopicSpec:
    retention = (
        None
        if retention_days is None
        else (FOREVER if retention_days < 0 else retention_days * DAY_MS)
    )
    return TopicSpec(name, key, policy, retention, holds, extra)


# The broker stamps each admission request with its own clock on append: admission checks a
# signature's window against that time, which whoever produces the record cannot choose (with
# CreateTime a replay could carry its original timestamp). ``describe_topics`` flags an
# ``admission`` topic created before this as drifted.
BROKER_TIME: tuple[tuple[str, str], ...] = (("message.timestamp.type", "LogAppendTime"),)


# Compacted topics are state (the last value per key is the truth) and never expire, so they
# carry no retention; "compact", not "compact,delete", so state never vanishes by age.
CATALOGUE: tuple[TopicSpec, ...] = (
    _spec("admission", "admission key", "delete", 7, "AdmissionRequest from emitters", BROKER_TIME),
    _spec(
        "admission.claims",
        "(tenant, admission key)",
        "compact",
        None,
        "AdmissionClaim: the dedup table",
    ),
    _spec("admission.replies", "admission key", "delete", 7, "AdmissionReply"),
    _spec("runs.inbox", "session", "delete", 7, "StartRun, Signal, TaskDecision, CaseReply, Wake"),
    _spec("journal", "session", "delete", -1, "JournalRecord: the hash-chained event chain"),
    _spec("results", "session/era/call_seq", "compact", None, "ResultEntry: result journal"),
    _spec("sessions", "session", "compact", None, "SessionSnapshot"),
    _spec("cases.commands", "case", "delete", 7, "case commands"),
    _spec("cases", "case", "compact", None, "CaseRecord"),
    _spec("tasks.commands", "task", "delete", 7, "task commands"),
    _spec("tasks", "task", "compact", None, "TaskRecord"),
    _spec("schedules", "tenant/schedule", "compact", None, "Schedule: operators' timetables"),
    _spec("schedules.fired", "tenant/schedule", "compact", None, "ScheduleFired: the sweeper's"),
    _spec("audit", "session", "delete", 3650, "AuditRecord: the verified public stream"),
    # A view, never the truth: a run's live events are worth a day (a reconnect, a late look).
    _spec("runs.stream", "session", "delete", 1, "StreamEvent: runs' live deltas and progress"),
    # Answers to updates, waited on by their callers (a caller gone for an hour has given up).
    _spec("runs.updates", "update id", "delete", 1, "UpdateAnswer: runs' answers to updates"),
    _spec("deadletter", "original key", "delete", 30, "undecodable or invalid records"),
)

TOPICS: Mapping[str, TopicSpec] = {spec.name: spec for spec in CATALOGUE}
COMPACTED: frozenset[str] = frozenset(s.name for s in CATALOGUE if s.cleanup_policy == "compact")

# Per-topic settings that make the cleaner run within seconds (the broker's
# log.cleaner.backoff.ms is small in the local stack). segment.bytes cannot go below 1 MiB in
# Kafka 4.x, so segments roll by time: a segment rolls on the first append after segment.ms.
FAST_COMPACTION: Mapping[str, str] = {
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "100",
}


def fast_compaction_overrides(names: Iterable[str] = COMPACTED) -> dict[str, Mapping[str, str]]:
    """``overrides`` giving each of ``names`` (default: every compacted topic) fast compaction."""
    return {name: FAST_COMPACTION for name in names}


def topic_name(settings: Settings, logical: str) -> str:
    """The full name of a catalogue topic (``journal`` → ``runplane.journal``)."""
    if logical not in TOPICS:
        raise ConfigError(f"unknown topic {logical!r}; the catalogue has {sorted(TOPICS)}")
    return settings.topic(logical)


def topic_names(settings: Settings) -> dict[str, str]:
    """Logical name → full name, for the whole catalogue."""
    return {name: settings.topic(name) for name in TOPICS}


def expected_config(
    settings: Settings, logical: str, overrides: Overrides | None = None
) -> dict[str, str]:
    """The topic-level configuration the catalogue (plus ``overrides``) asks for."""
    config = TOPICS[logical].base_config()
    if settings.replication_factor >= 3:
        config["min.insync.replicas"] = str(settings.replication_factor - 1)
    for key, value in ((overrides or {}).get(logical) or {}).items():
        config[key] = str(value)
    return config


def _selected(names: Iterable[str] | None) -> list[str]:
    chosen = list(TOPICS) if names is None else list(names)
    unknown = [n for n in chosen if n not in TOPICS]
    if unknown:
        raise ConfigError(f"unknown topics {unknown}; the catalogue has {sorted(TOPICS)}")
    return chosen


def _check_overrides(overrides: Overrides | None) -> None:
    unknown = sorted(set(overrides or {}) - set(TOPICS))
    if unknown:
        raise ConfigError(f"overrides name unknown topics {unknown}")


def create_topics(
    settings: Settings,
    admin: AdminClient,
    *,
    overrides: Overrides | None = None,
    names: Iterable[str] | None = None,
    timeout: float = 30.0,
) -> list[str]:
    """Create the catalogue's topics that do not exist yet; returns the full names created.

    Idempotent: an existing topic is left as it is (``describe_topics`` shows whether it
    drifted). Returns once every selected topic is visible in the metadata with a leader for
    each partition, so a producer or ``assign()`` right after does not race the creation.
    """
    _check_overrides(overrides)
    chosen = _selected(names)
    new = [
        NewTopic(
            settings.topic(name),
            num_partitions=settings.partitions,
            replication_factor=settings.replication_factor,
            config=expected_config(settings, name, overrides),
        )
        for name in chosen
    ]
    created: list[str] = []
    if new:
        futures = admin.create_topics(new, operation_timeout=timeout, request_timeout=timeout)
        for full, future in futures.items():
            try:
                future.result()
                created.append(full)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
    _wait_visible(admin, [settings.topic(n) for n in chosen], timeout)
    return sorted(created)


def _wait_visible(admin: AdminClient, full_names: Sequence[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = set(full_names)
    while pending:
        metadata = admin.list_topics(timeout=max(1.0, deadline - time.monotonic()))
        for name in list(pending):
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not None or not topic.partitions:
                continue
            if all(p.leader >= 0 for p in topic.partitions.values()):
                pending.discard(name)
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics not visible after {timeout}s: {sorted(pending)}")
        time.sleep(0.1)


def delete_topics(
    settings: Settings,
    admin: AdminClient,
    *,
    names: Iterable[str] | None = None,
    timeout: float = 30.0,
) -> list[str]:
    """Delete the catalogue's topics under ``settings.topic_prefix`` that exist; returns them."""
    existing = set(admin.list_topics(timeout=timeout).topics)
    full = [settings.topic(n) for n in _selected(names) if settings.topic(n) in existing]
    if not full:
        return []
    deleted: list[str] = []
    for name, future in admin.delete_topics(full, operation_timeout=timeout).items():
        try:
            future.result()
            deleted.append(name)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
    return sorted(deleted)


@dataclass(frozen=True)
class TopicReport:
    """One catalogue topic as the broker has it, and how it differs from the catalogue."""

    logical: str
    name: str
    exists: bool
    partitions: int | None
    replication_factor: int | None
    config: Mapping[str, str]
    drift: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.exists and not self.drift

    @property
    def cleanup_policy(self) -> str | None:
        return self.config.get("cleanup.policy")

    @property
    def retention_ms(self) -> str | None:
        return self.config.get("retention.ms")


def describe_topics(
    settings: Settings,
    admin: AdminClient,
    *,
    overrides: Overrides | None = None,
    names: Iterable[str] | None = None,
    timeout: float = 30.0,
) -> list[TopicReport]:
    """Compare the broker's topics with the catalogue; ``drift`` lists every difference."""
    _check_overrides(overrides)
    chosen = _selected(names)
    metadata = admin.list_topics(timeout=timeout)
    present = [n for n in chosen if settings.topic(n) in metadata.topics]
    resources = [ConfigResource(ResourceType.TOPIC, settings.topic(n)) for n in present]
    configs: dict[str, dict[str, str]] = {}
    if resources:
        for resource, future in admin.describe_configs(resources, request_timeout=timeout).items():
            entries = future.result()
            configs[resource.name] = {k: str(e.value) for k, e in entries.items()}
    reports = []
    for logical in chosen:
        full = settings.topic(logical)
        if full not in configs:
            reports.append(TopicReport(logical, full, False, None, None, {}, ("missing",)))
            continue
        partitions = metadata.topics[full].partitions
        replicas = min((len(p.replicas) for p in partitions.values()), default=0)
        expected = expected_config(settings, logical, overrides)
        drift = [
            f"{key}={configs[full].get(key)} (want {want})"
            for key, want in expected.items()
            if configs[full].get(key) != want
        ]
        if len(partitions) != settings.partitions:
            drift.append(f"partitions={len(partitions)} (want {settings.partitions})")
        if replicas != settings.replication_factor:
            drift.append(f"replication={replicas} (want {settings.replication_factor})")
        reports.append(
            TopicReport(logical, full, True, len(partitions), replicas, configs[full], tuple(drift))
        )
    return reports
