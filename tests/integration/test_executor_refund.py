"""The refund example on the real broker, through the executor: start → park on approval →
decision message → completion, with exactly one charge counted by the billing API, a chain
that verifies, and status updates for admission. Bad inbox input is dead-lettered with its
reason while the partition keeps moving."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runplane.config import Settings
from runplane.core import verify_chain
from runplane.fakes import FakeBillingServer, invoice_amount_cents, read_counts
from runplane.wire import (
    DeadLetter,
    DecisionOutcome,
    OpenTask,
    RunStatus,
    RunStatusUpdate,
    Signal,
    TaskDecision,
)
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import (
    admit,
    chain_of,
    executor_thread,
    plain_producer,
    read_topic,
    send,
    sessions,
)
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[FakeBillingServer]:
    with FakeBillingServer(counts_path=tmp_path / "billing.json") as server:
        yield server


def _status(settings: Settings, run_id: str, status: RunStatus) -> bool:
    snap = sessions(settings).get(run_id)
    return snap is not None and snap.status is status


def test_refund_parks_then_completes_with_one_charge(
    settings: Settings, billing: FakeBillingServer, tmp_path: Path
) -> None:
    own = ExecutorSettings(
        base=settings, billing_url=billing.url, agent_modules=("examples.refund",)
    )
    producer = plain_producer(settings)
    with executor_thread(own):
        [run] = admit(producer, settings, "refund", [{"invoice_id": "INV-1", "reason": "dup"}])
        wait_for(
            lambda: _status(settings, run.run_id, RunStatus.AWAITING_HUMAN),
            timeout_s=60,
            what="approval park",
        )
        assert billing.counts().charges == {}  # nothing is charged before the decision

        [task] = [r for _, r in read_topic(settings, "tasks.commands") if isinstance(r, OpenTask)]
        assert task.session_id == run.run_id
        assert json.loads(task.answer_json)["amount_cents"] == invoice_amount_cents("INV-1")
        send(
            producer,
            settings,
            "runs.inbox",
            run.run_id,
            TaskDecision(
                session_id=run.run_id,
                task_id=task.task_id,
                era=task.era,
                call_seq=task.call_seq,
                outcome=DecisionOutcome.APPROVED,
                decided_by=("alice",),
                decided_ms=int(time.time() * 1000),
            ),
        )
        wait_for(
            lambda: _status(settings, run.run_id, RunStatus.COMPLETED),
            timeout_s=60,
            what="completion",
        )

    snap = sessions(settings)[run.run_id]
    output = json.loads(snap.output_json or "null")
    assert output["status"] == "refunded"
    assert output["approved_by"] == ["alice"]
    counts = read_counts(tmp_path / "billing.json")
    assert counts.charges == {f"refund/{run.run_id}": 1}
    assert counts.fetches == {"INV-1": 1}

    records, results = chain_of(settings, run.run_id)
    verdict = verify_chain(records, results)
    assert verdict.ok, verdict
    assert records[-1].kind.name == "RUN_COMPLETED"
    updates = [
        r.status
        for k, r in read_topic(settings, "admission")
        if isinstance(r, RunStatusUpdate) and r.run_id == run.run_id
    ]
    # The executor sends a run's latest status per transaction (a RUNNING that commits with
    # the status after it is never sent), so these are the full path's statuses in order,
    # some possibly skipped — never reordered, and never without the park or the end.
    full = [RunStatus.RUNNING, RunStatus.AWAITING_HUMAN, RunStatus.RUNNING, RunStatus.COMPLETED]
    rest = iter(full)
    assert all(status in rest for status in updates), updates
    assert RunStatus.AWAITING_HUMAN in updates and updates[-1] is RunStatus.COMPLETED, updates


def test_bad_inbox_input_is_dead_lettered_and_the_partition_moves_on(
    settings: Settings, billing: FakeBillingServer
) -> None:
    own = ExecutorSettings(
        base=settings, billing_url=billing.url, agent_modules=("examples.refund",)
    )
    producer = plain_producer(settings)
    inbox = settings.topic("runs.inbox")
    with executor_thread(own):
        producer.produce(inbox, key=b"r-garbage", value=b"\x00not avro at all")
        send(
            producer,
            settings,
            "runs.inbox",
            "r-nobody",
            Signal(session_id="r-nobody", name="ping", payload_json="{}", sent_ms=1),
        )
        [unknown] = admit(producer, settings, "no-such-agent", [{"x": 1}])
        [run] = admit(producer, settings, "refund", [{"invoice_id": "INV-2"}])
        wait_for(
            lambda: _status(settings, run.run_id, RunStatus.AWAITING_HUMAN),
            timeout_s=60,
            what="park",
        )
        wait_for(
            lambda: _status(settings, unknown.run_id, RunStatus.FAILED),
            timeout_s=30,
            what="refusal",
        )
        # A decision for a task the run does not have: rejected by the core, dead-lettered.
        send(
            producer,
            settings,
            "runs.inbox",
            run.run_id,
            TaskDecision(
                session_id=run.run_id,
                task_id="no-such-task",
                era=0,
                outcome=DecisionOutcome.APPROVED,
                decided_by=("bob",),
                decided_ms=1,
            ),
        )
        # And a message for a run that has ended.
        send(
            producer,
            settings,
            "runs.inbox",
            unknown.run_id,
            Signal(session_id=unknown.run_id, name="late", payload_json="{}", sent_ms=1),
        )

        def letters() -> list[DeadLetter]:
            return [r for _, r in read_topic(settings, "deadletter") if isinstance(r, DeadLetter)]

        wait_for(lambda: len(letters()) >= 4, timeout_s=30, what="dead letters")

    reasons = sorted(d.reason for d in letters())
    assert any(r.startswith("undecodable") for r in reasons)
    assert any("unknown session r-nobody" in r for r in reasons)
    assert any("no open task 'no-such-task'" in r for r in reasons)
    assert any(f"run {unknown.run_id} already ended" in r for r in reasons)
    garbage = next(d for d in letters() if d.reason.startswith("undecodable"))
    assert (garbage.source_topic, garbage.value, garbage.service) == (
        inbox,
        b"\x00not avro at all",
        "executor",
    )
    failed = sessions(settings)[unknown.run_id]
    assert failed.error is not None and "no-such-agent" in failed.error.message
    records, _ = chain_of(settings, unknown.run_id)
    assert verify_chain(records).ok
    assert [r.kind.name for r in records] == ["RUN_ADMITTED", "RUN_FAILED"]
