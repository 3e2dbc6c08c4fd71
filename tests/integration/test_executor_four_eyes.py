"""Four-eyes behind the worklist, on the real broker (security review C1, defence in depth).

A TaskDecision written straight to ``runs.inbox`` — around the worklist — naming the run's
initiator as the decider is dead-lettered by the executor with the reason, and the run keeps
waiting on its task; the genuine decision afterwards completes it with one charge.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runplane.config import Settings
from runplane.fakes import FakeBillingServer
from runplane.wire import DeadLetter, DecisionOutcome, OpenTask, RunStatus, TaskDecision
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, executor_thread, plain_producer, read_topic, send, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[FakeBillingServer]:
    with FakeBillingServer(counts_path=tmp_path / "billing.json") as server:
        yield server


def _status(settings: Settings, run_id: str) -> RunStatus | None:
    snap = sessions(settings).get(run_id)
    return None if snap is None else snap.status


def _decision(task: OpenTask, by: tuple[str, ...]) -> TaskDecision:
    return TaskDecision(
        session_id=task.session_id,
        task_id=task.task_id,
        era=task.era,
        call_seq=task.call_seq,
        outcome=DecisionOutcome.APPROVED,
        decided_by=by,
        decided_ms=int(time.time() * 1000),
    )


def test_a_forged_decision_by_the_initiator_is_dead_lettered_and_the_run_waits(
    settings: Settings, billing: FakeBillingServer
) -> None:
    own = ExecutorSettings(
        base=settings, billing_url=billing.url, agent_modules=("examples.refund",)
    )
    producer = plain_producer(settings)
    with executor_thread(own):
        [run] = admit(producer, settings, "refund", [{"invoice_id": "INV-4E"}], initiator="ivan")
        wait_for(
            lambda: _status(settings, run.run_id) is RunStatus.AWAITING_HUMAN,
            timeout_s=60,
            what="approval park",
        )
        [task] = [r for _, r in read_topic(settings, "tasks.commands") if isinstance(r, OpenTask)]
        assert task.initiator == "ivan"

        send(producer, settings, "runs.inbox", run.run_id, _decision(task, ("ivan",)))
        wait_for(
            lambda: any(isinstance(r, DeadLetter) for _, r in read_topic(settings, "deadletter")),
            timeout_s=60,
            what="the forged decision's dead letter",
        )
        [letter] = [r for _, r in read_topic(settings, "deadletter") if isinstance(r, DeadLetter)]
        assert "names the run's initiator 'ivan'" in letter.reason
        assert _status(settings, run.run_id) is RunStatus.AWAITING_HUMAN
        assert billing.counts().charges == {}  # nothing was charged on the forged approval

        send(producer, settings, "runs.inbox", run.run_id, _decision(task, ("grace",)))
        wait_for(
            lambda: _status(settings, run.run_id) is RunStatus.COMPLETED,
            timeout_s=60,
            what="completion on the genuine decision",
        )
    assert billing.counts().charges == {f"refund/{run.run_id}": 1}
