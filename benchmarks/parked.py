"""Parked runs at scale: executor memory with eviction on, and the time to restore after a kill.

    python -m benchmarks.parked [--runs 100000] [--executors 2]

Two executor *processes* (``python -m services.executor``, so each one's memory is its own)
serve scratch topics. ``--runs`` runs of an agent that asks for an approval and waits are
admitted as admission writes them (RunAdmitted + StartRun); every run parks AWAITING_HUMAN
(counted from the OpenTasks on ``tasks.commands``). With ``RUNPLANE_EXECUTOR_IDLE_GRACE_S``
short, parked runs are evicted from memory: what an executor keeps is its restored tables
(the ``sessions`` snapshots and the ``results`` rows) and the Python process. Reported:

- each executor's resident memory (VmRSS) once every run is parked and evicted, and per
  thousand parked runs it owns;
- SIGKILL one executor: the time until the survivor owns and has restored every partition
  (its ``/readyz`` answers 200 again after going unready), i.e. session timeout + rebalance +
  restore, and the restore alone as the survivor logs it;
- a sample of the killed executor's runs is then decided (TaskDecision), and the time until
  they all complete on the survivor.

Numbers only; nothing here asserts a timing. Agent module: ``benchmarks.parked_agent``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Consumer, TopicPartition

from benchmarks.executor import scratch_topics
from runplane.config import Settings
from runplane.kafka.clients import consumer_config
from runplane.wire import DecisionOutcome, RunStatus, TaskDecision
from tests.helpers.harness import admit, plain_producer, send, sessions

REPO_ROOT = Path(__file__).resolve().parents[1]
ADMIT_BATCH = 5_000


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _end_total(settings: Settings, topic: str) -> int:
    consumer = Consumer(consumer_config(settings, "runplane-reader-parked"))
    try:
        full = settings.topic(topic)
        parts = consumer.list_topics(full, timeout=10).topics[full].partitions
        return sum(
            consumer.get_watermark_offsets(TopicPartition(full, p), timeout=10)[1] for p in parts
        )
    finally:
        consumer.close()


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _start_executor(settings: Settings, n: int, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_PARTITIONS": str(settings.partitions),
        "RUNPLANE_INSTANCE_ID": f"parked-{n}",
        "RUNPLANE_AGENT_MODULES": "benchmarks.parked_agent",
        "RUNPLANE_EXECUTOR_PORT": str(port),
        "RUNPLANE_EXECUTOR_IDLE_GRACE_S": "2",
        "RUNPLANE_LOG_LEVEL": "INFO",
        "PYTHONPATH": str(REPO_ROOT),
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "services.executor"], env=env, stdout=out, stderr=out
        )


def _restore_seconds(log: Path) -> list[float]:
    """The ``seconds`` of every "partitions assigned and restored" line in a JSON log."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if "partitions assigned and restored" in line:
            try:
                found.append(float(json.loads(line).get("seconds", 0.0)))
            except (ValueError, AttributeError):
                continue
    return found


def _wait(what: str, pred: Any, timeout_s: float, every_s: float = 1.0) -> float:
    started = time.monotonic()
    while not pred():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(every_s)
    return time.monotonic() - started


def run(
    settings: Settings | None = None, runs: int = 100_000, executors: int = 2
) -> dict[str, Any]:
    base = settings if settings is not None else Settings.from_env()
    out: dict[str, Any] = {"runs": runs, "executors": executors}
    logs = REPO_ROOT / "bench" / "parked-logs"
    logs.mkdir(parents=True, exist_ok=True)
    with scratch_topics(base) as s:
        ports = [18420 + i for i in range(executors)]
        procs = [
            _start_executor(s, i, ports[i], logs / f"executor-{i}.log") for i in range(executors)
        ]
        try:
            _wait("executors ready", lambda: all(_ready(p) for p in ports), 180)
            idle = [_rss_mib(p.pid) for p in procs]
            out["rss_mib_idle"] = [round(r, 1) for r in idle]
            producer = plain_producer(s)
            started = time.monotonic()
            admitted = []
            for i in range(0, runs, ADMIT_BATCH):
                n = min(ADMIT_BATCH, runs - i)
                admitted += admit(producer, s, "parked", ({"i": i + k} for k in range(n)))
            out["admit_s"] = round(time.monotonic() - started, 1)
            parked_s = _wait(
                f"{runs} runs parked",
                lambda: _end_total(s, "tasks.commands") >= runs,
                timeout_s=max(600.0, runs / 20),
                every_s=5.0,
            )
            out["park_all_s"] = round(parked_s + out["admit_s"], 1)
            out["parked_per_s"] = round(runs / (parked_s + out["admit_s"]), 1)
            time.sleep(10)  # past the idle grace: parked runs are evicted
            rss = [_rss_mib(p.pid) for p in procs]
            out["rss_mib"] = [round(r, 1) for r in rss]
            out["rss_mib_per_1000_parked"] = round(
                sum(rss) / executors / (runs / executors) * 1000, 2
            )

            # Kill one; the survivor takes its partitions over.
            victim = procs[0]
            restores_before = len(_restore_seconds(logs / "executor-1.log"))
            killed = time.monotonic()
            victim.send_signal(signal.SIGKILL)
            victim.wait(30)
            _wait("the survivor rebalancing", lambda: not _ready(ports[1]), 60, every_s=0.2)
            _wait("the survivor ready again", lambda: _ready(ports[1]), 900, every_s=0.2)
            out["kill_to_ready_s"] = round(time.monotonic() - killed, 2)
            restores = _restore_seconds(logs / "executor-1.log")[restores_before:]
            out["restore_s"] = restores
            # Decide a sample of all runs; they all complete on the survivor.
            sample = admitted[:: max(1, runs // 200)]
            for a in sample:
                send(
                    producer,
                    s,
                    "runs.inbox",
                    a.run_id,
                    TaskDecision(
                        session_id=a.run_id,
                        task_id=f"{a.run_id}/0/0",
                        era=0,
                        call_seq=0,
                        outcome=DecisionOutcome.APPROVED,
                        decided_by=("bench-approver",),
                        decided_ms=int(time.time() * 1000),
                    ),
                )
            decided = time.monotonic()
            ids = {a.run_id for a in sample}
            _wait(
                "the decided sample to complete",
                lambda: (
                    sum(
                        1
                        for sid, snap in sessions(s).items()
                        if sid in ids and snap.status is RunStatus.COMPLETED
                    )
                    == len(ids)
                ),
                600,
                every_s=2.0,
            )
            out["sample"] = len(ids)
            out["sample_complete_s"] = round(time.monotonic() - decided, 1)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=None, help="default 100,000")
    parser.add_argument("--executors", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(run(runs=args.runs, executors=args.executors), indent=2))


if __name__ == "__main__":
    main()
