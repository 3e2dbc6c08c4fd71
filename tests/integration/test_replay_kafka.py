"""Replay testing on the real broker: runs of the refund example, one parked on its approval
and one completed, are exported with ``runplane journal export`` and replayed with ``runplane
replay`` — OK under the code that recorded them; against a diverging stand-in (the new image's
code) ``runplane replay --from-kafka``, the deploy gate's command, fails and names the first
divergence with both requests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runplane.config import Settings
from runplane.fakes import FakeBillingServer
from runplane.wire import DecisionOutcome, OpenTask, RunStatus, TaskDecision
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, executor_thread, plain_producer, read_topic, send, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[FakeBillingServer]:
    with FakeBillingServer(counts_path=tmp_path / "billing.json") as server:
        yield server


def _cli(settings: Settings, modules: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_AGENT_MODULES": modules,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests" / "integration")]),
    }
    return subprocess.run(
        [str(Path(sys.executable).parent / "runplane"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _status(settings: Settings, run_id: str, status: RunStatus) -> bool:
    snap = sessions(settings).get(run_id)
    return snap is not None and snap.status is status


def _park_two_and_finish_one(settings: Settings, billing: FakeBillingServer) -> tuple[str, str]:
    own = ExecutorSettings(
        base=settings, billing_url=billing.url, agent_modules=("examples.refund",)
    )
    producer = plain_producer(settings)
    with executor_thread(own):
        parked, done = admit(
            producer, settings, "refund", [{"invoice_id": "INV-7"}, {"invoice_id": "INV-8"}]
        )
        for run in (parked, done):
            wait_for(
                lambda r=run.run_id: _status(settings, r, RunStatus.AWAITING_HUMAN),
                timeout_s=90,
                what="approval park",
            )
        [task] = [
            r
            for _, r in read_topic(settings, "tasks.commands")
            if isinstance(r, OpenTask) and r.session_id == done.run_id
        ]
        decision = TaskDecision(
            session_id=done.run_id,
            task_id=task.task_id,
            era=task.era,
            call_seq=task.call_seq,
            outcome=DecisionOutcome.APPROVED,
            decided_by=("alice",),
            decided_ms=int(time.time() * 1000),
        )
        send(producer, settings, "runs.inbox", done.run_id, decision)
        wait_for(
            lambda: _status(settings, done.run_id, RunStatus.COMPLETED),
            timeout_s=90,
            what="completion",
        )
    return parked.run_id, done.run_id


def test_exported_runs_replay_and_a_diverging_image_fails_the_gate(
    settings: Settings, billing: FakeBillingServer, tmp_path: Path
) -> None:
    parked, done = _park_two_and_finish_one(settings, billing)
    out = tmp_path / "runs.json"
    exported = _cli(
        settings, "examples.refund", "journal", "export", parked, done, "--out", str(out)
    )
    assert exported.returncode == 0, exported.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [r["snapshot"]["session_id"] for r in data["runs"]] == [parked, done]
    assert all("0/0" in r["requests"] for r in data["runs"])  # bodies attached at export

    same = _cli(settings, "examples.refund", "replay", str(out), "--json")
    assert same.returncode == 0, same.stdout + same.stderr
    assert json.loads(same.stdout)["ok"] == 2

    changed = _cli(settings, "standins.refund_diverging", "replay", str(out), "--json")
    assert changed.returncode == 1, changed.stdout + changed.stderr
    reports = json.loads(changed.stdout)["reports"]
    for report in reports:
        d = report["divergence"]
        assert report["verdict"] == "diverged" and (d["era"], d["call_seq"]) == (0, 0)
        assert d["recorded"]["request"]["args"] == {
            "invoice_id": d["issued"]["request"]["args"]["invoice_id"]
        }
        assert d["issued"]["request"]["args"]["currency"] == "EUR"

    # The gate's command: the runs in flight (only the parked one), read from the topics.
    gate = _cli(settings, "standins.refund_diverging", "replay", "--from-kafka", "--json")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    [report] = json.loads(gate.stdout)["reports"]
    assert report["run_id"] == parked and report["divergence"]["call_seq"] == 0
    passing = _cli(settings, "examples.refund", "replay", "--from-kafka", "--sample", "5")
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert f"{parked} (refund): OK" in passing.stdout


def test_the_charts_gate_command_fails_the_upgrade_on_a_diverging_image(
    settings: Settings, billing: FakeBillingServer
) -> None:
    from tests.replay.gate import find_helm, gate_jobs

    helm = find_helm()
    if helm is None:
        pytest.skip("helm not found: run scripts/install-helm-tools.sh")
    [job] = gate_jobs(helm, "upgradeGate.enabled=true")
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    empty = _cli(settings, "standins.refund_diverging", *args)
    assert empty.returncode == 0, empty.stdout + empty.stderr  # nothing in flight: pass
    parked, _ = _park_two_and_finish_one(settings, billing)
    diverging = _cli(settings, "standins.refund_diverging", *args)
    assert diverging.returncode == 1, diverging.stdout + diverging.stderr
    [report] = json.loads(diverging.stdout)["reports"]
    assert report["run_id"] == parked and report["verdict"] == "diverged"
    same = _cli(settings, "examples.refund", *args)
    assert same.returncode == 0, same.stdout + same.stderr
