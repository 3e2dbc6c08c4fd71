"""The chain verifier: one fold over one session's journal records, and its strict reading.

Pure: no I/O, no clock. The journal service (one record at a time), ``runplane journal
verify``, ``GET /runs/{id}/verify``, a recording's check and the test Driver all run this same
fold, so no two readers can disagree about a chain.

State per session is a :class:`Tip` — the next expected seq, the hash the next record must
link to, and the first break if there was one. Each record is checked in three steps, the
first two by ``runplane.core.chain``'s ``check_link``, ``check_signed`` and
``SlotStates``, the third by its ``check_entry``:

1. **Position**: ``seq`` must be exactly the next one (a lower seq is a fork or a replay of an
   older record, a higher one is a gap: records are missing), and the chain must not have
   ended: any record after RUN_COMPLETED / RUN_FAILED / RUN_QUARANTINED / RUN_CANCELLED is
   ``after_end`` — but an operator's resume after a failed or quarantined end, and one
   RUN_ERASED (the run's bodies tombstoned) after any end, after which nothing follows.
2. **Links**: ``prev_hash`` must be the previous record's ``hash``, and ``hash`` must be the
   core's recomputation (SHA-256 over prev_hash ‖ canonical record); then the writer's
   signature when a keyring was configured; then **one start per slot** (``SlotStates``): a
   second announce of one (era, call_seq) while the first has no outcome and is not in
   doubt, an announce after its record, or a second record is ``duplicate_slot``.
3. **Body** (records that carry a ``body_digest`` and a ``call_seq``): the digest recomputed
   from the ResultEntry's body (never its stored ``body_digest`` field, which a tamperer would
   rewrite with the value) must equal the chain's digest, and the entry's family, name,
   request witness, stamp and label must be the ones the record states (replay trusts them).
   An erased (tombstoned) or absent body is *BODY_MISSING* — not a break: bodies may be
   erased on purpose, and the chain still proves what was there.

The first break wins: once a chain is broken at seq N, every later record of the session is
reported BROKEN with ``broken_at_seq = N`` (nothing after a break can be trusted), and the run
is quarantined once. ``broken_at_seq`` names the first position that does not verify: for a
gap or a reorder it is the seq that was expected there, otherwise the offending record's seq
(``fault_seq``). Reasons start with the ``ChainFault`` name (``gap``, ``reorder``,
``bad_link``, ``bad_hash``, ``duplicate_slot``, ``body_digest_mismatch``, …).

Two readings of the one fold: ``verify_records`` reports every record (the auditor's view:
an absent body is a BODY_MISSING verdict and the chain still verifies); ``verify_chain`` is
the strict step on top for a holder of the whole run (a recording, a test, the Driver): it
stops at the first fault, and a body the chain names with no entry at all is that fault
(BODY_MISSING), since such a holder has every body it did not erase.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from runplane.core.chain import (
    NO_SLOTS,
    RESUMABLE_KINDS,
    TERMINAL_KINDS,
    ChainCheck,
    ChainFault,
    SlotStates,
    check_entry,
    check_link,
    check_signed,
    erases,
    fault_seq,
    reopens,
)
from runplane.wire import JournalKind, JournalRecord, ResultEntry
from runplane.wire import Verdict as RecordVerdict

GENESIS_HASH = "0" * 64

# Every break reason is ``<fault>: <detail>`` with the core's fault names (ChainFault), so
# the audit stream, the CLI and ``verify_chain`` speak of a break alike; records
# after a break say ``earlier_break``.
EARLIER_BREAK = "earlier_break"


class Erased:
    """A body that was tombstoned in ``results`` (erased on purpose)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ERASED"


ERASED = Erased()
Body = ResultEntry | Erased | None  # None: no entry was found


@dataclass(frozen=True, slots=True)
class Finding:
    """The verdict on one record."""

    verdict: RecordVerdict
    broken_at_seq: int | None = None
    reason: str | None = None
    # The chain's own fault at this record (None when verified, missing a body, or broken
    # only because an earlier record was): what the strict reading reports.
    fault: ChainFault | None = None
    detail: str = ""

    @property
    def breaks(self) -> bool:
        return self.verdict is RecordVerdict.BROKEN


VERIFIED = Finding(RecordVerdict.VERIFIED)


