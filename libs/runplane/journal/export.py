"""Read recorded runs from Kafka as ``Recording``s (``runplane journal export``, ``runplane replay
--from-kafka``).

A run's chain and bodies come from its session's partition of ``journal`` and ``results``
(``runplane.runs.read.read_run``); its input from its latest ``sessions`` snapshot — the chain holds
only the input's witness, and ``Recording.problems`` checks the two agree. The runs in flight
are the ``sessions`` table's snapshots whose status is not final: a compacted topic, read to its
end (last write wins), so its cost is one record per run, not the runs' history.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable

from confluent_kafka import Consumer

from runplane.config import Settings
from runplane.core.recording import Recording, RecordingError
from runplane.kafka.clients import consumer_config
from runplane.kafka.restore import restore_table
from runplane.runs.read import read_run
from runplane.signing.journal import Keyring
from runplane.wire import ResultEntry, RunStatus, SessionSnapshot, serde_for

__all__ = ["FINAL", "in_flight", "read_recording", "read_snapshots", "sample"]

FINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED})


def read_snapshots(settings: Settings, *, timeout_s: float = 60.0) -> dict[str, SessionSnapshot]:
    """Every run's latest snapshot (the ``sessions`` table), by run id."""
    serde = serde_for(settings)
    topic = settings.topic("sessions")
    consumer = Consumer(consumer_config(settings, f"runplane-reader-{uuid.uuid4().hex[:12]}"))
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        partitions = sorted(meta.partitions) if meta is not None and meta.partitions else []
    finally:
        consumer.close()

    def decode(raw: bytes) -> SessionSnapshot:
        rec = serde.decode("sessions", raw)
        if not isinstance(rec, SessionSnapshot):
            raise RecordingError(f"not a SessionSnapshot on sessions: {type(rec).__name__}")
        return rec

    return restore_table(settings, topic, partitions, decode, timeout_s=timeout_s)


def in_flight(
    snapshots: dict[str, SessionSnapshot], capability: str | None = None
) -> list[SessionSnapshot]:
    """The runs that have not ended (of ``capability``), in run id order."""
    return [
        s
        for _, s in sorted(snapshots.items())
        if s.status not in FINAL and (capability is None or s.capability == capability)
    ]


def sample(run_ids: Iterable[str], n: int | None) -> list[str]:
    """``n`` of ``run_ids``, spread by a hash of the id (stable across calls, not the oldest
    ``n``); all of them when ``n`` is None."""
    ids = sorted(set(run_ids))
    if n is None or n >= len(ids):
        return ids
    return sorted(ids, key=lambda r: hashlib.sha256(r.encode()).hexdigest())[:n]


def read_recording(
    settings: Settings,
    snapshot: SessionSnapshot,
    *,
    keyring: Keyring | None = None,
    timeout_s: float = 30.0,
) -> Recording:
    """The run of ``snapshot``: its chain and bodies as they are on the topics now. Erased
    bodies are left out (the chain verifies without them)."""
    history = read_run(
        settings,
        snapshot.session_id,
        bodies=True,
        since_ms=max(0, snapshot.started_ms - 60_000),
        timeout_s=timeout_s,
        keyring=keyring,
    )
    bodies: dict[tuple[int, int], ResultEntry] = {
        k: v for k, v in history.bodies.items() if v is not None
    }
    return Recording(snapshot, history.records, bodies)
