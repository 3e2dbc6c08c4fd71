"""What a run looks like from its audit records: status, era, cost, timestamps, verdict.

Pure. A run's summary is a fold over its audit records in topic order (:func:`apply`), one rule per
record kind where the kind matters. The Redis index applies the same rules incrementally (see
``runplane.journal.index``; a test checks both agree), and ``runplane runs show`` folds a run's journal read
straight from Kafka when no index is at hand.

Cost is summed from every record that carries one (the executor puts a generation's tokens
and units on its EffectRecorded); per case and per capability totals are sums of run totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from runplane.wire import AuditRecord, Cost, JournalKind, RunStatus, Verdict

# Kinds that settle the status outright; every other kind means the run is running again
# (a record after a park is the run moving on).
_STATUS_OF_KIND: Mapping[JournalKind, RunStatus] = {
    JournalKind.RUN_ADMITTED: RunStatus.ADMITTED,
    JournalKind.RUN_COMPLETED: RunStatus.COMPLETED,
    JournalKind.RUN_FAILED: RunStatus.FAILED,
    JournalKind.RUN_QUARANTINED: RunStatus.QUARANTINED,
    JournalKind.RUN_CANCELLED: RunStatus.CANCELLED,
}
# Kinds that say nothing about where the run is.
_NEUTRAL = frozenset(
    {JournalKind.DEADLINE_REGISTERED, JournalKind.CANCEL_REQUESTED, JournalKind.RUN_ERASED}
)
TERMINAL = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED, RunStatus.CANCELLED}
)
# The end records whose attrs say why the run ended (body-free: the journal keeps only the
# reason, its error type and who cancelled; the output itself is a body).
_ENDS = frozenset({JournalKind.RUN_FAILED, JournalKind.RUN_QUARANTINED, JournalKind.RUN_CANCELLED})


def erased_verdict(bodies: int) -> str:
    """The one verdict every reader gives a run whose bodies were erased (``journal verify``,
    ``runs show``, ``runs list``, ``replay``, the run API): its chain verifies — erasing is not a break — and ``bodies``
    of its bodies are gone (the chain report's ``body_missing``)."""
    return f"VERIFIED, {bodies} bodies erased"


@dataclass(frozen=True, slots=True)
class CostTotals:
    """Tokens and cost units, summed."""

    tokens_in: int = 0
    tokens_out: int = 0
    units: float = 0.0

    def plus(self, cost: Cost | None) -> CostTotals:
        if cost is None:
            return self
        return CostTotals(
            self.tokens_in + cost.tokens_in,
            self.tokens_out + cost.tokens_out,
            self.units + cost.units,
        )

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


def status_of(audit: AuditRecord) -> RunStatus | None:
    """The status a record puts its run in, or None when it does not say."""
    if audit.kind in _STATUS_OF_KIND:
        return _STATUS_OF_KIND[audit.kind]
    if audit.kind is JournalKind.TASK_OPENED:
        # The core parks a run on a task right after journaling TASK_OPENED (no RUN_PARKED).
        return RunStatus.AWAITING_HUMAN
    if audit.kind is JournalKind.RUN_PARKED:
        return RunStatus.AWAITING_HUMAN if _parked_on_task(audit.attrs) else RunStatus.PARKED
    if audit.kind in _NEUTRAL:
        return None
    return RunStatus.RUNNING


def _parked_on_task(attrs: Mapping[str, str]) -> bool:
    parked = attrs.get("parked_on", "")
    return parked.lower().startswith("task") or (not parked and "task_id" in attrs)


def parked_on_of(audit: AuditRecord) -> str | None:
    """What the run waits for after this record: ``task:<id>`` after TASK_OPENED, the
    ``parked_on`` attr of RUN_PARKED (e.g. ``signal:<name>``); None otherwise."""
    if audit.kind is JournalKind.TASK_OPENED:
        return f"task:{audit.attrs.get('task_id', 'unknown')}"
    if audit.kind is not JournalKind.RUN_PARKED:
        return None
    parked = audit.attrs.get("parked_on")
    if parked:
        return parked
    task = audit.attrs.get("task_id")
    return f"task:{task}" if task else "unknown"


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run as ``GET /runs/{id}`` and ``runplane runs show`` present it."""

    run_id: str
    status: RunStatus | None = None
    capability: str | None = None
    # From the run's RunAdmitted (seq 0); None until it is folded in (or in an index entry
    # older than this field: rebuild the index). The journal API shows a run to its tenant only.
    tenant: str | None = None
    case_id: str | None = None
    era: int = 0
    last_seq: int = -1
    records: int = 0
    cost: CostTotals = CostTotals()
    started_ms: int | None = None
    updated_ms: int | None = None
    ended_ms: int | None = None
    parked_on: str | None = None
    verdict: Verdict = Verdict.VERIFIED
    broken_at_seq: int | None = None
    reason: str | None = None
    body_missing: int = 0
    # How the run ended, from its end record's attrs: why it failed, was quarantined or was
    # cancelled (``reason``'s sibling above is the *verdict's* reason), the error type of a
    # failure, and who cancelled it.
    ended_reason: str | None = None
    error_type: str | None = None
    cancelled_by: str | None = None
    # From RUN_ERASED (after the end): how many bodies were tombstoned and who erased them
    # (an operator, or ``retention``); None while the run's bodies are kept.
    erased_bodies: int | None = None
    erased_by: str | None = None

    @property
    def shown_verdict(self) -> str:
        """The verdict every reader gives: ``erased_verdict`` for an erased run whose chain
        holds, the audit symbol otherwise."""
        if self.erased_bodies is not None and self.verdict is not Verdict.BROKEN:
            return erased_verdict(self.erased_bodies)
        return str(self.verdict)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["cost"] = {**asdict(self.cost), "tokens": self.cost.tokens}
        out["status"] = None if self.status is None else str(self.status)
        out["verdict"] = str(self.verdict)
        return out


def apply(summary: RunSummary, audit: AuditRecord) -> RunSummary:
    """The summary after one more record, in audit topic order.

    A record at or below ``last_seq`` is a re-delivery (a re-read after a crash, two indexers)
    and changes nothing — unless it is BROKEN: a forged or re-sent record carries an old seq
    (a copy of seq 3 re-sent after the run ended is published as seq 3, BROKEN), and its
    verdict is the only evidence of the forgery, so it is never deduplicated away. It breaks
    the summary's verdict (the first break wins) and touches nothing else, so applying it
    again is still a no-op.
    """
    if audit.seq <= summary.last_seq:
        return _late_break(summary, audit)
    status = status_of(audit)
    if status is None or (summary.status in TERMINAL and status not in TERMINAL):
        status = summary.status
    parked = parked_on_of(audit)
    if audit.kind in _NEUTRAL:
        parked = summary.parked_on
    broken = summary.verdict is Verdict.BROKEN
    after = replace(
        summary,
        status=status,
        capability=summary.capability or audit.capability,
        tenant=summary.tenant or _tenant_of(audit),
        case_id=summary.case_id or audit.case_id,
        era=max(summary.era, audit.era),
        last_seq=audit.seq,
        records=summary.records + 1,
        cost=summary.cost.plus(audit.cost),
        started_ms=audit.stamp_ms if summary.started_ms is None else summary.started_ms,
        updated_ms=audit.stamp_ms,
        ended_ms=audit.stamp_ms
        if status in TERMINAL and summary.ended_ms is None
        else summary.ended_ms,
        parked_on=parked,
        verdict=summary.verdict if broken else _worse(summary.verdict, audit.verdict),
        broken_at_seq=summary.broken_at_seq if broken else audit.broken_at_seq,
        reason=summary.reason
        if broken
        else (audit.reason if audit.verdict is Verdict.BROKEN else summary.reason),
        body_missing=summary.body_missing + (audit.verdict is Verdict.BODY_MISSING),
    )
    return _ended(after, audit)


def _ended(summary: RunSummary, audit: AuditRecord) -> RunSummary:
    """With the fields an end record sets (the first end wins: nothing follows it), or the
    erasure that may follow it."""
    if audit.kind is JournalKind.RUN_ERASED and audit.verdict is not Verdict.BROKEN:
        bodies = audit.attrs.get("bodies", "")
        return replace(
            summary,
            erased_bodies=int(bodies) if bodies.isdigit() else 0,
            erased_by=audit.attrs.get("by"),
        )
    if audit.kind not in _ENDS or summary.ended_reason is not None:
        return summary
    attrs = audit.attrs
    return replace(
        summary,
        ended_reason=attrs.get("reason", ""),
        error_type=attrs.get("error_type"),
        cancelled_by=attrs.get("cancelled_by"),
    )


def _late_break(summary: RunSummary, audit: AuditRecord) -> RunSummary:
    if audit.verdict is not Verdict.BROKEN or summary.verdict is Verdict.BROKEN:
        return summary
    return replace(
        summary,
        verdict=Verdict.BROKEN,
        broken_at_seq=audit.broken_at_seq,
        reason=audit.reason,
    )


def _tenant_of(audit: AuditRecord) -> str | None:
    return audit.attrs.get("tenant") if audit.kind is JournalKind.RUN_ADMITTED else None


def _worse(a: Verdict, b: Verdict) -> Verdict:
    rank = {Verdict.VERIFIED: 0, Verdict.BODY_MISSING: 1, Verdict.BROKEN: 2}
    return a if rank[a] >= rank[b] else b


def summarize(run_id: str, audits: Iterable[AuditRecord]) -> RunSummary:
    """Fold a run's records in audit topic order (the order the journal service published
    them: seq order for an intact chain). Not sorted by seq: a forged record carries an old
    seq, and the first BROKEN record published is the one that names the break."""
    summary = RunSummary(run_id)
    for audit in audits:
        summary = apply(summary, audit)
    return summary
