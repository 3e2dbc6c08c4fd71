"""A harness for executor tests and benchmarks: admit runs like admission does, run an
executor in a thread, read tables and topics back.

Test code, not the service's (it lived in ``services/executor`` once). It writes what admission would write for a new run (seq 0 of
the chain on ``journal``, StartRun on ``runs.inbox``) in one transaction, so the executor under
test sees exactly the platform's input.
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import httpx
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from runplane.config import Settings
from runplane.core import AgentRegistry, ModelProvider, Tool
from runplane.core.chain import run_start
from runplane.kafka.clients import consumer_config, producer_config
from runplane.kafka.restore import restore_table
from runplane.wire import (
    JournalRecord,
    Record,
    ResultEntry,
    RunStatus,
    SessionSnapshot,
    serde_for,
)
from services.executor.serve import build
from services.executor.settings import ExecutorSettings
from tests.helpers.waiting import wait_for


@dataclass(frozen=True)
class Admitted:
    run_id: str
    admission_key: str
    admitted_ms: int


def admit(
    producer: Producer,
    settings: Settings,
    capability: str,
    inputs: Iterable[Mapping[str, Any]],
    *,
    tenant: str = "acme",
    initiator: str = "emitter",
) -> list[Admitted]:
    """Write RunAdmitted + StartRun for each input (as admission would); flushes."""
    serde = serde_for(settings)
    out: list[Admitted] = []
    for value in inputs:
        run_id = "r-" + uuid.uuid4().hex[:16]
        key = "k-" + run_id
        now_ms = int(time.time() * 1000)
        input_json = json.dumps(value, sort_keys=True)
        admitted, start = run_start(
            run_id,
            capability=capability,
            admission_key=key,
            tenant=tenant,
            initiator=initiator,
            input_json=input_json,
            now_ms=now_ms,
        )
        producer.produce(
            settings.topic("journal"), key=run_id.encode(), value=serde.encode("journal", admitted)
        )
        producer.produce(
            settings.topic("runs.inbox"),
            key=run_id.encode(),
            value=serde.encode("runs.inbox", start),
        )
        producer.poll(0)
        out.append(Admitted(run_id, key, now_ms))
    producer.flush(30)
    return out


def send(producer: Producer, settings: Settings, topic: str, key: str, record: Record) -> None:
    serde = serde_for(settings)
    producer.produce(settings.topic(topic), key=key.encode(), value=serde.encode(topic, record))
    producer.flush(30)


def plain_producer(settings: Settings) -> Producer:
    return Producer(producer_config(settings, linger_ms=2))


def sessions(settings: Settings) -> dict[str, SessionSnapshot]:
    serde = serde_for(settings)
    rows = restore_table(
        settings,
        settings.topic("sessions"),
        range(settings.partitions),
        lambda data: serde.decode("sessions", data),
        timeout_s=60,
    )
    return {k: v for k, v in rows.items() if isinstance(v, SessionSnapshot)}


def wait_ended(
    settings: Settings, run_id: str, *, what: str, timeout_s: float = 120, every_s: float = 0.3
) -> SessionSnapshot:
    """Wait until ``run_id``'s snapshot says COMPLETED or FAILED → that snapshot."""

    def ended() -> SessionSnapshot | None:
        snap = sessions(settings).get(run_id)
        return snap if snap is not None and snap.status in _ENDED else None

    snap = wait_for(ended, timeout_s=timeout_s, every_s=every_s, what=what)
    assert snap is not None  # wait_for returns only once the probe answers
    return snap


_ENDED = (RunStatus.COMPLETED, RunStatus.FAILED)


def read_topic(
    settings: Settings, topic: str, *, timeout_s: float = 30.0
) -> list[tuple[str, Record]]:
    """Every decodable record of a logical topic, read_committed, in partition/offset order."""
    serde = serde_for(settings)
    full = settings.topic(topic)
    consumer = Consumer(
        consumer_config(settings, f"harness-{uuid.uuid4().hex[:8]}", enable_partition_eof=True)
    )
    try:
        parts = sorted(consumer.list_topics(full, timeout=10).topics[full].partitions)
        consumer.assign([TopicPartition(full, p, 0) for p in parts])
        pending = set(parts)
        rows: list[tuple[str, Record]] = []
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no EOF on {full} partitions {sorted(pending)}")
            for msg in consumer.consume(500, timeout=0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition() or 0)
                    continue
                key = msg.key()
                value = msg.value()
                if not isinstance(value, bytes):
                    continue
                try:
                    record = serde.decode(topic, value)
                except Exception:  # harness: undecodable rows are skipped, not fatal
                    continue
                rows.append((key.decode() if isinstance(key, bytes) else str(key), record))
        return rows
    finally:
        consumer.close()


def chain_of(
    settings: Settings, run_id: str
) -> tuple[list[JournalRecord], dict[tuple[int, int], ResultEntry]]:
    records = sorted(
        (
            r
            for k, r in read_topic(settings, "journal")
            if k == run_id and isinstance(r, JournalRecord)
        ),
        key=lambda r: r.seq,
    )
    results = {
        (r.era, r.call_seq): r
        for _, r in read_topic(settings, "results")
        if isinstance(r, ResultEntry) and r.session_id == run_id
    }
    return records, results


@contextmanager
def executor_thread(
    settings: ExecutorSettings,
    *,
    tools: Mapping[str, Tool] | None = None,
    providers: Mapping[str, ModelProvider] | None = None,
    registry: AgentRegistry | None = None,
    ready_timeout_s: float = 60.0,
    profile: cProfile.Profile | None = None,
) -> Iterator[Any]:
    """Run one executor in a thread of this process; yields it once partitions are restored.

    With ``profile``, the executor's thread runs under that (cProfile) profiler."""
    stop = threading.Event()
    holder: dict[str, Any] = {}
    failed: list[BaseException] = []

    async def main() -> None:
        async with httpx.AsyncClient() as client:
            executor = build(settings, client, tools=tools, providers=providers, registry=registry)
            holder["executor"] = executor
            await executor.run(stop)

    def target() -> None:
        try:
            if profile is not None:
                profile.runcall(asyncio.run, main())
            else:
                asyncio.run(main())
        except BaseException as exc:  # surfaced to the test below
            failed.append(exc)

    thread = threading.Thread(
        target=target, name=f"executor-{settings.base.instance_id}", daemon=True
    )
    thread.start()
    try:
        wait_for(lambda: "executor" in holder or bool(failed), timeout_s=30, what="executor start")
        if failed:
            raise failed[0]
        wait_for(
            lambda: holder["executor"].ready.is_set() or bool(failed),
            timeout_s=ready_timeout_s,
            what="assignment",
        )
        if failed:
            raise failed[0]
        yield holder["executor"]
    finally:
        stop.set()
        thread.join(timeout=30)
    if failed:
        raise failed[0]


def with_instance(settings: Settings, instance_id: str) -> Settings:
    return replace(settings, instance_id=instance_id)
