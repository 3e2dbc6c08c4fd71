"""Sending repair orders to the platform: resume, fork, erase (``runplane.core.repair``).

The Kafka half of the operator's repair actions, used by the journal service's HTTP API
(which authenticates the operator and names them in the order) and by tests:

- ``send_order`` puts a resume or erase order on the run's inbox; the executor owning the
  run checks it against the run's state and applies it or dead-letters it with the reason.
- ``write_fork`` reads the old run (its chain, bodies and final snapshot), writes the fork's
  chain prefix, copied bodies and snapshot, and only once they are acknowledged puts the fork
  order on the new run's inbox, so the executor that reads it finds them. The fork's session
  is new: nothing else writes it, so the writer needs no transaction (a crash before the
  order leaves a RUNNING snapshot the next restore of the partition picks up and runs).
- ``read_snapshot``: a run's latest snapshot from the compacted ``sessions`` table.

A fork's chain is signed with ``RUNPLANE_JOURNAL_SIGNING_KEY`` when it is set (a chain writer
like admission and the executor): set it on the journal service when chains are signed.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer

from runplane.config import Settings
from runplane.core import repair as core
from runplane.errors import RetryableError
from runplane.kafka.clients import producer_config
from runplane.kafka.partition import partition_for
from runplane.kafka.restore import restore_table
from runplane.runs.read import read_run, result_key
from runplane.signing.journal import Signer
from runplane.wire import Record, SessionSnapshot, serde_for

__all__ = ["read_snapshot", "send_order", "write_fork"]


def read_snapshot(
    settings: Settings, run_id: str, *, timeout_s: float = 60.0
) -> SessionSnapshot | None:
    """The run's latest snapshot (its partition of ``sessions`` read to the end)."""
    serde = serde_for(settings)
    rows = restore_table(
        settings,
        settings.topic("sessions"),
        [partition_for(run_id, settings.partitions)],
        lambda data: serde.decode("sessions", data),
        timeout_s=timeout_s,
    )
    snap = rows.get(run_id)
    return snap if isinstance(snap, SessionSnapshot) else None


def send_order(
    settings: Settings, run_id: str, order: core.RepairOrder, *, now_ms: int | None = None
) -> None:
    """Put ``order`` on ``run_id``'s inbox (acknowledged before this returns)."""
    sent = int(time.time() * 1000) if now_ms is None else now_ms
    producer = Producer(producer_config(settings))
    _produce(producer, settings, "runs.inbox", run_id, order.wake(run_id, sent))
    _flush(producer)


def write_fork(
    settings: Settings,
    run_id: str,
    from_seq: int,
    order: core.RepairOrder,
    *,
    signer: Signer | None,
    now_ms: int | None = None,
) -> str:
    """Fork ``run_id`` at ``from_seq``: write the new run and order it on; its id.

    ``signer``: the chain writer's key the fork's journal records are signed with (the
    caller's configuration, ``RUNPLANE_JOURNAL_SIGNING_KEY``); None writes them unsigned.
    ``RepairRefused`` when the old run cannot be forked there (see ``core.repair.fork``)."""
    old = read_snapshot(settings, run_id)
    if old is None:
        raise core.RepairRefused(f"cannot fork run {run_id}: unknown run (no snapshot)")
    history = read_run(settings, run_id, bodies=True)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    session = core.fork_session_id(run_id, from_seq, uuid.uuid4().hex)
    plan = core.fork(
        old,
        history.records,
        history.bodies,
        from_seq=from_seq,
        session_id=session,
        order=order,
        now_ms=now,
    )
    producer = Producer(producer_config(settings))
    partition = partition_for(session, settings.partitions)
    serde = serde_for(settings)
    journal = settings.topic("journal")
    for record in plan.records:
        value = serde.encode("journal", record)
        headers: list[tuple[str, str | bytes | None]] | None = (
            None if signer is None else [signer.header(value)]
        )
        producer.produce(journal, key=session.encode(), value=value, headers=headers)
    for entry in plan.results:
        producer.produce(
            settings.topic("results"),
            key=result_key(session, entry.era, entry.call_seq).encode(),
            value=serde.encode("results", entry),
            partition=partition,
        )
    _produce(producer, settings, "sessions", session, plan.snapshot)
    _flush(producer)  # the fork exists before the order that asks the executor to run it
    _produce(producer, settings, "runs.inbox", session, order.wake(session, now))
    _flush(producer)
    return session


def _produce(producer: Producer, settings: Settings, topic: str, key: str, record: Record) -> None:
    value = serde_for(settings).encode(topic, record)
    producer.produce(settings.topic(topic), key=key.encode(), value=value)


def _flush(producer: Producer, timeout_s: float = 30.0) -> None:
    if producer.flush(timeout_s) != 0:
        raise RetryableError(
            "Kafka did not acknowledge the repair's records in time", retry_after=1.0
        )
