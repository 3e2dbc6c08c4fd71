"""Helpers for the cases and sweeper integration tests (no tests here).

Everything runs on the real local broker and Redis: the cases service is the shared
transactional processor in a thread, sweepers are real Sweeper instances in threads.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import redis
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from runplane.config import Settings
from runplane.kafka.clients import consumer_config, producer_config
from runplane.kafka.partition import partition_for
from runplane.signing.admission import SigningKey
from runplane.wire import CaseRecord, CaseReply, Record, serde_for
from services.cases.serve import build
from services.cases.settings import CasesSettings
from services.sweeper.settings import SweeperSettings
from services.sweeper.sweeper import Sweeper
from tests.helpers.waiting import wait_for

SERDE = serde_for(Settings())
T = TypeVar("T")


def send(settings: Settings, *commands: Record) -> None:
    """Produce case commands (key = case id) and wait until the broker has them."""
    producer = Producer(producer_config(settings))
    topic = settings.topic("cases.commands")
    n = len(producer.list_topics(topic, timeout=10).topics[topic].partitions)
    for cmd in commands:
        case_id: str = cmd.case_id  # type: ignore[attr-defined]
        producer.produce(
            topic,
            key=case_id.encode(),
            value=SERDE.encode("cases.commands", cmd),
            partition=partition_for(case_id, n),
        )
    assert producer.flush(30) == 0


def read_all(settings: Settings, logical: str) -> list[tuple[str, Record | None]]:
    """Every committed record of a topic up to its end (the last stable offset)."""
    topic = settings.topic(logical)
    consumer = Consumer(
        consumer_config(
            settings, f"reader-{uuid.uuid4().hex[:8]}", **{"enable.partition.eof": True}
        )
    )
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        pending: set[int] = set(parts)
        out: list[tuple[str, Record | None]] = []
        deadline = time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition() or 0)
                continue
            key = (msg.key() or b"").decode()
            value = msg.value()
            out.append((key, None if value is None else SERDE.decode(logical, value)))
        assert not pending, f"did not reach the end of {topic}"
        return out
    finally:
        consumer.close()


def replies(settings: Settings, session: str) -> dict[str, CaseReply]:
    """CaseReplies in ``session``'s inbox, by request id."""
    return {
        r.request_id: r
        for k, r in read_all(settings, "runs.inbox")
        if k == session and isinstance(r, CaseReply)
    }


def reply_to(settings: Settings, session: str, request_id: str) -> CaseReply:
    return wait_for(
        lambda: replies(settings, session).get(request_id), what=f"reply to {request_id}"
    )


def latest_case(settings: Settings, case_id: str) -> CaseRecord | None:
    found = None
    for key, rec in read_all(settings, "cases"):
        if key == case_id and isinstance(rec, CaseRecord):
            found = rec
    return found


@contextmanager
def cases_service(settings: Settings, emitter_key: SigningKey | None = None) -> Iterator[None]:
    """The cases service on the real broker, in a thread, until the block ends (signing its
    follow-ups to admission with ``emitter_key``)."""
    processor = build(CasesSettings(base=settings, batch_ms=5, emitter_key=emitter_key))
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            processor.run(stop)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=run, name="cases", daemon=True)
    thread.start()
    try:
        assert processor.ready.wait(60), f"cases service did not get its partitions: {errors}"
        yield
    finally:
        stop.set()
        thread.join(30)
    assert not errors, errors


@contextmanager
def sweeper(
    settings: Settings,
    *,
    offset_ms: int,
    redis_db: int,
    instance: str,
    tick_ms: int = 50,
    retry_ms: int = 300,
) -> Iterator[Sweeper]:
    """A real Sweeper (own Redis db, shifted clock, fast tick) in a thread."""
    base = replace(
        settings,
        instance_id=f"{settings.instance_id}-{instance}",
        redis_url=redis_url(redis_db),
    )
    own = SweeperSettings(base=base, tick_ms=tick_ms, retry_ms=retry_ms, clock_offset_ms=offset_ms)
    sw = Sweeper(own)
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            sw.run(stop)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, name=f"sweeper-{instance}", daemon=True)
    thread.start()
    try:
        yield sw
    finally:
        stop.set()
        thread.join(30)
    assert not errors, errors


def redis_url(db: int) -> str:
    """The session stack's Redis (``RUNPLANE_REDIS_URL``, as the stack fixture reads it) with
    database ``db``: a test module keeps its index apart, on whatever port the stack uses."""
    parts = urlsplit(Settings.from_env().redis_url)
    return urlunsplit(parts._replace(path=f"/{db}"))


def redis_db(db: int) -> redis.Redis:
    return redis.Redis.from_url(redis_url(db))
