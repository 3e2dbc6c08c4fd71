"""Effect family: approvals — a human task opened with the run's actual answer.

``ctx.approval`` opens an APPROVAL task on the worklist and parks the run until its
TaskDecision (four-eyes checked here again, behind the worklist). An ESCALATED decision keeps
the run waiting on the same task; a decision on a task carried from an earlier era is
journaled at that task's own slot. Inbox decisions for operator tasks go to ``doubt``, a panel seat's to ``panels``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane.core.canonical import canonical_json
from runplane.core.effect import Decision, Effect, EffectError, Op
from runplane.core.engine.asking import answer_task, ask_person
from runplane.core.engine.decode import serve
from runplane.core.engine.eras import note_early, set_open
from runplane.core.engine.state import Run
from runplane.core.engine.values import OpenRequest, RequestKind
from runplane.core.engine.vocab import (
    SUSPEND,
    Rejected,
    Resolution,
    Slot,
    Throw,
    Wait,
    WaitKind,
)
from runplane.wire import (
    DecisionOutcome,
    ErrorInfo,
    ExpiryPolicy,
    JournalKind,
    ParkKind,
    RunStatus,
    TaskDecision,
    TaskKind,
)

__all__ = ["approval", "decode", "on_decision"]


def approval(run: Run, slot: Slot) -> Resolution:
    """Open the approval task and park until it is decided."""
    effect, call_seq, witness = slot
    req = effect.request
    task_id = f"{run.session_id}/{run.era}/{call_seq}"
    expires = None if req["expires_in"] is None else run.clock_ms + int(req["expires_in"])
    try:
        answer_json = canonical_json(req["answer"])
    except (TypeError, ValueError) as exc:
        return Throw(EffectError("InvalidRequest", str(exc)))
    ask_person(
        run,
        call_seq,
        task_id,
        kind=TaskKind.APPROVAL,
        question=str(req["question"]),
        answer_json=answer_json,
        role=str(req["role"]),
        approvals=int(req["approvals"]),
        expires_ms=expires,
        on_expiry=ExpiryPolicy(str(req["on_expiry"]).upper()),
        allow_unattended=bool(req["allow_unattended"]),
        escalate_to=req.get("escalate_to"),
    )
    run.rec.at(
        JournalKind.TASK_OPENED,
        slot,
        {"task_id": task_id, "kind": "APPROVAL", "role": str(req["role"])},
    )
    unattended_ok = _unattended_ok(req)
    set_open(
        run,
        OpenRequest(
            RequestKind.TASK,
            task_id,
            run.era,
            call_seq,
            effect.family,
            effect.name,
            witness,
            {"unattended_ok": unattended_ok},
        ),
    )
    run.park(ParkKind.TASK, task_id, call_seq, RunStatus.AWAITING_HUMAN)
    due = run.timeout_at(req.get("timeout"))
    if due is not None:  # WaitTimedOut past it, unless decided first
        run.rec.at(
            JournalKind.RUN_PARKED, slot, {"parked_on": f"task:{task_id}", **run.bound_by(due)}
        )
    run.waiting = Wait(WaitKind.APPROVAL, slot)
    return SUSPEND


def _unattended_ok(req: Mapping[str, Any]) -> bool:
    return req["on_expiry"] == "proceed" and bool(req["allow_unattended"])


def on_decision(run: Run, decision: TaskDecision) -> Resolution | Rejected:
    """A TaskDecision on the inbox: an approval's, or an early one (a panel's seats and an
    operator's verdicts are claimed by their own families first, see the registry)."""
    wait = run.waiting
    parked = run.parked
    waited = (
        wait
        if wait is not None
        and parked is not None
        and parked.ref == decision.task_id
        and wait.kind is WaitKind.APPROVAL
        else None
    )
    open_ = run.open
    carried = (
        open_
        if open_ is not None and open_.kind is RequestKind.TASK and open_.ref == decision.task_id
        else None
    )
    if waited is None and carried is None:
        return Rejected(f"no open task {decision.task_id!r} for this run")
    required = int(waited.slot.effect.request["approvals"]) if waited is not None else 1

    def decide(attrs: dict[str, str]) -> Resolution | Rejected:
        if waited is None:
            assert carried is not None
            return _early_decision(run, carried, decision, attrs)
        return _decide_approval(run, waited, decision, attrs)

    return answer_task(
        run, decision, approvals=required, waited=waited, carried=carried, decide=decide
    )


def _early_decision(
    run: Run, carried: OpenRequest, decision: TaskDecision, attrs: dict[str, str]
) -> Resolution | Rejected:
    """A decision on a task carried from an earlier era, before the new era has asked again:
    journal it at the task's own slot; the side-effect log serves it when the era asks."""
    if decision.outcome in (DecisionOutcome.RETRY, DecisionOutcome.ABANDON):
        return Rejected(f"{decision.outcome} is an operator verdict, not an approval decision")
    unattended_ok = bool((carried.value or {}).get("unattended_ok"))
    value, error = _approval_result(decision, unattended_ok)
    attrs["answers"] = f"{carried.era}/{carried.call_seq}"
    run.open = None
    slot = Slot(
        Effect(carried.family, carried.name, None, Op.APPROVAL), carried.call_seq, carried.witness
    )
    entry = run.rec.result(
        slot, JournalKind.TASK_DECIDED, value=value, error=error, attrs=attrs, era=carried.era
    )
    note_early(run, carried, entry)
    return SUSPEND


def _decide_approval(
    run: Run, wait: Wait, decision: TaskDecision, attrs: dict[str, str]
) -> Resolution | Rejected:
    outcome = decision.outcome
    if outcome in (DecisionOutcome.RETRY, DecisionOutcome.ABANDON):
        return Rejected(f"{outcome} is an operator verdict, not an approval decision")
    unattended_ok = _unattended_ok(wait.slot.effect.request)
    run.waiting = None
    run.open = None
    run.unpark()
    value, error = _approval_result(decision, unattended_ok)
    entry = run.rec.result(
        wait.slot, JournalKind.TASK_DECIDED, value=value, error=error, attrs=attrs
    )
    return serve(run.rec, wait.slot.effect, entry)


def _approval_result(decision: TaskDecision, unattended_ok: bool) -> tuple[Any, ErrorInfo | None]:
    """What an approval's decision records: (value, None), or (None, the failure)."""
    outcome = decision.outcome
    if outcome is DecisionOutcome.EXPIRED_FAILED or (
        outcome is DecisionOutcome.EXPIRED_PROCEEDED and not unattended_ok
    ):
        return None, ErrorInfo(
            type="ApprovalExpired", message=f"task {decision.task_id} expired", retryable=False
        )
    approved = outcome in (DecisionOutcome.APPROVED, DecisionOutcome.EXPIRED_PROCEEDED)
    return (
        {
            "outcome": str(outcome),
            "approved": approved,
            "comment": decision.comment,
            "decided_by": list(decision.decided_by),
        },
        None,
    )


def decode(_effect: Effect, raw: Any) -> Decision:
    """An approval's recorded decision, as the agent gets it."""
    return Decision(
        str(raw["outcome"]), bool(raw["approved"]), str(raw["comment"]), tuple(raw["decided_by"])
    )
