"""End to end: from the emitter's produce to the run's COMPLETED status, beside raw Kafka.

    python -m benchmarks.e2e        # needs the local stack (`runplane up` / `make up`)

Admission and one executor run twice (``benchmarks.e2e_services``): as threads of this
process, as ``runplane serve all`` runs them, and as one stock process per service, as the
chart deploys them (rows "· processes"); both with their default settings (whatever batching
they do is what is measured). Two agents (``benchmarks.e2e_agents``): ``step3`` makes three
``ctx.tool`` calls to a tool returning n+1; ``noop`` returns its input. Each is driven as a closed loop (``benchmarks.e2e_drive``) one at a time, 16 in flight
and 200 in flight; latency is from just before the AdmissionRequest's produce to the moment
the run's COMPLETED SessionSnapshot is readable (read_committed) on ``sessions``.

The raw-Kafka baseline (``benchmarks.e2e_baseline``) is the same path with no runplane in it,
measured in the same run by the same driver: two transactional consume→produce hops (as
admission and the executor are), each committing as soon as its input is drained. It is
measured before runplane (after a long warm-up: the broker's JIT) and again after it; the
ratios use, level by level, whichever of the two did more runs/s (both are in
``raw_kafka_runs``).

Where the time goes, per hop, for the lone 3-step run (medians, from record timestamps, which
are the producing service's wall clock in ms, and the watcher's arrival times):

    emit → admission produced StartRun        admission: fetch + batch window + handler
    StartRun produced → readable              admission's transaction commit
    StartRun readable → COMPLETED produced    executor: fetch + batch window + the run's steps
    COMPLETED produced → readable             executor's last commit

(A lone 3-step run writes no snapshot between its start and its end: the executor runs its
three steps before the batch commits, so there is no finer stamp inside the executor.)

Numbers only: nothing here asserts a timing.
"""

from __future__ import annotations

import statistics
import time
from functools import partial
from typing import Any

from confluent_kafka import Message, Producer

from benchmarks import e2e_agents, e2e_baseline, e2e_services
from benchmarks.e2e_cpu import CpuMeter
from benchmarks.e2e_drive import Judge, Watcher, closed_loop
from benchmarks.executor import scratch_topics
from runplane.config import Settings
from runplane.kafka.clients import producer_config
from runplane.wire import (
    AdmissionRequest,
    RunStatus,
    SessionSnapshot,
    StartRun,
    TenantId,
    serde_for,
)

# (in flight, completions measured): each level runs a few seconds on this machine.
LEVELS = ((1, 100), (16, 800), (200, 2000))
WARM = 200  # runs before the first level, at 16 in flight (the first ones pay for warm-up)
BROKER_WARM = 4000  # the raw path's first warm-up: ~10 s of transactions for the broker's JIT
WORKLOADS = e2e_agents.CAPABILITIES
# Each mode's rows are named "<agent>" (threads) or "<agent> · processes".
_SERVICES = {"threads": e2e_services.threads, "processes": e2e_services.processes}


def _judge(settings: Settings) -> Judge:
    """Watcher judge: the admission key a COMPLETED snapshot completes, plus hop stamps."""
    serde = serde_for(settings)
    logical = {settings.topic(n): n for n in ("sessions", "runs.inbox")}

    def judge(msg: Message) -> tuple[str | None, dict[str, float]]:
        record = serde.decode(logical[msg.topic() or ""], msg.value() or b"")
        produced = (msg.timestamp()[1] or 0) / 1000
        now = time.time()
        if isinstance(record, StartRun):
            return None, {"start_produced": produced, "start_readable": now}
        if isinstance(record, SessionSnapshot) and record.status is RunStatus.COMPLETED:
            return record.admission_key, {"done_produced": produced}
        return None, {}

    return judge


