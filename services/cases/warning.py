"""What a warning leaves behind: a sealed warning run and a worklist task. Pure.

``warn_before`` used to move the obligation OPEN → WARNED and reach nobody. Now, in the
**same transaction** that moves it (the first WarnDeadline only — a second sweeper or tick is
answered "already warned" and writes nothing), the cases service writes:

1. a sealed sweep run on ``journal`` (session ``warning_run_id(case, obligation, due)``):
   RunAdmitted (``kind=sweep``), DEADLINE_WARNED with the obligation, its due and warn
   instants, the owner role and the task id, RunCompleted — the journal service verifies it
   and publishes it on ``audit`` like every chain: the audit record of the warning;
2. an ``OpenTask`` on ``tasks.commands`` for the obligation's owner role
   (``Obligation.owner_role``, else the service's ``RUNPLANE_CASES_WARN_ROLE``): the question
   names the case, the obligation and its due instant; the task expires at the due instant
   and then closes unattended (``on_expiry: proceed``, ``allow_unattended``), since the
   breach, not the task, is what acts when nobody did.

The task belongs to the warning run, which has already ended: acknowledging it on the
worklist records who saw it there (the worklist's task record); its decision reaches no run
(the executor dead-letters it as for any ended run).
"""

from __future__ import annotations

import datetime as dt

from runplane.core.canonical import canonical_json
from runplane.core.keys import obligation_digest
from runplane.wire import (
    CaseRecord,
    ExpiryPolicy,
    JournalKind,
    JournalRecord,
    Obligation,
    OpenTask,
    TaskKind,
    WarnDeadline,
)
from services.cases.breach import (
    SWEEP_CAPABILITY,
    SWEEP_INITIATOR,
    case_tenant,
    sealed_sweep,
)

__all__ = ["DEFAULT_WARN_ROLE", "warning", "warning_run_id"]

DEFAULT_WARN_ROLE = "case-owner"


def warning_run_id(case_id: str, name: str, due_ms: int) -> str:
    """The session id of the sealed run that records this warning (one per obligation/due)."""
    return "warn-" + obligation_digest("warning-run", case_id, name, due_ms)[:32]


def warning(
    case: CaseRecord, ob: Obligation, cmd: WarnDeadline, now_ms: int, *, default_role: str
) -> tuple[list[JournalRecord], OpenTask]:
    """The sealed warning run and the task for the owner role, for the warning of ``ob``."""
    session = warning_run_id(case.case_id, ob.name, ob.due_ms)
    role = ob.owner_role or default_role
    task_id = f"{session}/warning"
    facts = {
        "case_id": case.case_id,
        "obligation": ob.name,
        "due_ms": str(ob.due_ms),
        "warn_ms": str(ob.warn_ms if ob.warn_ms is not None else now_ms),
        "calendar": ob.calendar,
        "calendar_digest": ob.calendar_digest,
        "decided_by": cmd.request_id,
        "owner_role": role,
        "task_id": task_id,
    }
    records = sealed_sweep(session, case, ob, JournalKind.DEADLINE_WARNED, facts, now_ms)
    due = dt.datetime.fromtimestamp(ob.due_ms / 1000, tz=dt.UTC).isoformat(timespec="minutes")
    task = OpenTask(
        task_id=task_id,
        session_id=session,
        era=0,
        call_seq=None,
        kind=TaskKind.APPROVAL,
        question=f"Obligation {ob.name!r} of case {case.case_id} is due at {due}: act before then.",
        answer_json=canonical_json(
            {"case_id": case.case_id, "obligation": ob.name, "due_ms": ob.due_ms}
        ),
        case_id=case.case_id,
        capability=SWEEP_CAPABILITY,
        role=role,
        initiator=SWEEP_INITIATOR,
        expires_ms=ob.due_ms,
        on_expiry=ExpiryPolicy.PROCEED,
        allow_unattended=True,
        opened_ms=now_ms,
        tenant=case_tenant(case),
    )
    return records, task
