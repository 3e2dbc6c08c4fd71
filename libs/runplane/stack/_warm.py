"""Warm a freshly started broker before ``runplane up`` returns.

A broker that has just started serves its first transactional runs many times slower than
later ones. Profiling a fresh local broker (``python -m runplane.stack._warm``, which prints the
figures below for the broker it is pointed at) shows where that goes:

- the group and transaction coordinators: ``__consumer_offsets`` and ``__transaction_state``
  are created on first use (12 partitions each here) and every partition's coordinator must
  load before it answers; until then clients get COORDINATOR_LOAD_IN_PROGRESS and back off
  (librdkafka retries after 100 ms-1 s), so the first ``init_transactions`` and the first
  group join take seconds;
- the JVM: the broker's request path (fetch, produce, AddPartitionsToTxn, TxnOffsetCommit,
  EndTxn, the transaction markers) runs interpreted until the JIT has compiled it, so the
  first few hundred transactions each cost several times what they cost later.

``warm`` pays both before anyone is waiting: it opens a transactional producer and a consumer
group (creating and loading both coordinators), then runs consume→produce transactions on a
scratch topic until their latency stops falling (or a time budget runs out), and deletes the
topic. It returns what it measured, which ``runplane up`` prints.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from runplane.config import Settings
from runplane.kafka.clients import admin_config, consumer_config, transactional_producer_config

SCRATCH_PARTITIONS = 12
BUDGET_S = 20.0  # at most this long for the rounds, once the coordinators answer
WINDOW = 100  # rounds compared: warm when one window's median is no better than the last's
MIN_ROUNDS = 300
MAX_ROUNDS = 3000


@dataclass(frozen=True)
class WarmReport:
    """What warming measured: the coordinators' first answers and the rounds' latency curve."""

    transaction_coordinator_s: float
    group_coordinator_s: float
    rounds: int
    #: median ms of each WINDOW consecutive transactions, in order: the warm-up curve
    windows_ms: tuple[float, ...]
    seconds: float

    def summary(self) -> str:
        first, last = (self.windows_ms[0], self.windows_ms[-1]) if self.windows_ms else (0, 0)
        return (
            f"broker warmed in {self.seconds:.1f}s: transaction coordinator "
            f"{self.transaction_coordinator_s:.1f}s, group {self.group_coordinator_s:.1f}s, "
            f"{self.rounds} transactions at {first:.1f} → {last:.1f} ms each"
        )


def _settled(windows: list[float]) -> bool:
    # Warm once the median of the last window is no better than 0.95x the one before it.
    return len(windows) >= 2 and windows[-1] >= 0.95 * windows[-2]


def warm(
    bootstrap: str,
    *,
    budget_s: float = BUDGET_S,
    progress: Callable[[str], None] | None = None,
) -> WarmReport:
    """Open both coordinators and run transactions on a scratch topic until warm."""
    began = time.monotonic()
    settings = Settings(bootstrap_servers=bootstrap)
    tag = uuid.uuid4().hex[:8]
    topic = f"__runplane.warm.{tag}"
    client = AdminClient(admin_config(settings))
    client.create_topics([NewTopic(topic, SCRATCH_PARTITIONS, 1)])[topic].result(30)
    try:
        if progress:
            progress("warming the broker: opening the transaction and group coordinators")
        producer = Producer(transactional_producer_config(settings, f"runplane-warm-{tag}"))
        producer.init_transactions(60)
        txn_at = time.monotonic()
        consumer = Consumer(consumer_config(settings, f"runplane-warm-{tag}"))
        consumer.subscribe([topic])
        while not consumer.assignment():
            consumer.poll(0.1)
        group_at = time.monotonic()
        if progress:
            progress("warming the broker: transactions until their latency settles")
        # The budget is for the rounds: the coordinators must load before any service runs.
        latencies, windows = _rounds(producer, consumer, topic, time.monotonic() + budget_s)
        consumer.close()
    finally:
        client.delete_topics([topic])[topic].result(30)
    return WarmReport(
        transaction_coordinator_s=round(txn_at - began, 2),
        group_coordinator_s=round(group_at - txn_at, 2),
        rounds=len(latencies),
        windows_ms=tuple(round(w, 2) for w in windows),
        seconds=round(time.monotonic() - began, 2),
    )


def _rounds(
    producer: Producer, consumer: Consumer, topic: str, deadline: float
) -> tuple[list[float], list[float]]:
    """Consume→produce transactions (the services' shape) until settled or the deadline."""
    latencies: list[float] = []
    windows: list[float] = []
    value = b"w" * 300
    n = 0
    while time.monotonic() < deadline and len(latencies) < MAX_ROUNDS:
        t0 = time.perf_counter()
        producer.begin_transaction()
        for p in range(SCRATCH_PARTITIONS):
            producer.produce(topic, key=str(n).encode(), value=value, partition=p)
        consumer.consume(SCRATCH_PARTITIONS, timeout=0)
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        if positions:
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        latencies.append((time.perf_counter() - t0) * 1000)
        n += 1
        if n % WINDOW == 0:
            windows.append(statistics.median(latencies[-WINDOW:]))
            if n >= MIN_ROUNDS and _settled(windows):
                break
    if n % WINDOW:  # the budget ran out mid-window: its median is still the latest figure
        windows.append(statistics.median(latencies[-(n % WINDOW) :]))
    return latencies, windows


def after_start(bootstrap: str, action: str, progress: Callable[[str], None] | None) -> str:
    """``runplane up``'s hook: warm a broker it has just started; the action line to show.

    ``RUNPLANE_STACK_WARM_S`` bounds the time spent (default 20; 0 skips warming). A broker
    that was already running is warm. Failing to warm never fails ``up``: it is said instead.
    """
    budget = float(os.environ.get("RUNPLANE_STACK_WARM_S", BUDGET_S))
    if not action.startswith("started") or budget <= 0:
        return action
    try:
        return f"{action}; {warm(bootstrap, budget_s=budget, progress=progress).summary()}"
    except (KafkaException, RuntimeError) as exc:
        return f"{action}; not warmed ({exc})"


def main() -> None:
    """Profile (and warm) the broker ``RUNPLANE_BOOTSTRAP_SERVERS`` points at."""
    settings = Settings.from_env()
    try:
        report = warm(settings.bootstrap_servers, progress=print)
    except KafkaException as exc:
        raise SystemExit(f"cannot warm {settings.bootstrap_servers}: {exc}") from None
    print(report.summary())
    print("median ms per transaction, by 100:", " ".join(f"{w:.1f}" for w in report.windows_ms))


if __name__ == "__main__":
    main()
