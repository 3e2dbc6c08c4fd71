"""The journal service's pure logic: journal and results messages in, audit records out.

One :class:`PartitionState` per assigned partition number (``journal``, ``results`` and
``audit`` are co-partitioned by session, so partition *p* of each holds the same sessions).
The shell feeds it messages and clock ticks; it returns what to publish. No I/O, no clock:
``now_ms`` comes from the caller.

**Order and bodies.** One commit of the executor writes a call's ResultEntry (``results``) and
its EffectRecorded (``journal``) in one transaction, but the two topics are fetched
independently, so either may be read first. A record that needs a body and whose body has not
been read yet is *held*, and every later record of its session queues behind it so the audit
stream keeps journal order. A held record is released when its body arrives, or declared
BODY_MISSING when both:

* ``body_grace_ms`` have passed since the record was read, and
* the session's ``results`` partition sits at its end (EOF under read_committed, i.e. the last
  stable offset) with nothing read since.

Why that is enough: the journal record is visible under read_committed only because its
transaction committed, so its results writes are below the results partition's last stable
offset from that moment on. The consumer keeps fetching a partition it sits at the end of
(every ``fetch.wait.max.ms``, 500 ms by default), so a results partition still "at its end"
a grace period (default 5 s, ten fetch rounds) after the record was read has no such entry.
A body erased on purpose (tombstone) is BODY_MISSING at once: erasure must not break a chain.

Bodies read before their record are cached until it arrives; one whose session has nothing
held is dropped once the journal partition sits at its end for the grace period (its record,
committed with it, would have been read by then — e.g. it was re-read after a restart for a
record already audited).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from runplane.core.chain import NO_SLOTS, RESUMABLE_KINDS, TERMINAL_KINDS, SlotStates
from runplane.core.verify import (
    ERASED,
    Body,
    Erased,
    Finding,
    Tip,
    advance,
    body_key,
    check_body,
    check_links,
    needs_body,
)
from runplane.wire import AuditRecord, JournalKind, JournalRecord, ResultEntry, Verdict

BodyKey = tuple[str, int, int]

QUARANTINE_PREFIX = "quarantine:"


@dataclass(frozen=True, slots=True)
class JournalIn:
    """A journal record as read from ``journal``."""

    record: JournalRecord
    partition: int
    offset: int
    # Why the message is not signed by a chain writer (runplane.signing.journal); None when it is, or
    # when no keyring is configured.
    unsigned: str | None = None


@dataclass(frozen=True, slots=True)
class ResultIn:
    """A results message: an entry, or a tombstone (``entry is None``) for ``key``."""

    key: BodyKey
    entry: ResultEntry | None
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class AuditOut:
    """Publish ``record`` on ``audit`` (partition = the journal record's partition)."""

    record: AuditRecord
    partition: int


@dataclass(frozen=True, slots=True)
class QuarantineOut:
    """Tell the run's executor to quarantine it (a Wake with reason ``quarantine:<why>``)."""

    session_id: str
    reason: str
    broken_at_seq: int


Output = AuditOut | QuarantineOut


@dataclass(slots=True)
class _Held:
    msg: JournalIn
    read_ms: int


@dataclass(slots=True)
class _Cached:
    body: ResultEntry | Erased
    offset: int
    read_ms: int


@dataclass
class PartitionState:
    """Everything the handler knows about one partition's sessions."""

    partition: int
    body_grace_ms: int = 5_000
    tips: dict[str, Tip] = field(default_factory=dict)
    held: dict[str, deque[_Held]] = field(default_factory=dict)
    bodies: dict[BodyKey, _Cached] = field(default_factory=dict)
    # Since when (ms) each topic's partition sits at its end with nothing read since.
    results_idle_since: int | None = None
    journal_idle_since: int | None = None

    def held_count(self) -> int:
        return sum(len(q) for q in self.held.values())

    def results_floor(self) -> int | None:
        """The lowest results offset still needed (cached bodies), or None."""
        return min((c.offset for c in self.bodies.values()), default=None)


def restore_tip(audit: AuditRecord) -> Tip:
    """The tip after the last audit record published for a session (the restore fold)."""
    broken = audit.verdict is Verdict.BROKEN
    return Tip(
        session_id=audit.session_id,
        next_seq=audit.seq + 1,
        last_hash=audit.hash,
        broken_at=audit.broken_at_seq if broken else None,
        reason=audit.reason if broken else None,
        capability=audit.capability,
        case_id=audit.case_id,
        ended=audit.kind in TERMINAL_KINDS or audit.kind is JournalKind.RUN_ERASED,
        resumable=audit.kind in RESUMABLE_KINDS,
        erased=audit.kind is JournalKind.RUN_ERASED,
    )


def restore(
    state: PartitionState,
    audits: dict[str, AuditRecord],
    slots: dict[str, SlotStates] | None = None,
) -> None:
    """Install the tips restored from ``audit`` (last record per session), each with its
    session's slot states (``fold_slots``; none for a chain that can take no more records)."""
    for session_id, audit in audits.items():
        tip = restore_tip(audit)
        held = (slots or {}).get(session_id)
        state.tips[session_id] = tip if held is None else replace(tip, slots=held)


def takes_records(tip: Tip) -> bool:
    """Whether a restored chain can still take a record without a break: not broken, and not
    ended (unless it may be resumed). Only such a chain needs its slot states restored."""
    return not tip.broken and (not tip.ended or tip.resumable)


def fold_slots(slots: dict[str, SlotStates], rec: JournalRecord) -> None:
    """One audited journal record into its session's slot states, as ``advance`` folded it.

    The slot states are the one part of a tip its last audit record cannot restore (the audit
    is body-free: it does not say which record carried a body digest, nor the witness a
    harmless repeat is compared by), so they are folded from ``journal`` itself, up to the
    offsets the service has committed — exactly the records its audit covers."""
    run_id = rec.session_id
    slots[run_id] = slots.get(run_id, NO_SLOTS).after(rec)


def on_journal(state: PartitionState, msg: JournalIn, now_ms: int) -> list[Output]:
    """A journal record arrived: queue it behind its session's held records, then drain."""
    state.journal_idle_since = None
    run_id = msg.record.session_id
    state.held.setdefault(run_id, deque()).append(_Held(msg, now_ms))
    return list(_drain(state, run_id, now_ms))


def on_result(state: PartitionState, msg: ResultIn, now_ms: int) -> list[Output]:
    """A body (or its tombstone) arrived: cache it and release whatever waited for it."""
    state.results_idle_since = None
    body: ResultEntry | Erased = ERASED if msg.entry is None else msg.entry
    state.bodies[msg.key] = _Cached(body, msg.offset, now_ms)
    return list(_drain(state, msg.key[0], now_ms)) if msg.key[0] in state.held else []


def on_end(state: PartitionState, topic: str, now_ms: int) -> None:
    """The consumer reached the end of this partition of ``topic`` ("journal"/"results")."""
    if topic == "results" and state.results_idle_since is None:
        state.results_idle_since = now_ms
    elif topic == "journal" and state.journal_idle_since is None:
        state.journal_idle_since = now_ms


def tick(state: PartitionState, now_ms: int) -> list[Output]:
    """Time passed: declare overdue bodies missing, drop stale cached bodies."""
    out: list[Output] = []
    for run_id in list(state.held):
        out.extend(_drain(state, run_id, now_ms))
    _expire_bodies(state, now_ms)
    return out


def _expire_bodies(state: PartitionState, now_ms: int) -> None:
    idle = state.journal_idle_since
    if idle is None:
        return
    stale = [
        key
        for key, c in state.bodies.items()
        if key[0] not in state.held and now_ms - max(c.read_ms, idle) >= state.body_grace_ms
    ]
    for key in stale:
        del state.bodies[key]


def _body_overdue(state: PartitionState, held: _Held, now_ms: int) -> bool:
    return state.results_idle_since is not None and now_ms - held.read_ms >= state.body_grace_ms


def _drain(state: PartitionState, run_id: str, now_ms: int) -> Iterator[Output]:
    queue = state.held.get(run_id)
    while queue:
        head = queue[0]
        rec = head.msg.record
        tip = state.tips.get(run_id) or Tip(run_id)
        finding = check_links(tip, rec, head.msg.unsigned)
        if not finding.breaks and needs_body(rec):
            cached = state.bodies.get(body_key(rec))
            if cached is None and not _body_overdue(state, head, now_ms):
                return  # wait for the body; later records of the session wait behind it
            body: Body = None if cached is None else cached.body
            finding = check_body(rec, body)
        if needs_body(rec):
            state.bodies.pop(body_key(rec), None)
        queue.popleft()
        yield from _decided(state, tip, head.msg, finding, now_ms)
    state.held.pop(run_id, None)


def _decided(
    state: PartitionState, tip: Tip, msg: JournalIn, finding: Finding, now_ms: int
) -> Iterator[Output]:
    after = advance(tip, msg.record, finding)
    state.tips[tip.session_id] = after
    yield AuditOut(audit_record(msg.record, finding, after, now_ms), msg.partition)
    if finding.breaks and not tip.broken:
        assert finding.broken_at_seq is not None  # a break always names its position
        yield QuarantineOut(tip.session_id, finding.reason or "chain broken", finding.broken_at_seq)


def audit_record(rec: JournalRecord, finding: Finding, tip: Tip, now_ms: int) -> AuditRecord:
    """The public, body-free AuditRecord for ``rec`` (no request witness, no body digest)."""
    return AuditRecord(
        session_id=rec.session_id,
        seq=rec.seq,
        era=rec.era,
        kind=rec.kind,
        call_seq=rec.call_seq,
        family=rec.family,
        name=rec.name,
        stamp_ms=rec.stamp_ms,
        label=rec.label,
        cost=rec.cost,
        attrs=dict(rec.attrs),
        hash=rec.hash,
        verdict=finding.verdict,
        broken_at_seq=finding.broken_at_seq,
        reason=finding.reason,
        capability=tip.capability,
        case_id=tip.case_id,
        verified_ms=now_ms,
    )


def quarantine_reason(q: QuarantineOut) -> str:
    """The Wake reason the executor recognises: ``quarantine:<kind> at seq N: <detail>``."""
    kind, _, detail = q.reason.partition(": ")
    return f"{QUARANTINE_PREFIX}{kind} at seq {q.broken_at_seq}: {detail}".rstrip(": ")
