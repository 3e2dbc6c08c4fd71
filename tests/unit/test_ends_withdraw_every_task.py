"""The step that ends a run parked on a task withdraws (or decides) that task itself.

``tasks.withdraw_open`` serves cancel, timeouts, eras and every end, so a step that ends a run
which was parked on a worklist task — an approval, an operator's decision on a call in doubt, a
panel of people — carries the ``CloseTask`` of each task still open, or the ``TASK_DECIDED``
that answered it. That is why ``apply_step`` adds no withdrawal of its own: checked here for
every way such a run ends (quarantined from outside or from its inbox, cancelled, timed out,
decided and failed, failed by the executor, and a checkpointed era carrying the task), by the
rule the fallback ``apply_step`` used to apply, which must find nothing left to close.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runplane.core import AgentRegistry, AgentSpec, Durability, Runtime, StepCtx
from runplane.core.chain import run_start
from runplane.core.engine import Step, fail_from_snapshot
from runplane.wire import (
    CloseTask,
    DecisionOutcome,
    JournalKind,
    OpenTask,
    ParkKind,
    RunStatus,
    SessionSnapshot,
    Signal,
    StartRun,
    TaskDecision,
    Wake,
)

TASK_PARKS = (ParkKind.TASK, ParkKind.OPERATOR)


async def approving(ctx: StepCtx, input: Any) -> Any:
    decision = await ctx.approval("Pay?", input, role="finance", timeout=60)
    return decision.approved


async def reviewing(ctx: StepCtx, input: Any) -> Any:
    outcome = await ctx.human_panel("Pay?", input, seats=["a", "b", "c"], approve_at=2)
    return type(outcome).__name__


async def charging(ctx: StepCtx, input: Any) -> Any:
    # Undeclared: mutating, requires_operator — in doubt, an operator is asked.
    return await ctx.tool("charge", {"amount": 7}, idempotency_key="charge-1")


def _start(sid: str, capability: str) -> StartRun:
    return run_start(
        sid,
        capability=capability,
        admission_key=sid,
        tenant="t",
        initiator="ivan",
        input_json="{}",
        now_ms=1,
    )[1]


def _parked(kind: str, sid: str, durability: Durability = Durability.REPLAYABLE) -> Runtime:
    """A runtime parked on a task of ``kind`` (approval, panel, operator)."""
    fn = {"approval": approving, "panel": reviewing, "operator": charging}[kind]
    spec = AgentRegistry().register(AgentSpec(kind, fn, durability), lint=False)
    rt, step = Runtime.start(spec, _start(sid, kind), now_ms=2)
    if kind == "operator":
        step = rt.in_doubt(step.live_calls[0].call_seq, now_ms=3)
    assert step.snapshot.parked_on is not None and step.snapshot.parked_on.kind in TASK_PARKS
    assert any(isinstance(c, OpenTask) for c in step.commands)
    return rt


def _left_open(step: Step, before: SessionSnapshot) -> bool:
    """The rule of the fallback ``apply_step`` had: an ending step after a task park that
    neither decided a task nor closed one leaves that task on the worklist."""
    parked = before.parked_on
    if step.end is None or parked is None or parked.kind not in TASK_PARKS:
        return False
    decided = any(r.kind is JournalKind.TASK_DECIDED for r in step.records)
    return not decided and not any(isinstance(c, CloseTask) for c in step.commands)


def _decision(rt: Runtime, outcome: DecisionOutcome) -> TaskDecision:
    snap = rt.snapshot()
    assert snap.parked_on is not None
    return TaskDecision(
        session_id=rt.session_id,
        task_id=snap.parked_on.ref,
        era=snap.parked_on.era,
        call_seq=snap.parked_on.call_seq,
        outcome=outcome,
        decided_by=("alice",),
        decided_ms=5,
    )


def _cancel(rt: Runtime) -> Signal:
    return Signal(
        session_id=rt.session_id,
        name="runplane.cancel",
        payload_json='{"reason":"now"}',
        sent_ms=5,
        sent_by="ada",
        signal_id="c-1",
    )


ENDINGS: dict[str, Callable[[Runtime, SessionSnapshot], Step]] = {
    "quarantined": lambda rt, _s: rt.quarantine("its chain is broken", now_ms=5),
    "quarantine on the inbox": lambda rt, _s: rt.deliver(
        Wake(session_id=rt.session_id, reason="quarantine: broken chain", sent_ms=5), now_ms=5
    ),
    "cancelled": lambda rt, _s: rt.deliver(_cancel(rt), now_ms=5),
    "failed by the executor": lambda _rt, s: fail_from_snapshot(s, "serving raised", now_ms=5),
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
@pytest.mark.parametrize("kind", ["approval", "panel", "operator"])
def test_every_ending_of_a_task_parked_run_withdraws_its_tasks_itself(
    kind: str, ending: str
) -> None:
    rt = _parked(kind, f"{kind}-{ending}")
    before = rt.snapshot()
    step = ENDINGS[ending](rt, before)
    if kind == "operator" and ending == "cancelled":
        # A cancel does not interrupt a call in doubt: the operator's decision ends the run.
        assert step.end is None and step.snapshot.cancel_json is not None
        before = step.snapshot
        step = rt.deliver(_decision(rt, DecisionOutcome.ABANDON), now_ms=6)
    assert step.end is not None, (kind, ending)
    closed = any(isinstance(c, CloseTask) for c in step.commands)
    assert closed or any(r.kind is JournalKind.TASK_DECIDED for r in step.records)
    assert not _left_open(step, before)


def test_an_approval_that_times_out_and_fails_the_run_withdraws_its_task() -> None:
    rt = _parked("approval", "timeout")
    before = rt.snapshot()
    assert before.wake_at_ms is not None
    step = rt.deliver(
        Wake(session_id="timeout", reason="timer", sent_ms=before.wake_at_ms),
        now_ms=before.wake_at_ms,
    )
    assert step.end is RunStatus.FAILED
    assert not _left_open(step, before)


@pytest.mark.parametrize("kind", ["approval", "operator"])
def test_a_decision_that_ends_the_run_decides_its_task(kind: str) -> None:
    rt = _parked(kind, f"decided-{kind}")
    before = rt.snapshot()
    outcome = DecisionOutcome.REJECTED if kind == "approval" else DecisionOutcome.ABANDON
    step = rt.deliver(_decision(rt, outcome), now_ms=5)
    assert step.end is not None, step.rejected
    assert any(r.kind is JournalKind.TASK_DECIDED for r in step.records)
    assert not _left_open(step, before)


@pytest.mark.parametrize("kind", ["approval", "panel", "operator"])
def test_a_checkpointed_era_ending_before_it_asks_again_withdraws_the_old_task(kind: str) -> None:
    rt = _parked(kind, f"era-{kind}", Durability.CHECKPOINTED)
    before, results = rt.snapshot(), dict(rt.results)
    rt.close()
    rt, restored = Runtime.restore(rt.spec, before, results, now_ms=4)
    step = rt.quarantine("its chain is broken", now_ms=5)
    commands = [*restored.commands, *step.commands]
    assert any(isinstance(c, CloseTask) for c in commands), kind
    assert not _left_open(step, restored.snapshot)
    assert not _left_open(step, before) or any(isinstance(c, CloseTask) for c in restored.commands)
