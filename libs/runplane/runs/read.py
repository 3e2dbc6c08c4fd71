"""Read one run's journal, bodies and audit records — and a case — straight from Kafka.

Used by ``runplane journal show|verify`` and by the journal service's HTTP API. Independent of
any service: a run's records live on its session's partition of ``journal`` (and of
``results`` and ``audit``, co-partitioned by session), so we assign that one partition, read
it from the beginning (or from the first offset at/after ``since_ms``) to its end and keep
the run's records.

"The end" is what a read_committed reader can see (the last stable offset); librdkafka reports
it with a PARTITION_EOF event (``enable.partition.eof``), so we stop on EOF and never compare
positions with the high watermark (that spins behind an open transaction).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from runplane.config import Settings
from runplane.core.verify import bodies_of, verify_records
from runplane.errors import RetryableError, WireError
from runplane.kafka.clients import consumer_config
from runplane.kafka.partition import partition_for
from runplane.signing.journal import Keyring, header_of, unsigned
from runplane.wire import AuditRecord, CaseRecord, JournalRecord, ResultEntry, Serde, serde_for

__all__ = [
    "RunHistory",
    "journal_run_ids",
    "key_text",
    "parse_result_key",
    "read_audit",
    "read_case",
    "read_run",
    "result_key",
    "session_partition",
]

BodyKey = tuple[int, int]  # (era, call_seq)


def result_key(session_id: str, era: int, call_seq: int) -> str:
    """The ``results`` key of one call: ``session/era/call_seq``."""
    return f"{session_id}/{era}/{call_seq}"


def parse_result_key(key: str) -> tuple[str, int, int] | None:
    """(session, era, call_seq) from a ``results`` key, or None when it is not one."""
    session, sep1, rest = key.rpartition("/")
    session, sep2, era = session.rpartition("/")
    if not (sep1 and sep2 and session):
        return None
    try:
        return session, int(era), int(rest)
    except ValueError:
        return None


@dataclass(frozen=True)
class RunHistory:
    """A run as it is on the topics: records in topic order, bodies by (era, call_seq)."""

    run_id: str
    partition: int
    records: tuple[JournalRecord, ...]
    bodies: dict[BodyKey, ResultEntry | None] = field(default_factory=dict)  # None: erased
    undecodable: int = 0
    # Per record (aligned with ``records``): why it is not signed by a chain writer
    # (``runplane.signing.journal``); None when read without a keyring (not checked).
    unsigned: tuple[str | None, ...] | None = None


# ``runplane journal verify``'s exit status (also the demo's and the tests' verdict).
EXIT_BROKEN = 1
EXIT_BODIES_MISSING = 2


def verify_exit_code(history: RunHistory) -> tuple[int, dict[str, Any]]:
    """(exit status, report) for ``journal verify``; shared with the demo and the tests."""

    report = verify_records(
        history.run_id, history.records, bodies_of(history.bodies), history.unsigned
    )
    absent = [
        seq
        for seq, rec in ((r.seq, r) for r in history.records)
        if seq in report.body_missing and (rec.era, rec.call_seq) not in history.bodies
    ]
    data = {
        "run_id": history.run_id,
        "records": report.records,
        "verified": report.verified,
        "broken_at_seq": report.broken_at_seq,
        "reason": report.reason,
        "body_missing": list(report.body_missing),
        "body_absent": absent,
    }
    if not report.verified:
        return EXIT_BROKEN, data
    return (EXIT_BODIES_MISSING if absent else 0), data


def _partitions(consumer: Consumer, topic: str, timeout_s: float) -> int:
    meta = consumer.list_topics(topic, timeout=timeout_s)
    t = meta.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        raise RetryableError(f"topic {topic} is not available", retry_after=1.0)
    return len(t.partitions)


def session_partition(
    settings: Settings, consumer: Consumer, run_id: str, timeout_s: float = 10.0
) -> int:
    """The partition holding ``run_id`` on every session-keyed topic."""
    return partition_for(run_id, _partitions(consumer, settings.topic("journal"), timeout_s))


def _read_to_end(
    consumer: Consumer, topic: str, partition: int, since_ms: int | None, timeout_s: float
) -> Iterator[Message]:
    start = OFFSET_BEGINNING
    if since_ms is not None:
        found = consumer.offsets_for_times(
            [TopicPartition(topic, partition, since_ms)], timeout=timeout_s
        )
        if found and found[0].offset >= 0:
            start = found[0].offset
    consumer.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if time.monotonic() > deadline:
                raise RetryableError(
                    f"{topic}[{partition}] did not reach its end in {timeout_s}s", retry_after=1.0
                )
            for msg in consumer.consume(num_messages=500, timeout=0.2):
                err = msg.error()
                if err is None:
                    yield msg
                elif err.code() == KafkaError._PARTITION_EOF:
                    return
                elif err.fatal():
                    raise KafkaException(err)
    finally:
        consumer.unassign()


def _consumer(settings: Settings) -> Consumer:
    # A group id is required by librdkafka even for assign(); nothing is ever committed.
    return Consumer(
        consumer_config(
            settings,
            f"runplane-reader-{uuid.uuid4().hex[:12]}",
            **{"enable.partition.eof": True, "fetch.wait.max.ms": 50},
        )
    )


def key_text(msg: Message) -> str | None:
    """A record's key as text; None when it has none or it is not UTF-8."""
    raw = msg.key()
    if raw is None:
        return None
    try:
        return raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        return None


