"""Executor throughput and latency on the real broker, against a plain transactional loop.

    python -m benchmarks.executor        # needs the local stack (`runplane up` / `make up`)

What it measures, on one executor instance (a thread of this process):

1. **Max rate.** ``RUNS`` runs of an agent making 5 tool calls to an instant tool are admitted
   in one burst (RunAdmitted + StartRun, as admission writes them); completed runs/s and
   effect steps/s are taken from the first admission to the last completion.
2. **Latency at half the max rate.** Runs are admitted at a steady 50 % of the rate found in
   (1) for ``PACED_S`` seconds; admission-to-completion latency is the time from the
   StartRun's ``admitted_ms`` to the moment the run's COMPLETED status update becomes
   readable (read_committed) on ``admission`` — i.e. until it is durable and visible.
3. **Baseline.** A plain confluent-kafka consume→produce loop with the same transactional
   discipline (one transactional producer, ``send_offsets_to_transaction`` with the group
   metadata, same batch bounds) that writes, per input message, as many records of the same
   size as the executor wrote per run — I/O with no engine. Same two phases.

A further burst runs under cProfile (separately: the profiler slows Python down); the top
functions by own time are printed, waits on Kafka and the selector left out, which is where
the executor thread's CPU goes. ``python -m benchmarks.hotpath`` breaks the per-step CPU down
without Kafka. Numbers only: nothing here asserts a timing.
"""

from __future__ import annotations

import contextlib
import cProfile
import dataclasses
import io
import json
import pstats
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from runplane.config import Settings
from runplane.core import AgentRegistry, EffectDecl, Recovery, StepCtx
from runplane.kafka.clients import admin, consumer_config, transactional_producer_config
from runplane.kafka.topics import create_topics, delete_topics
from runplane.kafka.txn import TransactionalProducer
from runplane.providers import FunctionTool
from runplane.runs.client import ready_batch
from runplane.wire import RunStatus, RunStatusUpdate, serde_for
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, executor_thread, plain_producer

STEPS = 5
RUNS = 600
PACED_S = 8.0

REGISTRY = AgentRegistry()


@REGISTRY.agent(
    "bench5",
    effects=[EffectDecl("instant", mutating=False, recovery=Recovery.RETRY, timeout_s=5.0)],
)
async def bench5(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    total = 0
    for i in range(STEPS):
        got = await ctx.tool("instant", {"i": i, "n": input["n"]})
        total += int(got["i"])
    return {"total": total}


def _instant(i: int, n: int) -> dict[str, int]:
    return {"i": i, "n": n}


class CompletionWatch:
    """Reads ``admission`` and stamps each run's COMPLETED update as it becomes visible."""

    def __init__(self, settings: Settings) -> None:
        self._serde = serde_for(settings)
        self._consumer = Consumer(
            consumer_config(settings, f"bench-watch-{uuid.uuid4().hex[:8]}", fetch_wait_max_ms=5)
        )
        topic = settings.topic("admission")
        parts = self._consumer.list_topics(topic, timeout=10).topics[topic].partitions
        self._consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        self.done: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for msg in ready_batch(self._consumer, 1000, 0.05):
                value = msg.value()
                if msg.error() is not None or not isinstance(value, bytes):
                    continue
                record = self._serde.decode("admission", value)
                if isinstance(record, RunStatusUpdate) and record.status is RunStatus.COMPLETED:
                    self.done.setdefault(record.run_id, time.time())

    def wait(self, ids: set[str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not ids <= self.done.keys():
            if time.monotonic() > deadline:
                missing = len(ids - self.done.keys())
                raise TimeoutError(f"{missing} runs did not complete in {timeout_s}s")
            time.sleep(0.01)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


def _percentiles(latencies_ms: list[float]) -> dict[str, float]:
    if not latencies_ms:
        return {"p50_ms": float("nan"), "p99_ms": float("nan")}
    ordered = sorted(latencies_ms)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered), 1), "p99_ms": round(p99, 1)}


@contextlib.contextmanager
def scratch_topics(settings: Settings) -> Iterator[Settings]:
    own = dataclasses.replace(
        settings,
        topic_prefix=f"bench{uuid.uuid4().hex[:6]}.",
        instance_id=f"bench-{uuid.uuid4().hex[:6]}",
    )
    client = admin(own)
    create_topics(own, client)
    try:
        yield own
    finally:
        delete_topics(own, client)


