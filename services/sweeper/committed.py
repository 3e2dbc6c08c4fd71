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
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from runplane.config import Settings
from runplane.errors import RetryableError, WireError
from runplane.kafka.clients import consumer_config
from runplane.wire import CaseRecord, Serde
from services.sweeper.topology import INPUT

__all__ = ["CommittedView", "read_committed"]


@dataclass(frozen=True)
class CommittedView:
    """The last committed record of every case in one partition, and where the read ended.

    ``cases`` maps a case id to its record, or to None when the case was deleted or its last
    record could not be decoded (neither holds an obligation we could act on).
    """

    partition: int
    cases: dict[str, CaseRecord | None]
    end: int


def read_committed(
    settings: Settings, partition: int, *, at_least: int = 0, timeout_s: float = 120.0
) -> CommittedView:
    """Read partition ``partition`` of ``cases`` from the beginning to its committed end.

    Blocking (run it off the event loop). Raises ``RetryableError`` when the end does not
    reach ``at_least`` within ``timeout_s``.
    """
    topic = settings.topic(INPUT)
    serde = Serde.from_settings(settings)
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
            view = _read_once(consumer, serde, topic, partition, deadline)
            if view.end >= at_least:
                return view
            if time.monotonic() > deadline:
                raise RetryableError(
                    f"{topic}[{partition}] committed end {view.end} is still below {at_least}",
                    retry_after=1.0,
                )
            time.sleep(0.2)  # a transaction below at_least is still open: wait for its end
    finally:
        consumer.close()


def _read_once(
    consumer: Consumer, serde: Serde, topic: str, partition: int, deadline: float
) -> CommittedView:
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    cases: dict[str, CaseRecord | None] = {}
    try:
        while True:
            if time.monotonic() > deadline:
                raise RetryableError(f"{topic}[{partition}]: no end within the timeout")
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return CommittedView(partition, cases, msg.offset() or 0)
                if err.fatal():
                    raise KafkaException(err)
                continue
            key = msg.key()
            if not isinstance(key, bytes):
                continue
            cases[key.decode("utf-8", "replace")] = _decode(serde, msg.value())
    finally:
        consumer.unassign()


def _decode(serde: Serde, value: str | bytes | None) -> CaseRecord | None:
    if value is None:
        return None
    try:
        record = serde.decode(INPUT, value if isinstance(value, bytes) else value.encode())
    except WireError:
        return None  # the stream dead-lettered it when it read it
    return record if isinstance(record, CaseRecord) else None