def _hops(watcher: Watcher, keys: set[str]) -> dict[str, float]:
    """Median ms per hop over ``keys`` (admission keys), from the watcher's stamps."""
    st = watcher.stamps
    names = ("start_produced", "start_readable", "done_produced")
    spans: dict[str, list[float]] = {
        "emit_to_admission_output": [],
        "admission_commit": [],
        "executor_run": [],
        "executor_last_commit": [],
    }
    for key in keys:
        run = st.record_key.get(key)
        if run is None or any(run not in st.hops.get(n, {}) for n in names):
            continue
        t = [st.sent[key], *(st.hops[n][run] for n in names), st.done[key]]
        for name, a, b in zip(spans, t, t[1:], strict=False):
            spans[name].append((b - a) * 1000)
    out = {k: round(statistics.median(v), 1) for k, v in spans.items() if v}
    # Medians of the hops need not add up to the median run: say what the runs took.
    totals = [(st.done[k] - st.sent[k]) * 1000 for k in keys if k in st.done]
    return {**out, "total": round(statistics.median(totals), 1)} if totals else out


def _runplane(base: Settings, mode: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    suffix = "" if mode == "threads" else f" · {mode}"
    with scratch_topics(base) as settings:
        serde = serde_for(settings)
        producer = Producer(producer_config(settings, linger_ms=0))
        topic = settings.topic("admission")
        watcher = Watcher(
            settings, [settings.topic("sessions"), settings.topic("runs.inbox")], _judge(settings)
        )
        try:
            with _SERVICES[mode](settings) as pids:
                meter = CpuMeter.with_broker(settings, pids)
                for workload in WORKLOADS:

                    def send(key: str, workload: str = workload) -> None:
                        request = AdmissionRequest(
                            admission_key=key,
                            capability=workload,
                            input_json='{"n":1}',
                            tenant=TenantId("bench"),
                            initiator="bench",
                            requested_ms=time.time_ns() // 1_000_000,
                        )
                        producer.produce(
                            topic, key=key.encode(), value=serde.encode("admission", request)
                        )
                        producer.poll(0)

                    warm = closed_loop(
                        send, watcher, in_flight=16, total=WARM, tag=f"{workload}-warm"
                    )
                    levels = [
                        meter.level(
                            total,
                            partial(
                                closed_loop,
                                send,
                                watcher,
                                in_flight=in_flight,
                                total=total,
                                tag=f"{workload}-{in_flight}",
                            ),
                        )
                        for in_flight, total in LEVELS
                    ]
                    out[workload + suffix] = {
                        "warm_up_runs_per_s": warm.runs_per_s,
                        "levels": levels,
                    }
            if mode == "threads":
                lone = {f"step3-1-{i}" for i in range(LEVELS[0][1])}
                out["hops_ms_lone_step3"] = _hops(watcher, lone)
        finally:
            watcher.close()
    return out


def _better(first: dict[str, Any], last: dict[str, Any]) -> dict[str, Any]:
    """Per level, the raw run with more runs/s: the ratios never flatter runplane."""
    levels = [
        max(a, b, key=lambda lv: lv["runs_per_s"])
        for a, b in zip(first["levels"], last["levels"], strict=True)
    ]
    return {"warm_up_runs_per_s": last["warm_up_runs_per_s"], "levels": levels}


def run(settings: Settings | None = None) -> dict[str, Any]:
    """The raw path first (its long warm-up also lets the broker's JIT compile the
    transactional path), then runplane in each mode, then the raw path again. A broker keeps
    getting faster for its first tens of thousands of transactions: measured only first or
    only last, the raw path would be slower or faster than it was while runplane ran."""
    base = settings if settings is not None else Settings.from_env()
    result: dict[str, Any] = {}
    with scratch_topics(base) as s:
        first = e2e_baseline.measure(s, LEVELS, BROKER_WARM)
    for mode in e2e_services.MODES:
        result.update(_runplane(base, mode))
    with scratch_topics(base) as s:
        last = e2e_baseline.measure(s, LEVELS, WARM)
    result["raw_kafka"] = _better(first, last)
    result["raw_kafka_runs"] = {"first": first, "last": last}
    return result


def main() -> None:
    from benchmarks.report import e2e_lines

    print("\n".join(e2e_lines(run())))


if __name__ == "__main__":
    main()
