"""What ``cases`` says once only committed records count: one partition, read to its end.

The Faust stream reads ``cases`` at ``read_uncommitted`` (see :mod:`services.sweeper.sweeper`),
so it can index an obligation that an aborted cases-service transaction wrote. This module is
the ``read_committed`` view that corrects it, used twice: to rebuild a partition's index when
Redis lost it, and to re-validate an entry whose decision the cases service never confirmed.

"The end" is the last stable offset, signalled by PARTITION_EOF under ``read_committed``
(never "position >= high watermark", which an open transaction would keep out of reach).
``at_least`` asks for an end at or past an offset the stream has already read: while a
transaction below it is still open the end stops short of it, so we read again until that
transaction is decided (every runplane producer's ``transaction.timeout.ms`` is 60 s).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from runplane.config import Settings
from runplane.errors import RetryableError, WireError
from runplane.kafka.clients import consumer_config
from runplane.wire import CaseRecord, Serde, serde_for
from services.sweeper.topology import INPUT

__all__ = ["CommittedView", "read_committed"]


@dataclass(frozen=True)
class CommittedView:
    """The last committed record of every case in one partition, and where the read ended.

    ``cases`` maps a case id to its last readable record, or to None when the case was
    deleted (a tombstone). Unreadable records are skipped, as the stream skips them.
    """

    partition: int
    cases: dict[str, CaseRecord | None]
    end: int


def read_committed(
    settings: Settings, at_least: Mapping[int, int], *, timeout_s: float = 120.0
) -> dict[int, CommittedView]:
    """Read the given partitions of ``cases`` from the beginning to their committed end.

    ``at_least`` maps each partition to the offset its end must reach. Blocking (run it off
    the event loop). Raises ``RetryableError`` when an end stays below its mark for
    ``timeout_s``.
    """
    topic = settings.topic(INPUT)
    serde = serde_for(settings)
    consumer = Consumer(
        consumer_config(
            settings,
            f"{settings.topic_prefix}sweeper-committed-{uuid.uuid4().hex[:12]}",
            **{"enable.partition.eof": True, "fetch.wait.max.ms": 50},
        )
    )
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            views = _read_once(consumer, serde, topic, sorted(at_least), deadline)
            short = {p: v.end for p, v in views.items() if v.end < at_least[p]}
            if not short:
                return views
            if time.monotonic() > deadline:
                raise RetryableError(
                    f"{topic}: committed ends {short} are still below {dict(at_least)}",
                    retry_after=1.0,
                )
            time.sleep(0.2)  # a transaction below a mark is still open: wait for its end
    finally:
        consumer.close()


def _read_once(
    consumer: Consumer, serde: Serde, topic: str, partitions: list[int], deadline: float
) -> dict[int, CommittedView]:
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    cases: dict[int, dict[str, CaseRecord | None]] = {p: {} for p in partitions}
    ends: dict[int, int] = {}
    try:
        while len(ends) < len(partitions):
            if time.monotonic() > deadline:
                raise RetryableError(f"{topic}: no committed end within the timeout")
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                p = msg.partition() or 0
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        ends[p] = msg.offset() or 0
                    elif err.fatal():
                        raise KafkaException(err)
                    continue
                key = msg.key()
                if not isinstance(key, bytes):
                    continue
                try:
                    cases[p][key.decode("utf-8", "replace")] = _decode(serde, msg.value())
                except WireError:
                    # As the stream does: an unreadable record changes nothing (the stream
                    # dead-lettered it when it read it; a rebuild does not do so again).
                    continue
    finally:
        consumer.unassign()
    return {p: CommittedView(p, cases[p], ends[p]) for p in partitions}


def _decode(serde: Serde, value: str | bytes | None) -> CaseRecord | None:
    if value is None:
        return None  # a tombstone: the case is gone
    record = serde.decode(INPUT, value if isinstance(value, bytes) else value.encode())
    if not isinstance(record, CaseRecord):  # pragma: no cover - Serde checks the topic
        raise WireError(f"not a CaseRecord: {type(record).__name__}")
    return record
