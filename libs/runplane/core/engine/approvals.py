"""Effect family: approvals — a human task opened with the run's actual answer.

``ctx.approval`` opens an APPROVAL task on the worklist and parks the run until its
TaskDecision (four-eyes checked here again, behind the worklist). ``ctx.approve_call`` is the
same task over a proposed tool call (its request's ``call``; ``core.callapproval``): the task
lists the call's editable arguments, and an APPROVED decision may carry edits of them, checked
here again against the call (``callapproval.edits_of``) and recorded in the decision with the
call's destination — each edited field a release decided by ``decided_by``
(``releases.approved_releases``). An ESCALATED decision keeps
the run waiting on the same task; a decision on a task carried from an earlier era is
journaled at that task's own slot. Inbox decisions for operator tasks go to ``doubt``, a panel seat's to ``panels``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane.core.callapproval import CallDecision, call_decision, editable, edits_of
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
    call = req.get("call")
    fields = () if call is None else editable(call)
    try:
        answer_json = canonical_json(req["answer"] if call is None else call)
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
        editable=fields,
    )
    opened = {"task_id": task_id, "kind": "APPROVAL", "role": str(req["role"])}
    if call is not None:
        opened["call"] = f"tool://{call['tool']}"  # which sink the person is asked about
    run.rec.at(JournalKind.TASK_OPENED, slot, opened)
    unattended_ok = _unattended_ok(req)
    carried: dict[str, Any] = {"unattended_ok": unattended_ok}
    if call is not None:  # what an early decision's edits are checked against
        carried["call"] = {
            "tool": str(call["tool"]),
            "editable": list(fields),
            "approvals": int(req["approvals"]),
        }
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
            carried,
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
    held = carried.value or {}
    unattended_ok = bool(held.get("unattended_ok"))
    call = held.get("call")
    try:
        needed = 1 if call is None else int(call["approvals"])
        value, error = _approval_result(decision, unattended_ok, call, needed)
    except ValueError as exc:
        return Rejected(str(exc))
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
    req = wait.slot.effect.request
    call = req.get("call")
    proposed = None if call is None else {"tool": call["tool"], "editable": editable(call)}
    try:
        value, error = _approval_result(
            decision, _unattended_ok(req), proposed, int(req["approvals"])
        )
    except ValueError as exc:
        return Rejected(str(exc))  # dead-lettered; the run keeps waiting on its task
    run.waiting = None
    run.open = None
    run.unpark()
    entry = run.rec.result(
        wait.slot, JournalKind.TASK_DECIDED, value=value, error=error, attrs=attrs
    )
    return serve(run.rec, wait.slot.effect, entry)


def _approval_result(
    decision: TaskDecision,
    unattended_ok: bool,
    call: Mapping[str, Any] | None,
    approvals: int,
) -> tuple[Any, ErrorInfo | None]:
    """What an approval's decision records: (value, None), or (None, the failure).
    ``call``: a call approval's tool and editable arguments, which its edits are checked
    against (``ValueError``: the decision cannot be taken)."""
    edits = edits_of(
        () if call is None else tuple(call["editable"]),
        decision.edits_json,
        decision.outcome,
        approvals,
    )
    outcome = decision.outcome
    if outcome is DecisionOutcome.EXPIRED_FAILED or (
        outcome is DecisionOutcome.EXPIRED_PROCEEDED and not unattended_ok
    ):
        return None, ErrorInfo(
            type="ApprovalExpired", message=f"task {decision.task_id} expired", retryable=False
        )
    approved = outcome in (DecisionOutcome.APPROVED, DecisionOutcome.EXPIRED_PROCEEDED)
    value: dict[str, Any] = {
        "outcome": str(outcome),
        "approved": approved,
        "comment": decision.comment,
        "decided_by": list(decision.decided_by),
    }
    if edits:  # only then: every other approval records what it always did
        assert call is not None
        value["edits"] = edits
        value["destination"] = f"tool://{call['tool']}"
    return value, None


def decode(effect: Effect, raw: Any) -> Decision | CallDecision:
    """An approval's recorded decision, as the agent gets it (a call approval's: a
    ``CallDecision``, with the arguments the agent proposed)."""
    if isinstance(effect.request, Mapping) and "call" in effect.request:
        return call_decision(effect.request, raw, effect.options.get("arguments"))
    return Decision(
        str(raw["outcome"]), bool(raw["approved"]), str(raw["comment"]), tuple(raw["decided_by"])
    )
