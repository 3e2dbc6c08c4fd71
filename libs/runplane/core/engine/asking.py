"""Asking a person: the one ``OpenTask`` every family that waits for a person sends.

Approvals, panels of people and operator verdicts on a call in doubt differ in what they ask
and whom; what identifies the run (session, era, slot), its case, tenant and initiator (the
worklist refuses the initiator) and when it was opened are filled in here, once. So are what
every answer from a person is checked for (four-eyes) and what an escalation journals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from runplane.core.engine.state import Run
from runplane.core.engine.values import OpenRequest
from runplane.core.engine.vocab import SUSPEND, Rejected, Resolution, Wait
from runplane.wire import (
    DecisionOutcome,
    ExpiryPolicy,
    JournalKind,
    OpenTask,
    TaskDecision,
    TaskKind,
)

__all__ = ["answer_task", "ask_person", "decision_identity_problem", "escalated"]


def ask_person(
    run: Run,
    call_seq: int,
    task_id: str,
    *,
    kind: TaskKind,
    question: str,
    answer_json: str,
    role: str,
    approvals: int = 1,
    expires_ms: int | None = None,
    on_expiry: ExpiryPolicy = ExpiryPolicy.FAIL,
    allow_unattended: bool = False,
    escalate_to: str | None = None,
    editable: tuple[str, ...] = (),
) -> None:
    """Queue the task in the run's current step (sent with the step's records). ``editable``:
    a call approval's arguments a decider may edit (``core.callapproval``)."""
    run.rec.out.commands.append(
        OpenTask(
            task_id=task_id,
            session_id=run.session_id,
            era=run.era,
            call_seq=call_seq,
            kind=kind,
            question=question,
            answer_json=answer_json,
            case_id=run.case_id,
            capability=run.spec.capability,
            role=role,
            approvals=approvals,
            initiator=run.initiator,
            expires_ms=expires_ms,
            on_expiry=on_expiry,
            allow_unattended=allow_unattended,
            escalate_to=escalate_to,
            opened_ms=run.now,
            tenant=run.tenant,  # the worklist shows it to this tenant's principals only
            editable=editable,
        )
    )


def decision_identity_problem(
    decision: TaskDecision, *, initiator: str, approvals: int
) -> str | None:
    """Why ``decision`` breaks four-eyes for a run started by ``initiator``, or None.

    Defence in depth behind the worklist (security review C1): the worklist already refuses the
    initiator and a second approval by the same person, but a TaskDecision is only a record on
    ``runs.inbox``; one produced around the worklist must not resume the run. The run's
    initiator may not appear among ``decided_by`` at all, and an APPROVED decision needs at
    least ``approvals`` distinct, non-blank principals.
    """
    if initiator in decision.decided_by:
        return f"four-eyes: decided_by names the run's initiator {initiator!r}"
    if decision.outcome is DecisionOutcome.APPROVED:
        distinct = {p for p in decision.decided_by if p.strip()}
        if len(distinct) < approvals:
            return f"four-eyes: {len(distinct)} distinct principal(s) decided, the task needs {approvals}"
    return None


def answer_task(
    run: Run,
    decision: TaskDecision,
    *,
    approvals: int,
    waited: Wait | None,
    carried: OpenRequest | None,
    decide: Callable[[dict[str, str]], Resolution | Rejected],
) -> Resolution | Rejected:
    """A person's answer to a task the run waits on (``waited``) or carries (``carried``):
    refused when it breaks four-eyes, journaled as an escalation (the run keeps waiting), or
    else handed to ``decide`` with the attributes its TASK_DECIDED record starts from."""
    problem = decision_identity_problem(decision, initiator=run.initiator, approvals=approvals)
    if problem is not None:
        return Rejected(problem)  # the executor dead-letters it with this reason
    attrs = {"task_id": decision.task_id, "outcome": str(decision.outcome)}
    if decision.outcome is DecisionOutcome.ESCALATED:
        escalated(run, decision, waited, carried, attrs)
        return SUSPEND
    return decide(attrs)


def escalated(
    run: Run,
    decision: TaskDecision,
    wait: Wait | None,
    carried: OpenRequest | None,
    attrs: dict[str, str],
) -> None:
    """The worklist reopened the task for another role; the run keeps waiting on the same
    task. Journaled (TASK_DECIDED outcome ESCALATED, then RUN_PARKED on that task) so the
    chain shows why the run still waits and who it waits for now."""
    declared = (
        wait.slot.effect.request.get("escalate_to")
        if wait is not None and isinstance(wait.slot.effect.request, Mapping)
        else None
    )
    # The TaskDecision names no role; without a declared one it is the deployment's default.
    attrs["escalate_to"] = str(declared) if declared else "deployment-default"
    if decision.comment:
        attrs["reason"] = decision.comment[:200]
    if wait is None:
        assert carried is not None
        attrs["carried_from"] = f"{carried.era}/{carried.call_seq}"
        run.rec.seal(
            JournalKind.TASK_DECIDED, family=carried.family, name=carried.name, attrs=attrs
        )
        return
    run.rec.at(JournalKind.TASK_DECIDED, wait.slot, attrs, witness=False)
    run.rec.seal(
        JournalKind.RUN_PARKED,
        call_seq=wait.slot.call_seq,
        attrs={
            "parked_on": f"task:{decision.task_id}",
            "task_id": decision.task_id,
            "escalated": "true",
        },
    )
