"""Helpers for the worklist tests on the real stack (no tests here).

The worklist runs exactly as ``runplane serve worklist`` runs it (``services.worklist.serve``),
in a thread, on a free loopback port, against the real broker and Redis. The browser tests
import this module too.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import redis
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from runplane.config import Settings
from runplane.kafka.clients import consumer_config, producer_config
from runplane.kafka.partition import partition_for
from runplane.wire import (
    DeadLetter,
    ExpiryPolicy,
    OpenTask,
    Record,
    TaskDecision,
    TaskKind,
    serde_for,
)
from services.worklist.serve import serve
from services.worklist.settings import WorklistSettings
from services.worklist.topology import redis_namespace
from tests.helpers.waiting import wait_for

SERDE = serde_for(Settings())
T = TypeVar("T")

# name -> roles; every token is "<name>-token"
PEOPLE: dict[str, list[str]] = {
    "ivan": ["finance"],  # starts the runs (their initiator), and holds the role too
    "ada": ["finance", "auditor"],
    "bob": ["finance"],
    "cy": ["support"],
    "sue": ["supervisor", "operator"],
}


def token(name: str) -> str:
    return f"{name}-token"


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(name)}"}


def write_principals(directory: Path, tenant: str = "default") -> Path:
    """Everyone of PEOPLE in ``tenant``: the tenant of the runs whose tasks they decide (the
    executor harness admits runs for ``acme``; tasks opened by hand have no tenant)."""
    lines = ["principals:"]
    for name, roles in PEOPLE.items():
        digest = hashlib.sha256(token(name).encode()).hexdigest()
        lines += [
            f"  - name: {name}",
            f"    token_sha256: {digest}",
            f"    roles: [{', '.join(roles)}]",
            f"    tenant: {tenant}",
        ]
    path = directory / "principals.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def open_task(task_id: str | None = None, **kw: Any) -> OpenTask:
    task_id = task_id or f"run-{uuid.uuid4().hex[:8]}/0/1"
    fields: dict[str, Any] = {
        "task_id": task_id,
        "session_id": task_id.split("/")[0],
        "era": 0,
        "call_seq": 1,
        "kind": TaskKind.APPROVAL,
        "question": "Refund 1200 cents on invoice INV-7?",
        "answer_json": '{"amount_cents":1200,"invoice_id":"INV-7"}',
        "case_id": "case-7",
        "capability": "refund",
        "role": "finance",
        "approvals": 1,
        "initiator": "ivan",
        "on_expiry": ExpiryPolicy.FAIL,
        "opened_ms": time.time_ns() // 1_000_000,
    }
    fields.update(kw)
    return OpenTask(**fields)


def send(settings: Settings, *commands: Record) -> None:
    """Produce task commands (key = task id) the way the executor does."""
    producer = Producer(producer_config(settings))
    topic = settings.topic("tasks.commands")
    n = len(producer.list_topics(topic, timeout=10).topics[topic].partitions)
    for cmd in commands:
        task_id: str = cmd.task_id  # type: ignore[attr-defined]
        producer.produce(
            topic,
            key=task_id.encode(),
            value=SERDE.encode("tasks.commands", cmd),
            partition=partition_for(task_id, n),
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
            key = (msg.key() or b"").decode(errors="replace")
            value = msg.value()
            out.append((key, None if value is None else SERDE.decode(logical, value)))
        assert not pending, f"did not reach the end of {topic}"
        return out
    finally:
        consumer.close()


def decisions(settings: Settings, session: str) -> list[TaskDecision]:
    return [
        r
        for k, r in read_all(settings, "runs.inbox")
        if k == session and isinstance(r, TaskDecision)
    ]


def dead_letters(settings: Settings, key: str) -> list[DeadLetter]:
    return [
        r for k, r in read_all(settings, "deadletter") if k == key and isinstance(r, DeadLetter)
    ]


def forget_read_model(settings: Settings) -> int:
    """Delete this test's read-model keys (the Redis is shared: never FLUSHALL it)."""
    client = redis.Redis.from_url(settings.redis_url)
    keys = list(client.scan_iter(match=f"{redis_namespace(settings)}*"))
    return int(client.delete(*keys)) if keys else 0


@dataclass
class Running:
    url: str
    client: httpx.Client


@contextmanager
def worklist_service(settings: Settings, principals: Path, **overrides: Any) -> Iterator[Running]:
    """``services.worklist.serve`` in a thread on a free port, healthy, until the block ends."""
    ws = WorklistSettings(
        base=settings, principals_file=principals, **{"tick_ms": 100, **overrides}
    )
    stop = threading.Event()
    errors: list[BaseException] = []
    ports: list[int] = []

    def run() -> None:
        try:
            serve(settings, stop, worklist=ws, port=0, on_listening=ports.append)
        except BaseException as exc:  # surfaced by the assertions below
            errors.append(exc)

    thread = threading.Thread(target=run, name="worklist", daemon=True)
    thread.start()
    try:
        wait_for(lambda: ports or errors, what="the worklist to listen", timeout_s=30)
        assert not errors, errors
        url = f"http://127.0.0.1:{ports[0]}"
        with httpx.Client(base_url=url, timeout=30) as client:
            wait_for(
                lambda: _healthy(client) or errors, what="the worklist to be healthy", timeout_s=90
            )
            assert not errors, errors
            yield Running(url, client)
    finally:
        stop.set()
        thread.join(60)
    assert not errors, errors


def _healthy(client: httpx.Client) -> bool:
    try:
        return client.get("/healthz").status_code == 200
    except httpx.HTTPError:
        return False
