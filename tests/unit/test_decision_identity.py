"""Four-eyes behind the worklist (security review C1, defence in depth).

A TaskDecision is a record on ``runs.inbox``: anyone who can produce there could resume a run
with ``decided_by=[<the initiator>]`` or one approval where two are required. The runtime
rejects such a decision (``Step.rejected``, which the executor dead-letters with the reason)
and the run keeps waiting on its task.
"""

from __future__ import annotations

from typing import Any

import pytest

from runplane.core import AgentRegistry, AgentSpec, Durability, Runtime, StepCtx, run_admitted
from runplane.core.engine import decision_identity_problem
from runplane.wire import DecisionOutcome, OpenTask, RunStatus, StartRun, TaskDecision

T0 = 1_700_000_000_000
INITIATOR = "ivan"


def _spec(approvals: int) -> AgentSpec:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        decision = await ctx.approval(
            "refund 10 EUR?", {"amount": 10}, role="finance", approvals=approvals
        )
        return {"approved": decision.approved}

    return AgentRegistry().register(
        AgentSpec("t", agent, Durability.REPLAYABLE, None, {}), lint=False
    )


def _start(approvals: int) -> tuple[Runtime, OpenTask]:
    admitted = run_admitted(
        "s-1",
        capability="t",
        admission_key="k-1",
        tenant="acme",
        initiator=INITIATOR,
        input_json="{}",
        now_ms=T0,
    )
    start = StartRun(
        session_id="s-1",
        capability="t",
        input_json="{}",
        admission_key="k-1",
        tenant="acme",
        initiator=INITIATOR,
        admitted_hash=admitted.hash,
        admitted_ms=T0,
    )
    rt, step = Runtime.start(_spec(approvals), start, now_ms=T0 + 1)
    (task,) = [c for c in step.commands if isinstance(c, OpenTask)]
    assert task.approvals == approvals and rt.status is RunStatus.AWAITING_HUMAN
    return rt, task


def _decision(
    task: OpenTask, by: tuple[str, ...], outcome: DecisionOutcome = DecisionOutcome.APPROVED
) -> TaskDecision:
    return TaskDecision(
        session_id=task.session_id,
        task_id=task.task_id,
        era=task.era,
        call_seq=task.call_seq,
        outcome=outcome,
        comment="",
        decided_by=by,
        decided_ms=T0 + 50,
    )


@pytest.mark.parametrize(
    ("approvals", "by", "outcome", "fragment"),
    [
        (1, (INITIATOR,), DecisionOutcome.APPROVED, "names the run's initiator 'ivan'"),
        (2, ("grace", INITIATOR), DecisionOutcome.APPROVED, "names the run's initiator 'ivan'"),
        (1, (INITIATOR,), DecisionOutcome.REJECTED, "names the run's initiator 'ivan'"),
        (
            2,
            ("grace",),
            DecisionOutcome.APPROVED,
            "1 distinct principal(s) decided, the task needs 2",
        ),
        (
            2,
            ("grace", "grace"),
            DecisionOutcome.APPROVED,
            "1 distinct principal(s) decided, the task needs 2",
        ),
        (1, (), DecisionOutcome.APPROVED, "0 distinct principal(s) decided, the task needs 1"),
        (1, (" ",), DecisionOutcome.APPROVED, "0 distinct principal(s) decided, the task needs 1"),
    ],
)
def test_a_decision_breaking_four_eyes_is_rejected_and_the_run_keeps_waiting(
    approvals: int, by: tuple[str, ...], outcome: DecisionOutcome, fragment: str
) -> None:
    rt, task = _start(approvals)
    step = rt.deliver(_decision(task, by, outcome), now_ms=T0 + 60)
    assert step.rejected is not None and fragment in step.rejected
    assert not step.records and step.end is None  # nothing journaled, nothing resumed
    assert rt.status is RunStatus.AWAITING_HUMAN
    # The genuine decision still resumes it.
    good = tuple(f"approver-{i}" for i in range(approvals))
    done = rt.deliver(_decision(task, good), now_ms=T0 + 70)
    assert done.rejected is None and done.end is RunStatus.COMPLETED
    assert rt.snapshot().output_json == '{"approved":true}'


def test_a_rejection_needs_one_person_who_is_not_the_initiator() -> None:
    rt, task = _start(2)
    done = rt.deliver(_decision(task, ("grace",), DecisionOutcome.REJECTED), now_ms=T0 + 60)
    assert done.rejected is None and done.end is RunStatus.COMPLETED
    assert rt.snapshot().output_json == '{"approved":false}'


def test_the_pure_rule() -> None:
    def d(by: tuple[str, ...], outcome: DecisionOutcome = DecisionOutcome.APPROVED) -> TaskDecision:
        return TaskDecision(
            session_id="s",
            task_id="s/0/0",
            era=0,
            call_seq=0,
            outcome=outcome,
            comment="",
            decided_by=by,
            decided_ms=T0,
        )

    assert decision_identity_problem(d(("a", "b")), initiator="i", approvals=2) is None
    assert decision_identity_problem(d(("a", "b", "i")), initiator="i", approvals=2) is not None
    assert decision_identity_problem(d(()), initiator="i", approvals=1) is not None
    # Expiry decides with nobody: not an APPROVED outcome, nothing to count.
    assert (
        decision_identity_problem(d((), DecisionOutcome.EXPIRED_FAILED), initiator="i", approvals=2)
        is None
    )