@dataclass(frozen=True, slots=True)
class Tip:
    """What the checker knows about one session after the records it has seen."""

    session_id: str
    next_seq: int = 0
    last_hash: str = GENESIS_HASH
    broken_at: int | None = None
    reason: str | None = None
    capability: str | None = None
    case_id: str | None = None
    ended: bool = False  # the last record was terminal: any further record is a break
    resumable: bool = False  # ...unless it was FAILED/QUARANTINED and the next is a resume
    erased: bool = False  # RUN_ERASED followed the end: not even an erase may follow now
    slots: SlotStates = NO_SLOTS  # what the chain has said about each (era, call_seq)

    @property
    def broken(self) -> bool:
        return self.broken_at is not None


def needs_body(rec: JournalRecord) -> bool:
    """Whether the record's verdict depends on a body in ``results``."""
    return rec.body_digest is not None and rec.call_seq is not None


def body_key(rec: JournalRecord) -> tuple[str, int, int]:
    """(session, era, call_seq): where the record's body lives in ``results``."""
    if rec.call_seq is None:
        raise ValueError(f"record seq {rec.seq} of {rec.session_id} belongs to no call")
    return (rec.session_id, rec.era, rec.call_seq)


def _broken(seq: int, kind: str, detail: str) -> Finding:
    fault = kind if isinstance(kind, ChainFault) else None
    return Finding(RecordVerdict.BROKEN, seq, f"{kind}: {detail}", fault, detail)


def check_links(tip: Tip, rec: JournalRecord, unsigned: str | None = None) -> Finding:
    """Position, link, hash, signature and slot of ``rec`` against ``tip`` (no body): the
    core's ``check_link``, ``check_signed`` and ``SlotStates.check``, positioned by the core's
    ``fault_seq``.

    The session is checked first, also for a session's first record (the tip knows whose
    chain it is).
    """
    if tip.broken_at is not None:
        return _broken(
            tip.broken_at, EARLIER_BREAK, f"chain broken at seq {tip.broken_at} ({tip.reason})"
        )
    if rec.session_id != tip.session_id:
        return _broken(
            rec.seq, ChainFault.WRONG_SESSION, f"record of {rec.session_id!r} in {tip.session_id!r}"
        )
    fault = check_link(
        rec,
        tip.next_seq,
        tip.last_hash,
        ended=tip.ended,
        resumable=tip.resumable,
        erasable=tip.ended and not tip.erased,
    )
    if fault is None:
        fault = check_signed(rec, unsigned)
    if fault is None:
        fault = tip.slots.check(rec)
    if fault is None:
        return VERIFIED
    return _broken(fault_seq(fault[0], tip.next_seq, rec), *fault)


def check_body(rec: JournalRecord, body: Body) -> Finding:
    """The record's body against the chain (for records that need one): the core's
    ``check_entry`` — the digest recomputed from the body, and the family, name, witness,
    stamp and label the record committed to. An erased or absent body is BODY_MISSING here,
    not a break (see the module docstring)."""
    if not needs_body(rec):
        return VERIFIED
    if body is None or isinstance(body, Erased):
        why = "erased" if isinstance(body, Erased) else "no entry in results"
        return Finding(
            RecordVerdict.BODY_MISSING,
            None,
            f"body_missing: call {rec.era}/{rec.call_seq} {why}",
            detail=f"call {rec.era}/{rec.call_seq} {why}",
        )
    fault = check_entry(rec, body)
    if fault is None:
        return VERIFIED
    return _broken(rec.seq, *fault)


def check(
    tip: Tip, rec: JournalRecord, body: Body, unsigned: str | None = None, *, bodies: bool = True
) -> Finding:
    """The verdict on ``rec``: links and signature first (then the body is irrelevant);
    ``bodies=False`` checks no body (a reader that was given none)."""
    finding = check_links(tip, rec, unsigned)
    if finding.breaks or not bodies:
        return finding
    return check_body(rec, body)


def advance(tip: Tip, rec: JournalRecord, finding: Finding) -> Tip:
    """The tip after ``rec`` with ``finding``; one function per record kind where it matters."""
    nxt = replace(
        tip,
        next_seq=max(tip.next_seq, rec.seq + 1),
        last_hash=rec.hash,
        ended=(tip.ended or rec.kind in TERMINAL_KINDS or erases(rec)) and not reopens(rec),
        resumable=rec.kind in RESUMABLE_KINDS,
        erased=tip.erased or erases(rec),
        slots=tip.slots.after(rec),
    )
    if finding.breaks and not tip.broken:
        nxt = replace(nxt, broken_at=finding.broken_at_seq, reason=finding.reason)
    apply = _APPLY.get(rec.kind)
    return apply(nxt, rec) if apply is not None else nxt