def _decoded(msg: Message, cls: type, serde: Serde, topic: str) -> object | None:
    """The record, None for a tombstone, or ``WireError`` (the class) when it does not decode."""
    value = msg.value()
    if value is None:
        return None
    try:
        rec = serde.decode(topic, value if isinstance(value, bytes) else value.encode())
    except WireError:
        return WireError
    return rec if isinstance(rec, cls) else WireError


def journal_run_ids(
    settings: Settings, *, since_ms: int | None = None, timeout_s: float = 30.0
) -> list[str]:
    """Every run with a record on ``journal`` (with ``since_ms``: one written at or after that
    instant), sorted. Reads keys only, every partition once — for verifying many runs in one
    process (``runplane journal verify --all``)."""
    consumer = _consumer(settings)
    topic = settings.topic("journal")
    try:
        found: set[str] = set()
        for partition in range(_partitions(consumer, topic, timeout_s)):
            if since_ms is not None:
                [at] = consumer.offsets_for_times(
                    [TopicPartition(topic, partition, since_ms)], timeout=timeout_s
                )
                if at.offset < 0:  # nothing written since: no run of this partition
                    continue
            for msg in _read_to_end(consumer, topic, partition, since_ms, timeout_s):
                key = key_text(msg)
                if key and (since_ms is None or msg.timestamp()[1] >= since_ms):
                    found.add(key)
        return sorted(found)
    finally:
        consumer.close()


def read_run(
    settings: Settings,
    run_id: str,
    *,
    bodies: bool = True,
    since_ms: int | None = None,
    timeout_s: float = 30.0,
    serde: Serde | None = None,
    keyring: Keyring | None = None,
) -> RunHistory:
    """The run's journal records (topic order) and, with ``bodies``, its result entries.

    ``since_ms``: start both scans at the first record at or after this instant instead of the
    partition's beginning — pass the run's start time (less a margin for clock skew) when it is
    known, so the cost of a read follows the run's age, not the partition's history.

    Records of other sessions on the partition are skipped; a record keyed by the run that does
    not decode counts in ``undecodable`` (it would be dead-lettered by a service). With a
    ``keyring``, each record's writer signature is checked (``RunHistory.unsigned``).
    """
    serde = serde or serde_for(settings)
    consumer = _consumer(settings)
    try:
        partition = session_partition(settings, consumer, run_id, timeout_s)
        records: list[JournalRecord] = []
        wire: list[tuple[bytes, bytes | None]] = []
        undecodable = 0
        for msg in _read_to_end(
            consumer, settings.topic("journal"), partition, since_ms, timeout_s
        ):
            if key_text(msg) != run_id:
                continue
            rec = _decoded(msg, JournalRecord, serde, "journal")
            if isinstance(rec, JournalRecord) and rec.session_id == run_id:
                records.append(rec)
                wire.append((msg.value() or b"", header_of(msg.headers())))
            else:
                undecodable += 1
        found: dict[BodyKey, ResultEntry | None] = {}
        if bodies:
            # Compaction keeps each record's timestamp and offset, and a run's results are all
            # written after it started: the same lower bound holds for ``results``.
            for msg in _read_to_end(
                consumer, settings.topic("results"), partition, since_ms, timeout_s
            ):
                parsed = parse_result_key(key_text(msg) or "")
                if parsed is None or parsed[0] != run_id:
                    continue
                entry = _decoded(msg, ResultEntry, serde, "results")
                if entry is None or isinstance(entry, ResultEntry):
                    found[(parsed[1], parsed[2])] = entry  # last write wins; None = tombstone
                else:
                    undecodable += 1
        return RunHistory(
            run_id, partition, tuple(records), found, undecodable, unsigned(keyring, wire)
        )
    finally:
        consumer.close()


def read_audit(
    settings: Settings,
    run_id: str,
    *,
    since_ms: int | None = None,
    timeout_s: float = 30.0,
    serde: Serde | None = None,
) -> list[AuditRecord]:
    """The run's audit records as the journal service published them (topic order)."""
    serde = serde or serde_for(settings)
    consumer = _consumer(settings)
    try:
        partition = session_partition(settings, consumer, run_id, timeout_s)
        out: list[AuditRecord] = []
        for msg in _read_to_end(consumer, settings.topic("audit"), partition, since_ms, timeout_s):
            if key_text(msg) == run_id:
                rec = _decoded(msg, AuditRecord, serde, "audit")
                if isinstance(rec, AuditRecord):
                    out.append(rec)
        return out
    finally:
        consumer.close()


def read_case(
    settings: Settings, case_id: str, *, timeout_s: float = 30.0, serde: Serde | None = None
) -> CaseRecord | None:
    """The latest committed CaseRecord of ``case_id`` from the compacted ``cases`` topic (the
    cases service's own table: the case's partition to its end, last record for the key wins,
    a tombstone deletes), or None when there is no such case. ``WireError`` when the latest
    record does not decode; ``RetryableError`` when the topic is missing or slow."""
    serde = serde or serde_for(settings)
    topic = settings.topic("cases")
    consumer = _consumer(settings)
    try:
        partition = partition_for(case_id, _partitions(consumer, topic, timeout_s))
        latest: Message | None = None
        for msg in _read_to_end(consumer, topic, partition, None, timeout_s):
            if key_text(msg) == case_id:
                latest = msg
    finally:
        consumer.close()
    case = None if latest is None else _decoded(latest, CaseRecord, serde, "cases")
    if case is WireError:
        raise WireError(f"the latest record of case {case_id!r} does not decode")
    return case if isinstance(case, CaseRecord) else None