def _executor_phase(
    settings: Settings, exec_settings: Callable[[Settings], ExecutorSettings]
) -> dict[str, Any]:
    tools = {
        "instant": FunctionTool("instant", _instant, decl=REGISTRY["bench5"].effects["instant"])
    }
    producer = plain_producer(settings)
    profile = cProfile.Profile()
    watch = CompletionWatch(settings)
    own = exec_settings(settings)
    try:
        with executor_thread(
            own, tools=tools, providers={}, registry=REGISTRY, profile=profile
        ) as ex:
            # Warm up (first transactions, connections) outside the measurement.
            warm = admit(producer, settings, "bench5", [{"n": -1}] * 20)
            watch.wait({r.run_id for r in warm}, 60)
            records0, commits0 = ex.stats["records"], ex.stats["commits"]

            started = time.time()
            runs = admit(producer, settings, "bench5", [{"n": i} for i in range(RUNS)])
            ids = {r.run_id for r in runs}
            watch.wait(ids, 300)
            elapsed = max(watch.done[i] for i in ids) - started
            max_runs_s = RUNS / elapsed
            records_per_run = (ex.stats["records"] - records0) / RUNS
            commits = ex.stats["commits"] - commits0

            rate = max_runs_s / 2
            paced = _paced(
                lambda n: admit(producer, settings, "bench5", [{"n": k} for k in range(n)]), rate
            )
            watch.wait({r.run_id for r in paced}, 120)
            latencies = [(watch.done[r.run_id] * 1000 - r.admitted_ms) for r in paced]
    finally:
        watch.close()
    return {
        "runs": RUNS,
        "completed_runs_per_s": round(max_runs_s, 1),
        "effect_steps_per_s": round(max_runs_s * STEPS, 1),
        "records_per_run": round(records_per_run, 2),
        "runs_per_transaction": round(RUNS / max(1, commits), 1),
        "paced_runs_per_s": round(rate, 1),
        **_percentiles(latencies),
    }


