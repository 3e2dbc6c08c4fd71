"""A plan that fans out to two agents via commission, on the real broker, with an executor
SIGKILLed mid-fan-out: the run completes, each child ran exactly once (one run per derived
admission key), and every journal verifies and links parent and children.

Admission runs as its own process. Executor A owns every partition until the parent has
commissioned both branches and the children are inside their slow tool calls; then A is
SIGKILLed and executor B, started afterwards, takes over parent and children mid-flight.

Also here: commissions with signed admission, a child running under its delegation (refused
the sink it excludes, replayed), and a checkpointed parent restored mid-commission (one child).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import IO, Any

import pytest
import yaml

from runplane.config import Settings
from runplane.core import verify_chain
from runplane.runs.client import Client
from runplane.signing.admission import SigningKey
from runplane.wire import (
    AdmissionClaim,
    AdmissionRequest,
    JournalKind,
    JournalRecord,
    RunStatus,
    SessionSnapshot,
)
from tests.helpers.harness import chain_of, plain_producer, read_topic, send, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RUNPLANE = Path(sys.executable).with_name("runplane")
KEY = "triage-kill-1"


class Service:
    def __init__(
        self,
        settings: Settings,
        argv: list[str],
        instance: str,
        logs: Path,
        extra: dict[str, str] | None = None,
    ) -> None:
        env = {
            **os.environ,
            "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
            "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
            "RUNPLANE_PARTITIONS": str(settings.partitions),
            "RUNPLANE_INSTANCE_ID": f"{settings.instance_id}-{instance}",
            "RUNPLANE_EXECUTOR_PORT": "0",
            "RUNPLANE_ADMISSION_PORT": "0",
            "RUNPLANE_AGENT_MODULES": "examples.plan_triage",
            "RUNPLANE_TOOLS_CONFIG": "",
            "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "true",
            "RUNPLANE_EXECUTOR_BATCH_MS": "5",
            "RUNPLANE_LOG_LEVEL": "WARNING",
            **(extra or {}),
        }
        self._log: IO[bytes] = (logs / f"{instance}.log").open("wb")
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


def _claims(settings: Settings) -> dict[str, AdmissionClaim]:
    # By admission key: the table's rows are per (tenant, key), these runs are one tenant's.
    return {
        r.admission_key: r
        for _, r in read_topic(settings, "admission.claims")
        if isinstance(r, AdmissionClaim)
    }


def admit_through_admission(settings: Settings, key: str, capability: str, input: Any) -> str:
    """Send ``capability``'s AdmissionRequest under ``key`` to the admission service and wait
    until it is claimed → the run id."""
    request = AdmissionRequest(
        admission_key=key,
        capability=capability,
        input_json=json.dumps(input),
        tenant="acme",
        initiator="emitter",
        requested_ms=int(time.time() * 1000),
    )
    producer = plain_producer(settings)
    send(producer, settings, "admission", key, request)
    producer.flush(10)
    wait_for(lambda: key in _claims(settings), timeout_s=90, what="the parent admitted")
    return _claims(settings)[key].run_id


def _admitted(settings: Settings) -> list[JournalRecord]:
    return [
        r
        for _, r in read_topic(settings, "journal")
        if isinstance(r, JournalRecord) and r.kind is JournalKind.RUN_ADMITTED
    ]


def test_a_fan_out_of_commissions_survives_an_executor_killed_mid_fan_out(
    settings: Settings, tmp_path: Path
) -> None:
    admission = Service(settings, [str(RUNPLANE), "serve", "admission"], "admission", tmp_path)
    a = Service(settings, [sys.executable, "-m", "services.executor"], "executor-a", tmp_path)
    b: Service | None = None
    try:
        payment = {"amount": 120, "account": "a-1", "slow_s": 6.0}
        parent = admit_through_admission(settings, KEY, "plan.triage", payment)

        def both_commissioned() -> bool:
            records, _ = chain_of(settings, parent)
            announced = [
                r
                for r in records
                if r.family == "commission" and r.kind is JournalKind.EFFECT_ANNOUNCED
            ]
            return (
                len(announced) >= 2
                and len(
                    [
                        r
                        for r in _admitted(settings)
                        if r.attrs.get("admission_key", "").startswith("runplane.child/")
                    ]
                )
                >= 2
            )

        wait_for(both_commissioned, timeout_s=90, what="both branches commissioned and admitted")
        a.kill()  # mid-fan-out: the children are inside their 6 s tool calls
        b = Service(settings, [sys.executable, "-m", "services.executor"], "executor-b", tmp_path)

        snap = _ended(settings, parent)
        assert snap.status is RunStatus.COMPLETED, snap.error
        assert json.loads(snap.output_json or "null") == {
            "approve": True,
            "score": 12,
            "fraud": False,
        }

        # Each child ran exactly once: one run per derived admission key, ever.
        runs_per_key: dict[str, set[str]] = defaultdict(set)
        for record in _admitted(settings):
            key = record.attrs.get("admission_key", "")
            if key.startswith(f"runplane.child/{parent}/"):
                runs_per_key[key].add(record.session_id)
        assert len(runs_per_key) == 3  # risk.score, fraud.check, then decide
        assert all(len(runs) == 1 for runs in runs_per_key.values()), runs_per_key
        children = {next(iter(runs)) for runs in runs_per_key.values()}

        # Every journal verifies; the parent's records name each child, each child its parent.
        records, results = chain_of(settings, parent)
        assert verify_chain(records, results).ok
        # B rebuilt the parent mid-fan-out and dispatched both branches again (same keys).
        first_wave = [
            r
            for r in records
            if r.family == "commission"
            and r.kind is JournalKind.EFFECT_ANNOUNCED
            and r.attrs.get("node") in ("risk_score", "fraud_check")
        ]
        assert len(first_wave) == 4, [r.attrs for r in first_wave]
        linked = {
            r.attrs["child_run"]
            for r in records
            if r.family == "commission" and r.kind is JournalKind.EFFECT_RECORDED
        }
        assert linked == children
        for child in children:
            child_records, child_results = chain_of(settings, child)
            assert verify_chain(child_records, child_results).ok, child
            assert child_records[0].attrs["admission_key"].startswith(f"runplane.child/{parent}/")
            assert child_records[0].attrs["parent_run"] == parent
            assert child_records[-1].kind is JournalKind.RUN_COMPLETED

        # `runplane runs tree` shows the same links, read from the topics.
        env = {
            **os.environ,
            "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
            "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
            "RUNPLANE_PARTITIONS": str(settings.partitions),
        }
        shown = subprocess.run(
            [str(RUNPLANE), "runs", "tree", parent, "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        tree = json.loads(shown.stdout)["tree"]
        assert tree["capability"] == "plan.triage" and tree["status"] == "COMPLETED"
        assert {c["run_id"] for c in tree["children"]} == children
    finally:
        for service in (a, b, admission):
            if service is not None:
                service.stop()


def test_with_signed_admission_the_executor_signs_its_commissions(
    settings: Settings, tmp_path: Path
) -> None:
    # Admission requires signatures: the parent is signed by a tenant's emitter, the children
    # by the platform's emitter key the executor holds (a tenant's key could not name them).
    gw, platform = SigningKey.generate("gw"), SigningKey.generate("platform")
    emitters = tmp_path / "emitters.yaml"
    emitters.write_text(
        yaml.safe_dump(
            {
                "emitters": [
                    {
                        "name": "gw",
                        "tenant": "acme",
                        "keys": [{"id": gw.key_id, "public_key": gw.public_b64()}],
                    },
                    {
                        "name": "platform",
                        "any_tenant": True,
                        "keys": [{"id": platform.key_id, "public_key": platform.public_b64()}],
                    },
                ]
            }
        )
    )
    signed = {
        "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "false",
        "RUNPLANE_ADMISSION_EMITTERS_FILE": str(emitters),
    }
    admission = Service(
        settings, [str(RUNPLANE), "serve", "admission"], "admission", tmp_path, signed
    )
    executor = Service(
        settings,
        [sys.executable, "-m", "services.executor"],
        "executor",
        tmp_path,
        {"RUNPLANE_EMITTER_KEY": platform.to_text()},
    )
    try:
        with Client(settings, signing_key=gw) as client:
            reply = client.admit(
                "plan.triage",
                "triage-signed",
                {"amount": 700, "account": "x-9"},
                tenant="acme",
                initiator="ivan",
                timeout=90,
            )
        run_id = reply.run_id
        assert run_id is not None, reply

        def ended() -> bool:
            snap = sessions(settings).get(run_id)
            return (
                snap is not None
                and snap.status is not RunStatus.RUNNING
                and snap.status is not RunStatus.ADMITTED
            )

        wait_for(ended, timeout_s=120, every_s=1.0, what="the signed parent to end")
        snap = sessions(settings)[run_id]
        assert snap.status is RunStatus.COMPLETED, snap.error
        assert json.loads(snap.output_json or "null") == {
            "approve": False,
            "score": 70,
            "fraud": True,
        }
    finally:
        executor.stop()
        admission.stop()


def test_a_child_runs_under_its_delegation_on_the_real_broker(
    settings: Settings, tmp_path: Path
) -> None:
    """``plan.delegate`` commissions ``plan.notify`` under a scoring-only delegation: the child's
    executor refuses its notification (typed, journaled, counted as a gate refusal), while
    ``plan.notify`` admitted directly notifies; the child's journal commits to the delegation
    at seq 0 and a replay of it reproduces the refusal without a live call."""
    import examples.plan_triage  # noqa: F401 - registers plan.notify for the replay below
    from runplane.core import REGISTRY, replay_history

    admission = Service(settings, [str(RUNPLANE), "serve", "admission"], "admission", tmp_path)
    executor = Service(settings, [sys.executable, "-m", "services.executor"], "executor", tmp_path)
    try:
        payment = {"amount": 120, "account": "a-1"}
        with Client(settings) as client:
            runs = {
                cap: client.admit(
                    cap, f"{cap}-deleg-1", payment, tenant="acme", initiator="ivan", timeout=90
                ).run_id
                for cap in ("plan.delegate", "plan.notify")
            }
        assert all(runs.values()), runs

        def ended() -> bool:
            snaps = sessions(settings)
            return all(
                (s := snaps.get(str(r))) is not None and s.status is RunStatus.COMPLETED
                for r in runs.values()
            )

        wait_for(ended, timeout_s=120, every_s=1.0, what="both runs to complete")
        snaps = sessions(settings)
        outputs = {c: json.loads(snaps[str(r)].output_json or "null") for c, r in runs.items()}
        assert outputs == {
            "plan.delegate": {"score": 12, "notified": "DelegationRefused"},
            "plan.notify": {"score": 12, "notified": True},
        }
        parent = str(runs["plan.delegate"])
        (child,) = [
            r.session_id
            for r in _admitted(settings)
            if r.attrs.get("admission_key", "").startswith(f"runplane.child/{parent}/")
        ]
        records, results = chain_of(settings, child)
        assert verify_chain(records, results).ok
        delegation = json.loads(records[0].attrs["delegation"])
        assert delegation["chain"][0]["sinks"] == ["tool://scoring/risk"]
        refused = [r for r in records if r.attrs.get("gate") == "refused"]
        assert [(r.attrs["sink"], r.attrs["reason"]) for r in refused] == [
            ("tool://notify/post", "not_delegated")
        ]
        snap = snaps[child]
        assert snap.delegation_json is not None
        report = replay_history(REGISTRY.spec("plan.notify"), snap, results)
        assert report.status is RunStatus.COMPLETED and report.live_calls == 0
        assert report.output == {"score": 12, "notified": "DelegationRefused"}
    finally:
        executor.stop()
        admission.stop()


def test_a_checkpointed_parent_restored_mid_commission_starts_one_child(
    settings: Settings, tmp_path: Path
) -> None:
    """A checkpointed parent commissions a slow child; its executor is SIGKILLed while the child
    works. The parent restored by the next executor re-executes in a new era and issues the
    commission again under the same key (request, not position): admission answers duplicate,
    the child's result reaches the new era on the inbox, and there is exactly one child."""
    admission = Service(settings, [str(RUNPLANE), "serve", "admission"], "admission", tmp_path)
    a = Service(settings, [sys.executable, "-m", "services.executor"], "executor-a", tmp_path)
    b: Service | None = None
    try:
        with Client(settings) as client:
            parent = client.admit(
                "plan.checkpointed",
                "checkpointed-kill-1",
                {"amount": 90, "slow_s": 6.0},
                tenant="acme",
                initiator="ivan",
                timeout=90,
            ).run_id
        assert parent is not None

        def children() -> list[JournalRecord]:
            prefix = f"runplane.child/{parent}/w"
            return [
                r
                for r in _admitted(settings)
                if r.attrs.get("admission_key", "").startswith(prefix)
            ]

        wait_for(lambda: len(children()) == 1, timeout_s=90, what="the child admitted")
        a.kill()  # the child is inside its 6 s tool call
        b = Service(settings, [sys.executable, "-m", "services.executor"], "executor-b", tmp_path)

        snap = _ended(settings, parent)
        assert snap.status is RunStatus.COMPLETED, snap.error
        output = json.loads(snap.output_json or "null")
        assert output["score"] == 9 and output["era"] >= 1  # restored, and still one child
        (child,) = children()
        records, results = chain_of(settings, parent)
        assert verify_chain(records, results).ok
        announced = [
            r
            for r in records
            if r.family == "commission" and r.kind is JournalKind.EFFECT_ANNOUNCED
        ]
        assert len(announced) >= 2  # issued again by the restored era ...
        assert {r.attrs["child_key"] for r in announced} == {child.attrs["admission_key"]}
        linked = {
            r.attrs.get("child_run")
            for r in records
            if r.family == "commission" and r.kind is JournalKind.EFFECT_RECORDED
        }
        assert linked == {child.session_id}  # ... and answered by the one child
        child_records, child_results = chain_of(settings, child.session_id)
        assert verify_chain(child_records, child_results).ok
    finally:
        for service in (a, b, admission):
            if service is not None:
                service.stop()


def _ended(settings: Settings, run_id: str) -> SessionSnapshot:
    """The run's snapshot once it has ended (completed, failed or quarantined)."""

    def ended() -> bool:
        snap = sessions(settings).get(run_id)
        return snap is not None and snap.status in (
            RunStatus.COMPLETED,
            RunStatus.FAILED,
            RunStatus.QUARANTINED,
        )

    wait_for(ended, timeout_s=180, every_s=1.0, what="the parent to end")
    return sessions(settings)[run_id]
