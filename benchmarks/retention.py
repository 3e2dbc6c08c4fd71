"""Results retention: restore time of one partition with 10,000 ended and 1,000 live runs.

Two copies of the same partition, in the same run, on scratch topics of one partition each
(``sessions`` and ``results`` compacted eagerly: ``segment.ms`` 100, ``min.cleanable.dirty.ratio``
0.01, ``delete.retention.ms`` 0, so the broker's log cleaner acts within seconds instead of
days — what production gets with its own, slower settings):

- **baseline** (no retention): every run's bodies stay in ``results``; the executor's restore
  reads them all and keeps the live runs'.
- **retention**: an executor with ``results_retention_s = 0`` restores the partition, its
  results retention tombstones the ended runs' bodies (``services/executor/repair.py``
  ``_expire``), the log cleaner compacts them away; then the same restore is timed.

Printed: restore seconds (median of 3) and records read, and their ratios to the baseline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
import uuid
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Producer

from runplane.config import Settings
from runplane.core import AgentRegistry
from runplane.core.chain import body_digest, default_label, request_witness
from runplane.kafka.clients import admin, producer_config
from runplane.kafka.restore import Restorer
from runplane.kafka.topics import create_topics, delete_topics
from runplane.wire import ResultEntry, RunStatus, SessionSnapshot, TenantId, serde_for
from services.executor.settings import ExecutorSettings
from services.executor.state import restore_partitions, results_key
from tests.helpers.harness import executor_thread
from tests.helpers.waiting import wait_for

ENDED = 10_000
LIVE = 1_000
CALLS = 4  # results per run
REPEATS = 3
_EAGER = {"segment.ms": 100, "min.cleanable.dirty.ratio": 0.01, "delete.retention.ms": 0}


@contextlib.contextmanager
def _one_partition(settings: Settings) -> Iterator[Settings]:
    own = dataclasses.replace(
        settings,
        topic_prefix=f"benchret{uuid.uuid4().hex[:6]}.",
        instance_id=f"bench-ret-{uuid.uuid4().hex[:6]}",
        partitions=1,
    )
    client = admin(own)
    create_topics(own, client, overrides={"sessions": _EAGER, "results": _EAGER})
    try:
        yield own
    finally:
        delete_topics(own, client)


def _fill(settings: Settings) -> None:
    """ENDED completed and LIVE parked runs, CALLS bodies of ~200 bytes each."""
    serde = serde_for(settings)
    producer = Producer(producer_config(settings, linger_ms=20))
    now = int(time.time() * 1000)
    label = default_label(["agent/bench"])
    for i in range(ENDED + LIVE):
        sid = f"r-bench-{i:06d}"
        for call in range(CALLS):
            value = {"call": call, "text": "x" * 180}
            entry = ResultEntry(
                session_id=sid,
                era=0,
                call_seq=call,
                family="tool",
                name="bench",
                request_witness=request_witness({"call": call}),
                ok=True,
                value_json=f'{{"call":{call},"text":"{"x" * 180}"}}',
                stamp_ms=now,
                body_digest=body_digest(True, value, None),
                label=label,
            )
            key = results_key(sid, 0, call).encode()
            producer.produce(
                settings.topic("results"), key=key, value=serde.encode("results", entry)
            )
        status = RunStatus.COMPLETED if i < ENDED else RunStatus.PARKED
        snap = SessionSnapshot(
            session_id=sid,
            capability="bench",
            status=status,
            era=0,
            next_seq=2 * CALLS + 2,
            last_hash="a" * 64,
            admission_key=f"k-{sid}",
            tenant=TenantId("bench"),
            initiator="bench",
            input_json="{}",
            started_ms=now - 1000,
            updated_ms=now - 1000,
        )
        producer.produce(
            settings.topic("sessions"), key=sid.encode(), value=serde.encode("sessions", snap)
        )
        if i % 2000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("the bench data was not acknowledged")


def _restore(settings: Settings) -> tuple[float, int, int]:
    """(seconds, records read, live runs with bodies) of the executor's restore."""
    serde = serde_for(settings)
    restorer = Restorer(settings)
    try:
        started = time.perf_counter()
        parts = restore_partitions(
            restorer, serde, settings.topic("sessions"), settings.topic("results"), [0]
        )
        seconds = time.perf_counter() - started
    finally:
        restorer.close()
    counted = _count(settings)
    return seconds, counted, len(parts[0].results)


def _count(settings: Settings) -> int:
    restorer = Restorer(settings)
    try:
        return sum(
            restorer.restore(settings.topic(t), [0], lambda data: data).records_read
            for t in ("sessions", "results")
        )
    finally:
        restorer.close()


def _measure(settings: Settings) -> dict[str, float]:
    runs = [_restore(settings) for _ in range(REPEATS)]
    return {
        "restore_s": round(statistics.median(r[0] for r in runs), 3),
        "records_read": float(runs[0][1]),
        "live_runs_restored": float(runs[0][2]),
    }


def _expire(settings: Settings) -> None:
    """An executor with a zero retention restores the partition and expires its ended runs."""
    own = ExecutorSettings(base=settings, agent_modules=(), results_retention_s=0.0)
    with executor_thread(own, registry=AgentRegistry()) as executor:
        wait_for(
            lambda: not any(p.expiring for p in executor._parts.values()),
            timeout_s=300,
            what="retention to expire the ended runs",
        )
        time.sleep(2.0)  # the last group commit
    # Roll the active segments (segment.ms), so the cleaner may compact what was written.
    time.sleep(0.5)
    _fill_marker(settings)


def _fill_marker(settings: Settings) -> None:
    producer = Producer(producer_config(settings))
    for topic in ("sessions", "results"):
        producer.produce(settings.topic(topic), key=b"bench-roll", value=None)
    producer.flush(30)


def _compacted(settings: Settings, *, timeout_s: float = 240.0) -> bool:
    """Wait until the log cleaner has removed the tombstoned bodies (or give up)."""
    target = LIVE * CALLS + ENDED + LIVE + 10_000  # live bodies, every snapshot, slack
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _count(settings) <= target:
            return True
        time.sleep(3.0)
    return False


def run(settings: Settings | None = None) -> dict[str, Any]:
    base = settings if settings is not None else Settings.from_env()
    with _one_partition(base) as s:
        _fill(s)
        baseline = _measure(s)
    with _one_partition(base) as s:
        _fill(s)
        _expire(s)
        compacted = _compacted(s)
        pruned = _measure(s)
    return {
        # The same partition without retention, measured in this run (the ratios' reference).
        "no_retention": baseline,
        **pruned,
        "compacted": 1.0 if compacted else 0.0,
        "ratio_restore_retention_vs_baseline": round(
            pruned["restore_s"] / baseline["restore_s"], 3
        ),
        "ratio_records_retention_vs_baseline": round(
            pruned["records_read"] / baseline["records_read"], 3
        ),
    }


def main() -> None:
    result = run()
    b, r = result["no_retention"], result
    print(f"restore of one partition: {ENDED:,} ended + {LIVE:,} live runs, {CALLS} bodies each")
    print(f"  no retention   {b['restore_s']:.3f} s   {b['records_read']:,.0f} records read")
    print(
        f"  retention      {r['restore_s']:.3f} s   {r['records_read']:,.0f} records read"
        f"   (log compacted: {'yes' if r['compacted'] else 'NO, timed out'})"
    )
    print(
        f"  ratio          {result['ratio_restore_retention_vs_baseline']:.3f} of the baseline's time"
    )


if __name__ == "__main__":
    main()