def _profile_phase(settings: Settings, own: ExecutorSettings) -> list[str]:
    """Where the time goes: a burst on fresh topics under cProfile (kept out of the figures,
    since the profiler slows pure Python down)."""
    tools = {
        "instant": FunctionTool("instant", _instant, decl=REGISTRY["bench5"].effects["instant"])
    }
    producer = plain_producer(settings)
    watch = CompletionWatch(settings)
    profile = cProfile.Profile()
    try:
        with executor_thread(own, tools=tools, providers={}, registry=REGISTRY, profile=profile):
            runs = admit(producer, settings, "bench5", [{"n": i} for i in range(RUNS // 2)])
            watch.wait({r.run_id for r in runs}, 300)
    finally:
        watch.close()
    return _top(profile)


def _paced(emit: Callable[[int], list[Any]], rate_per_s: float) -> list[Any]:
    """Emit at ``rate_per_s`` for PACED_S seconds, in 20 ms ticks."""
    out: list[Any] = []
    tick = 0.02
    owed = 0.0
    end = time.monotonic() + PACED_S
    while time.monotonic() < end:
        owed += rate_per_s * tick
        n = int(owed)
        if n:
            owed -= n
            out.extend(emit(n))
        time.sleep(tick)
    return out


# Calls that wait (on the broker, on the network, for the next message) rather than compute:
# left out of the table, which is about where the executor thread's CPU goes. The thread also
# lives through startup (init_transactions, restore) and idles between runs; those waits
# would otherwise head the list and hide the hot path.
_WAITS = (
    "of 'cimpl.Consumer' objects",
    "'init_transactions' of 'cimpl.Producer'",
    "'poll' of 'cimpl.Producer'",
    "'flush' of 'cimpl.Producer'",
    "'poll' of 'select.epoll' objects",
    "load_verify_locations",
    "set_default_verify_paths",
)


def _top(profile: cProfile.Profile, n: int = 12) -> list[str]:
    buf = io.StringIO()
    stats = pstats.Stats(profile, stream=buf)
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]  # pstats keeps its rows here
    for key in [k for k in table if any(w in k[2] for w in _WAITS)]:
        del table[key]
    stats.sort_stats("tottime").print_stats(n)
    lines = [ln.rstrip() for ln in buf.getvalue().splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
    return lines[start : start + n + 1]


# ---------------------------------------------------------------------------------- baseline
def _baseline_phase(
    settings: Settings, records_per_msg: int, value_bytes: int, batch_max: int, batch_ms: float
) -> dict[str, Any]:
    """Plain loop: runs.inbox → ``records_per_msg`` records to journal, then a marker record
    on ``admission`` whose arrival the watcher times (key = message id)."""
    inbox, journal, marker = (
        settings.topic("runs.inbox"),
        settings.topic("journal"),
        settings.topic("admission"),
    )
    stop = threading.Event()
    ready = threading.Event()

    def loop() -> None:
        txp = TransactionalProducer(
            transactional_producer_config(
                settings, f"bench-base-{uuid.uuid4().hex[:6]}", linger_ms=1
            )
        )
        txp.init()
        consumer = Consumer(
            consumer_config(settings, f"{settings.topic_prefix}baseline", fetch_wait_max_ms=5)
        )
        consumer.subscribe([inbox], on_assign=lambda c, p: ready.set())
        payload = b"x" * value_bytes
        pending: list[Any] = []
        opened = 0.0
        while not stop.is_set():
            msgs = ready_batch(consumer, batch_max, 0.001 if pending else 0.05)
            for msg in msgs:
                if msg.error() is None:
                    if not pending:
                        opened = time.monotonic()
                    pending.append(msg)
            if pending and (
                len(pending) * (records_per_msg + 1) >= batch_max
                or time.monotonic() - opened >= batch_ms / 1000
            ):
                txp.begin()
                for msg in pending:
                    key = msg.key()
                    for _ in range(records_per_msg):
                        txp.produce(journal, key, payload)
                    txp.produce(marker, key, msg.value())
                positions = [
                    tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0
                ]
                txp.commit(positions, consumer.consumer_group_metadata())
                pending = []
        consumer.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    ready.wait(60)
    producer: Producer = plain_producer(settings)
    arrived: dict[str, float] = {}
    watcher = Consumer(
        consumer_config(settings, f"bench-bw-{uuid.uuid4().hex[:6]}", fetch_wait_max_ms=5)
    )
    parts = watcher.list_topics(marker, timeout=10).topics[marker].partitions
    watcher.assign([TopicPartition(marker, p, 0) for p in parts])
    watching = threading.Event()

    def watch() -> None:
        while not watching.is_set():
            for msg in ready_batch(watcher, 1000, 0.05):
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    continue
                key = msg.key()
                if isinstance(key, bytes):
                    arrived.setdefault(key.decode(), time.time())

    wt = threading.Thread(target=watch, daemon=True)
    wt.start()

    def emit(n: int) -> list[tuple[str, float]]:
        sent = []
        for _ in range(n):
            key = uuid.uuid4().hex
            now = time.time()
            producer.produce(inbox, key=key.encode(), value=json.dumps({"t": now}).encode())
            sent.append((key, now))
        producer.poll(0)
        producer.flush(30)
        return sent

    def wait(keys: list[tuple[str, float]], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not all(k in arrived for k, _ in keys):
            if time.monotonic() > deadline:
                raise TimeoutError("baseline messages did not arrive")
            time.sleep(0.01)

    try:
        wait(emit(20), 60)
        started = time.time()
        burst = emit(RUNS)
        wait(burst, 300)
        elapsed = max(arrived[k] for k, _ in burst) - started
        max_rate = RUNS / elapsed
        paced = _paced(emit, max_rate / 2)
        wait(paced, 120)
        latencies = [(arrived[k] - t) * 1000 for k, t in paced]
    finally:
        stop.set()
        watching.set()
        thread.join(10)
        wt.join(5)
        watcher.close()
    return {
        "messages_per_s": round(max_rate, 1),
        "records_per_message": records_per_msg + 1,
        "paced_messages_per_s": round(max_rate / 2, 1),
        **_percentiles(latencies),
    }


def run(settings: Settings | None = None) -> dict[str, Any]:
    base = settings if settings is not None else Settings.from_env()
    batch = ExecutorSettings()

    with scratch_topics(base) as s:
        executor = _executor_phase(s, lambda st: ExecutorSettings(base=st, agent_modules=()))
    with scratch_topics(base) as s:
        executor["profile_top"] = _profile_phase(s, ExecutorSettings(base=s, agent_modules=()))
    with scratch_topics(base) as s:
        records = max(1, round(executor["records_per_run"]) - 1)
        baseline = _baseline_phase(s, records, 300, batch.batch_max, batch.batch_ms)
    return {
        "executor": executor,
        "baseline": baseline,
        "ratio_runs_vs_baseline_messages": round(
            executor["completed_runs_per_s"] / baseline["messages_per_s"], 3
        ),
        "ratio_p99_executor_vs_baseline": round(executor["p99_ms"] / baseline["p99_ms"], 2),
    }


def main() -> None:
    result = run()
    ex, bl = result["executor"], result["baseline"]
    print(f"executor (1 instance, {STEPS} instant tool steps per run, {ex['runs']} runs burst)")
    print(f"  completed runs/s      {ex['completed_runs_per_s']}")
    print(f"  effect steps/s        {ex['effect_steps_per_s']}")
    print(
        f"  records per run       {ex['records_per_run']}   runs per transaction {ex['runs_per_transaction']}"
    )
    print(
        f"  at {ex['paced_runs_per_s']} runs/s: p50 {ex['p50_ms']} ms  p99 {ex['p99_ms']} ms (admission → completion visible)"
    )
    print("baseline (plain confluent-kafka transactional consume→produce, same records per input)")
    print(f"  messages/s            {bl['messages_per_s']}")
    print(f"  at {bl['paced_messages_per_s']} msg/s: p50 {bl['p50_ms']} ms  p99 {bl['p99_ms']} ms")
    print(
        f"ratio executor runs/s ÷ baseline messages/s: {result['ratio_runs_vs_baseline_messages']}"
    )
    print(f"ratio p99 executor ÷ baseline: {result['ratio_p99_executor_vs_baseline']}")
    print("where the executor's CPU goes (cProfile, executor thread, by own time, waits left out):")
    for line in ex["profile_top"]:
        print("  " + line)


if __name__ == "__main__":
    main()
