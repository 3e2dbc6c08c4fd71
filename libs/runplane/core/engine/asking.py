"""Asking a person: the one ``OpenTask`` every family that waits for a person sends.

Approvals, panels of people and operator verdicts on a call in doubt differ in what they ask
and whom; what identifies the run (session, era, slot), its case, tenant and initiator (the
worklist refuses the initiator) and when it was opened are filled in here, once.
"""

from __future__ import annotations

from runplane.core.engine.state import Run
from runplane.wire import ExpiryPolicy, OpenTask, TaskKind

__all__ = ["ask_person"]


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
) -> None:
    """Queue the task in the run's current step (sent with the step's records)."""
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
        )
    )
