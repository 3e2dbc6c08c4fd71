"""What a breach leaves behind: the sealed sweep run and the follow-up admission. Pure.

Why the cases service writes these, and not the sweeper that decided the breach:
the sweeper reads ``cases`` at least once and keeps its due-time index in Redis, so any
sweeper-side "write the sweep run, then tell the case" has a window (a crash, a rebalance,
a flushed Redis, a second sweeper) in which the breach is decided twice before the case
record says BREACHED — and two chains with one session id on ``journal`` would not verify.
The cases service is the single, fenced, transactional writer of the case, and it already has
to confirm every sweeper decision. So the sweeper *decides* (it sends BreachDeadline with the
deterministic ``sweep_run_id``) and the cases service, in the **same transaction** that moves
the obligation to BREACHED, writes:

1. the sealed sweep run on ``journal`` (key = ``sweep_run_id``): RunAdmitted with attrs
   ``kind=sweep``, DEADLINE_BREACHED, RunCompleted — a chain ``verify_chain`` accepts;
2. the follow-up AdmissionRequest on ``admission`` (capability = the deadline's
   ``on_breach``, admission key derived from (case, obligation, due)), carrying the reserved
   correlation key ``runplane.case`` = this case id, so admission puts the follow-up run on
   the case whose obligation breached (the sweep's tenant and the case's keys alone would
   resolve to another case, or to none), for **the case's tenant** (admission refuses a
   ``runplane.case`` whose id does not carry the request tenant's tag). The tenant is the one
   the case recorded from its deadlines (:func:`services.cases.decide.tenant_of`, set by the
   RegisterDeadline that created the obligation); a case registered before deadlines carried
   a tenant falls back to ``default``, and admission then refuses the follow-up visibly
   rather than running it for the wrong tenant. The sweep run is journaled under the same
   tenant, so a tenant-scoped reader of the journal sees its own breaches.

Only the first BreachDeadline of an obligation moves it to BREACHED; every later one (a
second sweeper, a second tick, a redelivery) is answered "already breached" and writes
nothing. A transaction commits all of it or none of it, so the journal holds exactly one
sweep chain per breach and admission receives exactly one follow-up request — and admission's
own dedup by key would absorb a second one anyway.
"""

from __future__ import annotations

import json

from runplane.core.canonical import canonical_json
from runplane.core.chain import Draft, default_label, run_admitted, seal
from runplane.core.keys import CASE_KEY, RESERVED_PREFIX, followup_admission_key
from runplane.wire import (
    AdmissionRequest,
    BreachDeadline,
    CaseRecord,
    JournalKind,
    JournalRecord,
    Obligation,
    TenantId,
)
from services.cases.decide import tenant_of

__all__ = [
    "SWEEP_CAPABILITY",
    "SWEEP_INITIATOR",
    "SWEEP_TENANT",
    "case_tenant",
    "followup",
    "sealed_sweep",
    "sweep_run",
]

SWEEP_CAPABILITY = "sweep"
SWEEP_INITIATOR = "runplane-sweeper"
SWEEP_TENANT = "default"  # only for a case that never recorded its tenant


def case_tenant(case: CaseRecord) -> TenantId:
    """The tenant a breach of ``case`` acts for: the case's own, else ``SWEEP_TENANT``."""
    return TenantId(tenant_of(case) or SWEEP_TENANT)


def sweep_run(
    case: CaseRecord, ob: Obligation, cmd: BreachDeadline, now_ms: int
) -> list[JournalRecord]:
    """The sealed three-record chain of the sweep run that breached ``ob``."""
    session = cmd.sweep_run_id
    key = followup_admission_key(case.case_id, ob.name, ob.due_ms)
    facts = {
        "case_id": case.case_id,
        "obligation": ob.name,
        "due_ms": str(ob.due_ms),
        "calendar": ob.calendar,
        "calendar_digest": ob.calendar_digest,
        "decided_by": cmd.request_id,
    }
    if ob.on_breach is not None:
        facts["on_breach"] = ob.on_breach
        facts["followup_admission_key"] = key
    return sealed_sweep(session, case, ob, JournalKind.DEADLINE_BREACHED, facts, now_ms)


def sealed_sweep(
    session: str,
    case: CaseRecord,
    ob: Obligation,
    event: JournalKind,
    facts: dict[str, str],
    now_ms: int,
) -> list[JournalRecord]:
    """A sealed three-record sweep chain: RunAdmitted (``kind=sweep``), ``event`` on the
    obligation with ``facts``, RunCompleted — a breach's, or a warning's."""
    admitted = run_admitted(
        session,
        capability=SWEEP_CAPABILITY,
        admission_key=session,
        tenant=case_tenant(case),
        initiator=SWEEP_INITIATOR,
        input_json=canonical_json(
            {"case_id": case.case_id, "obligation": ob.name, "due_ms": ob.due_ms}
        ),
        now_ms=now_ms,
        case_id=case.case_id,
        attrs={"kind": "sweep"},
    )
    label = default_label([f"agent/{SWEEP_CAPABILITY}"])
    decided = seal(
        Draft(
            session_id=session,
            seq=1,
            era=0,
            kind=event,
            stamp_ms=now_ms,
            family="deadline",
            name=ob.name,
            label=label,
            attrs=facts,
        ),
        admitted.hash,
    )
    completed = seal(
        Draft(
            session_id=session,
            seq=2,
            era=0,
            kind=JournalKind.RUN_COMPLETED,
            stamp_ms=now_ms,
            label=label,
            attrs={"kind": "sweep", "case_id": case.case_id},
        ),
        decided.hash,
    )
    return [admitted, decided, completed]


def followup(
    case: CaseRecord, ob: Obligation, cmd: BreachDeadline, now_ms: int
) -> AdmissionRequest | None:
    """The follow-up run's admission request, or None when the deadline declared no handler."""
    if ob.on_breach is None:
        return None
    payload = {
        "case_id": case.case_id,
        "obligation": ob.name,
        "due_ms": ob.due_ms,
        "sweep_run_id": cmd.sweep_run_id,
        "rule": json.loads(ob.rule_json),
        "calendar": ob.calendar,
    }
    return AdmissionRequest(
        admission_key=followup_admission_key(case.case_id, ob.name, ob.due_ms),
        capability=ob.on_breach,
        input_json=canonical_json(payload),
        # The case's business keys, not its reserved bookkeeping (admission refuses those).
        correlation_keys={
            **{k: v for k, v in case.correlation_keys.items() if not k.startswith(RESERVED_PREFIX)},
            CASE_KEY: case.case_id,
        },
        tenant=case_tenant(case),
        initiator=SWEEP_INITIATOR,
        requested_ms=now_ms,
    )
