"""Agent versions on the real broker (issue 16's "done means"): runs of version 1 parked on an
approval; version 2 deployed beside it with a changed call sequence — the parked runs complete
on 1, new runs start on 2; with only 2 deployed a run of 1 is parked on its version as soon as
the executor restores it (RUN_PARKED ``parked_on version:1`` journaled, the run not failed) and
the decision sent to it meanwhile is held in its snapshot, not dead-lettered; then a patched
1.1 replaces 1 and the parked run completes through the patched branch on that held decision,
with no operator step. ``runplane agents list`` shows the counts at each stage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
import standins.vflow_v1
import standins.vflow_v1_1
import standins.vflow_v2  # noqa: F401  (the three register "vflow" 1, 1.1 and 2)

from runplane.config import Settings
from runplane.core import REGISTRY, AgentRegistry
from runplane.core.engine import held_of, stranded_of
from runplane.fakes import FakeBillingServer
from runplane.wire import (
    AdmissionRequest,
    DeadLetter,
    DecisionOutcome,
    JournalKind,
    JournalRecord,
    OpenTask,
    RunStatus,
    TaskDecision,
)
from services.admission.decide import Admitted, CapabilitySpec, Position, decide
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import executor_thread, plain_producer, read_topic, send, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SPECS = {s.version: s for s in REGISTRY.versions("vflow")}
MODULES = {"1": "standins.vflow_v1", "1.1": "standins.vflow_v1_1", "2": "standins.vflow_v2"}


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[FakeBillingServer]:
    with FakeBillingServer(counts_path=tmp_path / "billing.json") as server:
        yield server


def _admit(
    settings: Settings, deployed: tuple[str, ...], n: int, pin: str | None = None
) -> list[str]:
    """Admission's pure decision for ``n`` requests (pinned to ``pin``), its journal record
    and StartRun produced."""
    producer = plain_producer(settings)
    caps = {"vflow": CapabilitySpec(None, versions=deployed)}
    out = []
    for i in range(n):
        key = f"k-{time.time_ns()}-{i}"
        request = AdmissionRequest(
            admission_key=key,
            capability="vflow",
            input_json=json.dumps({"invoice_id": f"INV-{i}"}),
            tenant="acme",
            initiator="emitter",
            agent_version=pin,
        )
        d = decide(None, key, Position("admission", 0, time.time_ns()), request, caps, 1)
        assert isinstance(d, Admitted)
        send(producer, settings, "journal", d.start.session_id, d.journal)
        send(producer, settings, "runs.inbox", d.start.session_id, d.start)
        out.append(d.start.session_id)
    return out


def _snap(settings: Settings, run_id: str) -> Any:
    return sessions(settings).get(run_id)


def _wait_status(settings: Settings, run_id: str, status: RunStatus) -> None:
    def there() -> bool:
        snap = _snap(settings, run_id)
        return snap is not None and snap.status is status

    wait_for(there, timeout_s=90, what=f"{run_id} {status}")


def _approve(settings: Settings, run_id: str) -> None:
    tasks = [
        r
        for _, r in read_topic(settings, "tasks.commands")
        if isinstance(r, OpenTask) and r.session_id == run_id
    ]
    task = tasks[-1]
    decision = TaskDecision(
        session_id=run_id,
        task_id=task.task_id,
        era=task.era,
        call_seq=task.call_seq,
        outcome=DecisionOutcome.APPROVED,
        decided_by=("alice",),
        decided_ms=int(time.time() * 1000),
    )
    send(plain_producer(settings), settings, "runs.inbox", run_id, decision)


def _deployed(settings: Settings, billing: FakeBillingServer, *versions: str) -> Any:
    own = ExecutorSettings(base=settings, billing_url=billing.url, agent_modules=())
    return executor_thread(own, registry=AgentRegistry([SPECS[v] for v in versions]))


def _cli(
    settings: Settings, versions: tuple[str, ...], *args: str
) -> subprocess.CompletedProcess[str]:
    """``runplane ARGS`` with the agent modules of ``versions`` deployed."""
    env = {
        **os.environ,
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_AGENT_MODULES": ",".join(MODULES[v] for v in versions),
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "libs"), str(ROOT), str(ROOT / "tests" / "integration")]
        ),
    }
    return subprocess.run(
        [str(Path(sys.executable).parent / "runplane"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _agents_list(settings: Settings, *versions: str) -> dict[str | None, tuple[int, bool, int]]:
    """Per version of vflow: (runs in flight, stranded, runs parked on their version)."""
    done = _cli(settings, versions, "agents", "list", "--json")
    assert done.returncode == 0, done.stderr
    rows = [r for r in json.loads(done.stdout) if r["capability"] == "vflow"]
    return {r["version"]: (r["in_flight"], r["stranded"], r["parked"]) for r in rows}


def _stranded(event: str) -> float:
    """The executors' runplane_executor_stranded_total{event} (this process's registry)."""
    value = prometheus_client.REGISTRY.get_sample_value(
        "runplane_executor_stranded_total", {"event": event}
    )
    return value or 0.0


def _chain(settings: Settings, run_id: str) -> list[JournalRecord]:
    return [
        r
        for _, r in read_topic(settings, "journal")
        if isinstance(r, JournalRecord) and r.session_id == run_id
    ]


def _output(settings: Settings, run_id: str) -> Any:
    return json.loads(_snap(settings, run_id).output_json)


def test_runs_finish_on_their_version_and_a_patched_version_takes_over(
    settings: Settings, billing: FakeBillingServer, tmp_path: Path
) -> None:
    with _deployed(settings, billing, "1"):
        a, b = _admit(settings, ("1",), 2)
        for run in (a, b):
            _wait_status(settings, run, RunStatus.AWAITING_HUMAN)
    assert {_snap(settings, r).agent_version for r in (a, b)} == {"1"}
    assert _agents_list(settings, "1") == {"1": (2, False, 0)}

    with _deployed(settings, billing, "1", "2"):
        [c] = _admit(settings, ("1", "2"), 1)
        _wait_status(settings, c, RunStatus.AWAITING_HUMAN)
        _approve(settings, a)
        _wait_status(settings, a, RunStatus.COMPLETED)
    assert _snap(settings, c).agent_version == "2"
    assert _output(settings, a)["version"] == "1"
    assert _agents_list(settings, "1", "2") == {"1": (1, False, 0), "2": (1, False, 0)}
    # The gate's command: each run in flight replays on the version that would serve it.
    both = _cli(settings, ("1", "2"), "replay", "--from-kafka", "--json")
    assert both.returncode == 0, both.stdout + both.stderr
    only_2 = _cli(settings, ("2",), "replay", "--from-kafka", "--json")
    assert only_2.returncode == 1, only_2.stdout + only_2.stderr
    verdicts = {r["run_id"]: r["verdict"] for r in json.loads(only_2.stdout)["reports"]}
    assert verdicts == {b: "missing", c: "ok"}

    before = {e: _stranded(e) for e in ("parked", "held", "released")}
    with _deployed(settings, billing, "2"):
        # Parked as soon as the executor has restored it: no record for it needed.
        _wait_status(settings, b, RunStatus.PARKED)
        _approve(settings, b)
        # A run pinned to line 1 (admission still knew it) reaches an executor without it:
        # its StartRun is held, not dead-lettered.
        [d] = _admit(settings, ("1", "2"), 1, pin="1")
        _wait_status(settings, d, RunStatus.PARKED)
        wait_for(
            lambda: len(held_of(_snap(settings, b))) == 1,
            timeout_s=90,
            what="the stranded run's decision held in its snapshot",
        )
    stranded = stranded_of(_snap(settings, b))
    assert stranded is not None and stranded.version == "1"
    assert stranded.status is RunStatus.AWAITING_HUMAN  # what it goes back to
    parks = [r for r in _chain(settings, b) if r.kind is JournalKind.RUN_PARKED]
    assert parks[-1].attrs["parked_on"] == "version:1", parks[-1].attrs
    assert [r.attrs.get("parked_on") for r in parks].count("version:1") == 1  # parked once
    assert "version_not_deployed" in parks[-1].attrs["reason"]
    assert parks[-1].attrs["waits_for"].startswith("task:")  # its approval, still open
    letters = [r for _, r in read_topic(settings, "deadletter") if isinstance(r, DeadLetter)]
    assert not [d for d in letters if b in d.reason]  # held, not dead-lettered
    assert _agents_list(settings, "2") == {"1": (2, True, 2), "2": (1, False, 0)}
    assert _stranded("parked") - before["parked"] == 2
    assert _stranded("held") - before["held"] == 2
    assert [r.kind for r in _chain(settings, d)] == [JournalKind.RUN_ADMITTED]  # not started

    with _deployed(settings, billing, "1.1", "2"):
        # No operator step: line 1 is deployed again, so the held decision is served.
        _approve(settings, c)
        _wait_status(settings, b, RunStatus.COMPLETED)
        _wait_status(settings, c, RunStatus.COMPLETED)
        _wait_status(settings, d, RunStatus.AWAITING_HUMAN)  # started, on the newest of line 1
        _approve(settings, d)
        _wait_status(settings, d, RunStatus.COMPLETED)
    assert _output(settings, d)["version"] == "1.1"
    assert _stranded("released") - before["released"] == 2
    released = [r for r in _chain(settings, b) if r.attrs.get("reason") == "version_deployed"]
    assert [(r.kind, r.attrs["parked_on"], r.attrs["version"]) for r in released] == [
        (JournalKind.RUN_PARKED, parks[-1].attrs["waits_for"], "1.1")
    ]
    assert _output(settings, b)["version"] == "1.1"
    assert _output(settings, c)["version"] == "2"
    # INV-0: a and c once, d once and its re-check (1.1 from its start); INV-1: b once on 1,
    # then its re-check on 1.1 (the patch).
    assert billing.counts().fetches == {"INV-0": 4, "INV-1": 2}
    assert _agents_list(settings, "1.1", "2") == {"1.1": (0, False, 0), "2": (0, False, 0)}

    # The exported journal of b (recorded by 1, finished by 1.1 with the marker) replays on
    # 1.1; on 1 it diverges exactly at the marker, the call after the approval.
    out = tmp_path / f"{b}.json"
    exported = _cli(settings, ("1.1",), "journal", "export", b, "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    assert _cli(settings, ("1.1",), "replay", str(out)).returncode == 0
    old_code = _cli(settings, ("1",), "replay", str(out), "--json")
    assert old_code.returncode == 1, old_code.stdout + old_code.stderr
    [report] = json.loads(old_code.stdout)["reports"]
    assert report["divergence"]["call_seq"] == 2, json.dumps(report, indent=1)
    assert report["divergence"]["recorded"]["name"] == "patch:recheck"