def _apply_admitted(tip: Tip, rec: JournalRecord) -> Tip:
    # Capability and case are facts of admission; later records need not repeat them.
    return replace(
        tip,
        capability=rec.attrs.get("capability", tip.capability),
        case_id=rec.attrs.get("case_id", tip.case_id),
    )


_APPLY: Mapping[JournalKind, Callable[[Tip, JournalRecord], Tip]] = {
    JournalKind.RUN_ADMITTED: _apply_admitted,
}


@dataclass(frozen=True, slots=True)
class ChainReport:
    """The verdict on a whole chain (the CLI's and the API's answer)."""

    session_id: str
    records: int
    verified: bool
    broken_at_seq: int | None
    reason: str | None
    body_missing: tuple[int, ...]
    findings: tuple[tuple[int, Finding], ...]


def verify_records(
    session_id: str,
    records: Iterable[JournalRecord],
    bodies: Mapping[tuple[int, int], Body] | None,
    unsigned: Sequence[str | None] | None = None,
) -> ChainReport:
    """Fold the checker over a whole chain in journal order (records as they are on the topic).

    ``bodies`` maps (era, call_seq) → the ResultEntry, ``ERASED`` for a tombstone; absent means
    no entry; ``None``: bodies are not checked. ``unsigned`` (aligned with ``records``, ``runplane.signing.journal.unsigned``): why each
    record is not signed by a chain writer; None when no keyring is configured. An empty chain
    does not verify (there is nothing to trust).
    """
    tip = Tip(session_id)
    findings: list[tuple[int, Finding]] = []
    for i, rec in enumerate(records):
        body = (
            bodies.get((rec.era, rec.call_seq))
            if bodies is not None and needs_body(rec) and rec.call_seq is not None
            else None
        )
        signed = None if unsigned is None else unsigned[i]
        finding = check(tip, rec, body, signed, bodies=bodies is not None)
        findings.append((rec.seq, finding))
        tip = advance(tip, rec, finding)
    missing = tuple(seq for seq, f in findings if f.verdict is RecordVerdict.BODY_MISSING)
    if not findings:
        return ChainReport(session_id, 0, False, 0, "gap: no records", (), ())
    return ChainReport(
        session_id,
        len(findings),
        not tip.broken,
        tip.broken_at,
        tip.reason,
        missing,
        tuple(findings),
    )


def bodies_of(results: Mapping[tuple[int, int], ResultEntry | None]) -> dict[tuple[int, int], Body]:
    """A read of ``results`` (None = tombstone) as the checker's bodies (``ERASED``)."""
    return {k: ERASED if v is None else v for k, v in results.items()}


def verify_chain(
    records: Iterable[JournalRecord],
    results: Mapping[tuple[int, int], ResultEntry | None] | None = None,
    *,
    unsigned: Sequence[str | None] | None = None,
) -> ChainCheck:
    """The strict reading of ``verify_records`` for a holder of the whole run: the first fault
    from seq 0 in the order given, and ``ChainCheck.checked`` the records before it.

    ``results`` maps (era, call_seq) to the session's ResultEntry (``None`` = erased on
    purpose, allowed); without it, bodies are not checked — with it, a body the chain names
    that has no entry is a BODY_MISSING fault. ``unsigned`` (aligned with ``records``): why
    each record is not signed by a chain writer (``runplane.signing.journal.unsigned``);
    without it, signatures are not checked. The session is the first record's.
    """
    chain = list(records)
    if not chain:
        return ChainCheck(
            ok=False, checked=0, bad_seq=0, fault=ChainFault.EMPTY, detail="no records"
        )
    bodies = None if results is None else bodies_of(results)
    report = verify_records(chain[0].session_id, chain, bodies, unsigned)
    for checked, (rec, (_, finding)) in enumerate(zip(chain, report.findings, strict=True)):
        if finding.fault is not None:
            bad = finding.broken_at_seq
            return ChainCheck(
                ok=False, checked=checked, bad_seq=bad, fault=finding.fault, detail=finding.detail
            )
        absent = bodies is not None and needs_body(rec) and (rec.era, rec.call_seq) not in bodies
        if absent:
            return ChainCheck(
                ok=False,
                checked=checked,
                bad_seq=rec.seq,
                fault=ChainFault.BODY_MISSING,
                detail=f"no result entry for era {rec.era} call_seq {rec.call_seq}",
            )
    return ChainCheck(ok=True, checked=len(chain))
