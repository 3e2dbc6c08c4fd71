"""Two executor processes; one is SIGKILLed while a charge it made waits for its reply
(between EffectAnnounced and EffectRecorded of a mutating call). Every run still ends —
completed, or parked on an operator task with the reason — no charge is performed twice for a
recorded effect, and every journal chain verifies.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from executor_process_support import ExecutorProcess

from runplane.config import Settings
from runplane.core import verify_chain
from runplane.fakes import FakeBillingServer, read_counts
from runplane.wire import (
    DecisionOutcome,
    JournalKind,
    OpenTask,
    ParkKind,
    RunStatus,
    SessionSnapshot,
    TaskDecision,
    TaskKind,
)
from tests.helpers.harness import admit, chain_of, plain_producer, read_topic, send, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RUNS = 24


def _executor(settings: Settings, instance: str, billing_url: str, logs: Path) -> ExecutorProcess:
    env = {
        "RUNPLANE_BILLING_URL": billing_url,
        "RUNPLANE_AGENT_MODULES": "examples.refund",
        # The stock executor offers the tools of its config file, the billing ones here.
        "RUNPLANE_TOOLS_CONFIG": str(ROOT / "examples" / "tools" / "billing.yaml"),
        "RUNPLANE_EXECUTOR_BATCH_MS": "5",
    }
    return ExecutorProcess(settings, instance, logs, env)


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[FakeBillingServer]:
    # Each charge's reply waits: a kill lands between "the peer applied it" and "we recorded it".
    with FakeBillingServer(counts_path=tmp_path / "billing.json", charge_delay_s=0.5) as server:
        yield server


def _approve_open_tasks(settings: Settings, producer: Producer, decided: set[str]) -> None:
    for _, record in read_topic(settings, "tasks.commands"):
        if (
            isinstance(record, OpenTask)
            and record.kind is TaskKind.APPROVAL
            and record.task_id not in decided
        ):
            send(
                producer,
                settings,
                "runs.inbox",
                record.session_id,
                TaskDecision(
                    session_id=record.session_id,
                    task_id=record.task_id,
                    era=record.era,
                    call_seq=record.call_seq,
                    outcome=DecisionOutcome.APPROVED,
                    decided_by=("approver",),
                    decided_ms=int(time.time() * 1000),
                ),
            )
            decided.add(record.task_id)


def _on_operator(snap: SessionSnapshot) -> bool:
    return snap.parked_on is not None and snap.parked_on.kind is ParkKind.OPERATOR


def test_sigkill_mid_charge_loses_nothing_and_charges_once(
    settings: Settings, billing: FakeBillingServer, tmp_path: Path
) -> None:
    a = _executor(settings, "a", billing.url + "/via/a", tmp_path)
    b = _executor(settings, "b", billing.url + "/via/b", tmp_path)
    producer = plain_producer(settings)
    decided: set[str] = set()
    try:
        runs = admit(
            producer, settings, "refund", [{"invoice_id": f"INV-{i}"} for i in range(RUNS)]
        )
        ids = {r.run_id for r in runs}

        killed = threading.Event()

        def kill_a_mid_charge() -> None:
            # Poll fast: a charge stays in flight for charge_delay_s only.
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                if billing.charges_in_flight("a") > 0:
                    a.kill()
                    killed.set()
                    return
                time.sleep(0.002)

        watcher = threading.Thread(target=kill_a_mid_charge, daemon=True)
        watcher.start()

        def a_was_killed() -> bool:
            _approve_open_tasks(settings, producer, decided)
            return killed.is_set()

        wait_for(
            a_was_killed, timeout_s=90, every_s=0.05, what="A killed while a charge is in flight"
        )

        def all_ended() -> bool:
            _approve_open_tasks(settings, producer, decided)
            snaps = sessions(settings)
            return all(
                sid in snaps
                and (snaps[sid].status is RunStatus.COMPLETED or _on_operator(snaps[sid]))
                for sid in ids
            )

        wait_for(all_ended, timeout_s=100, every_s=0.5, what="every run to end")
    finally:
        a.stop()
        b.stop()

    snaps = sessions(settings)
    counts = read_counts(tmp_path / "billing.json")
    in_doubt = 0
    for sid in ids:
        records, results = chain_of(settings, sid)
        verdict = verify_chain(records, results)
        assert verdict.ok, (sid, verdict)
        in_doubt += sum(r.kind is JournalKind.EFFECT_IN_DOUBT for r in records)
        snap = snaps[sid]
        if snap.status is RunStatus.COMPLETED:
            output = json.loads(snap.output_json or "null")
            assert output["status"] == "refunded"
            # The recorded charge was performed exactly once at the peer.
            assert counts.charges.get(f"refund/{sid}") == 1, (
                sid,
                counts.charges.get(f"refund/{sid}"),
            )
        else:
            assert snap.parked_on is not None and "operator" in snap.parked_on.ref
    assert in_doubt >= 1  # the kill did land between announce and record
    assert sum(counts.charges.values()) == sum(
        1 for sid in ids if snaps[sid].status is RunStatus.COMPLETED
    ) + sum(
        1
        for sid in ids
        if snaps[sid].status is not RunStatus.COMPLETED and f"refund/{sid}" in counts.charges
    )
