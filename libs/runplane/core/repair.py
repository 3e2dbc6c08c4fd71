"""Repairing runs an operator gave up on: resume, fork and erase — pure decisions, no I/O.

Three operator actions, each authorized at the edge (the journal service's HTTP API, role
``operator``) and carried out by whoever owns the run's chain:

- **Resume** (``runplane runs resume RUN``): a QUARANTINED or FAILED run replays again
  against the code deployed now. The executor owning the run's partition appends RUN_RESUMED
  (attrs ``repair=resume``, ``by``, ``reason``, ``from_status``) to its chain and restores it
  from that snapshot: the result journal is served, the first call it lacks is made live.
- **Fork** (``runplane runs fork RUN --from-seq N``): a new run whose chain starts with the old
  chain's records ``0..N-1`` (re-sealed under the new session id, so its own hashes hold) and
  whose record N is RUN_RESUMED (``repair=fork``) naming the old run (``forked_from_run``,
  which the runs UI links), N, the old record N-1's hash and the old chain's head — an auditor
  sees both chains and how they are linked. The bodies of the calls recorded in the prefix are
  copied; everything after N runs again, live.
- **Erase** (``runplane journal erase RUN``): an ended run's bodies (its ``results`` rows and
  the bodies its snapshot carries: input, output, checkpoint) are replaced by tombstones and
  the snapshot is marked ``BodiesErased``. The body-free chain is untouched and still
  verifies, with the verdict "bodies erased". A live run is refused, and an erased run can no
  longer be resumed or forked (its replay would perform again what it did).

The order travels to the chain's owner as a ``Wake`` whose reason is ``repair:`` + canonical
JSON (``RepairOrder.wake``): the inbox is the one path that serializes it with everything else
the run receives, so two resumes of one run cannot both apply (the second finds it running).

Errors: ``RepairRefused`` (a ``TerminalError``: asking again will not help) says why an order
cannot apply to the run as it is.
"""

from __future__ import annotations

import enum
import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from runplane.core.canonical import canonical_json
from runplane.core.chain import INPUT_LABEL, default_label, seal
from runplane.errors import TerminalError
from runplane.wire import (
    ZERO_HASH,
    ErrorInfo,
    JournalKind,
    JournalRecord,
    ResultEntry,
    RunStatus,
    RunStatusUpdate,
    SessionSnapshot,
    Wake,
)

__all__ = [
    "ENDED",
    "ERASED",
    "REPAIR_PREFIX",
    "RESUMABLE",
    "RETENTION",
    "ForkPlan",
    "RepairKind",
    "RepairOrder",
    "RepairRefused",
    "erase",
    "erased",
    "fork",
    "fork_session_id",
    "parse_order",
    "refusal",
    "resume",
    "scrub",
    "seal_erasure",
]

REPAIR_PREFIX = "repair:"
ENDED = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED})
RESUMABLE = frozenset({RunStatus.QUARANTINED, RunStatus.FAILED})
ERASED = "BodiesErased"  # ErrorInfo.type of an erased run's snapshot
CANCELLED = "RunCancelled"  # ErrorInfo.type of a cancelled run (``engine.ends.cancelled``)
# Free text an operator types goes into the body-free chain (attrs): bounded, like every
# other free text there (error reasons are cut at 500).
MAX_REASON = 200
MAX_PRINCIPAL = 200
_FORK_DOMAIN = b"runplane/fork/v1\x00"


class RepairRefused(TerminalError):
    """The repair cannot apply to the run as it is (live, not ended, erased, bad seq...)."""


class RepairKind(enum.StrEnum):
    RESUME = "resume"
    FORK = "fork"
    ERASE = "erase"


@dataclass(frozen=True)
class RepairOrder:
    """What an operator asked, by whom (the authenticated principal), and why."""

    kind: RepairKind
    by: str
    reason: str = ""

    def __post_init__(self) -> None:
        if not self.by.strip() or len(self.by) > MAX_PRINCIPAL:
            raise RepairRefused("a repair must name the operator (1-200 characters)")
        if len(self.reason) > MAX_REASON:
            raise RepairRefused(f"the reason is limited to {MAX_REASON} characters")

    def wake(self, session_id: str, sent_ms: int) -> Wake:
        """The inbox message that carries this order to the run's owner."""
        body = {"kind": str(self.kind), "by": self.by, "reason": self.reason}
        return Wake(
            session_id=session_id, reason=REPAIR_PREFIX + canonical_json(body), sent_ms=sent_ms
        )

    def attrs(self) -> dict[str, str]:
        out = {"repair": str(self.kind), "by": self.by}
        if self.reason:
            out["reason"] = self.reason
        return out


# The executor's results retention erases as this "operator" (``RUNPLANE_EXECUTOR_RESULTS_RETENTION_S``).
RETENTION = RepairOrder(RepairKind.ERASE, "retention", "results retention")


def parse_order(reason: str) -> RepairOrder | None:
    """The order a Wake's reason carries; None for any other wake. ``RepairRefused`` for a
    reason that says ``repair:`` but does not carry a valid order."""
    if not reason.startswith(REPAIR_PREFIX):
        return None
    try:
        body = json.loads(reason[len(REPAIR_PREFIX) :])
        return RepairOrder(RepairKind(body["kind"]), str(body["by"]), str(body.get("reason", "")))
    except (ValueError, KeyError, TypeError) as exc:
        raise RepairRefused(f"malformed repair order: {exc}") from exc


def erased(snapshot: SessionSnapshot) -> bool:
    return snapshot.error is not None and snapshot.error.type == ERASED


def refusal(kind: RepairKind, snapshot: SessionSnapshot | None) -> str | None:
    """Why ``kind`` cannot apply to a run in ``snapshot``'s state; None when it can."""
    if snapshot is None:
        return "unknown run"
    if erased(snapshot):
        return "its bodies were erased: it cannot be resumed, forked or erased again"
    if kind is RepairKind.RESUME and snapshot.status not in RESUMABLE:
        return f"the run is {snapshot.status}: only QUARANTINED or FAILED runs are resumed"
    if (
        kind is RepairKind.RESUME
        and snapshot.error is not None
        and snapshot.error.type == CANCELLED
    ):
        # An operator ended it on purpose (RUN_CANCELLED): its chain stays closed.
        return "it was cancelled: fork it to run it again"
    if kind is RepairKind.ERASE and snapshot.status not in ENDED:
        return f"the run is live ({snapshot.status}): only ended runs are erased"
    return None


def _check(kind: RepairKind, snapshot: SessionSnapshot) -> None:
    why = refusal(kind, snapshot)
    if why is not None:
        raise RepairRefused(f"cannot {kind} run {snapshot.session_id}: {why}")


def resume(
    snapshot: SessionSnapshot, order: RepairOrder, now_ms: int
) -> tuple[JournalRecord, SessionSnapshot, RunStatusUpdate]:
    """RUN_RESUMED appended to an ended run's chain, the snapshot to restore it from (running
    again, nothing parked, no error), and the status update for admission's claim."""
    _check(RepairKind.RESUME, snapshot)
    record = seal(
        _draft(
            snapshot,
            JournalKind.RUN_RESUMED,
            now_ms,
            {**order.attrs(), "from_status": str(snapshot.status)},
        ),
        snapshot.last_hash,
    )
    running = replace(
        snapshot,
        status=RunStatus.RUNNING,
        next_seq=snapshot.next_seq + 1,
        last_hash=record.hash,
        parked_on=None,
        error=None,
        output_json=None,
        updated_ms=now_ms,
    )
    update = RunStatusUpdate(
        admission_key=snapshot.admission_key,
        run_id=snapshot.session_id,
        status=RunStatus.RUNNING,
        tenant=snapshot.tenant,
        updated_ms=now_ms,
        seq=record.seq,
    )
    return record, running, update


def _draft(
    snapshot: SessionSnapshot, kind: JournalKind, now_ms: int, attrs: Mapping[str, str]
) -> JournalRecord:
    # A placeholder-linked record; ``seal`` sets prev_hash and hash.
    return JournalRecord(
        session_id=snapshot.session_id,
        seq=snapshot.next_seq,
        era=snapshot.era,
        kind=kind,
        stamp_ms=now_ms,
        label=default_label(),
        attrs=dict(attrs),
        prev_hash=snapshot.last_hash,
        hash=snapshot.last_hash,
    )


def erase(
    snapshot: SessionSnapshot, order: RepairOrder, now_ms: int, bodies: int
) -> tuple[JournalRecord, SessionSnapshot]:
    """An ended run's erasure: RUN_ERASED appended to its chain (who, why, how many of its
    ``bodies`` were tombstoned — body-free, so it reaches ``audit`` and every reader) and its
    snapshot with the bodies gone (``scrub``), linked to that record."""
    _check(RepairKind.ERASE, snapshot)
    return seal_erasure(scrub(snapshot, order, now_ms), order, now_ms, bodies)


def scrub(snapshot: SessionSnapshot, order: RepairOrder, now_ms: int) -> SessionSnapshot:
    """The snapshot with its bodies (input, output, checkpoint, buffered signals, open request)
    gone, marked ``BodiesErased`` (who erased is in the message, not a body). Unchecked: the
    executor's retention keeps runs waiting to expire this way, cheaply (``seal_erasure``
    then journals the erasure when its time comes)."""
    note = f"bodies erased by {order.by}"
    if order.reason:
        note += f": {order.reason}"
    return replace(
        snapshot,
        input_json="null",
        output_json=None,
        checkpoint_json=None,
        pending_signals=(),
        open_request_json=None,
        error=ErrorInfo(type=ERASED, message=note, retryable=False),
        updated_ms=now_ms,
    )


def seal_erasure(
    scrubbed: SessionSnapshot, order: RepairOrder, now_ms: int, bodies: int
) -> tuple[JournalRecord, SessionSnapshot]:
    """RUN_ERASED after a ``scrub``bed snapshot's last record, and the snapshot after it."""
    attrs = {**order.attrs(), "bodies": str(bodies)}
    record = seal(_draft(scrubbed, JournalKind.RUN_ERASED, now_ms, attrs), scrubbed.last_hash)
    after = replace(
        scrubbed, next_seq=scrubbed.next_seq + 1, last_hash=record.hash, updated_ms=now_ms
    )
    return record, after


@dataclass(frozen=True)
class ForkPlan:
    """What a fork writes before its executor takes over: the new chain (old prefix re-sealed,
    then the link record), the copied bodies, and the snapshot to restore the fork from."""

    session_id: str
    records: tuple[JournalRecord, ...]
    results: tuple[ResultEntry, ...]
    snapshot: SessionSnapshot


def fork_session_id(old: str, from_seq: int, nonce: str) -> str:
    """``r-`` + a UUID derived from the old run, the fork point and a nonce (one per request)."""
    material = b"\x00".join((old.encode(), str(from_seq).encode(), nonce.encode()))
    digest = hashlib.sha256(_FORK_DOMAIN + material).digest()
    return f"r-{uuid.UUID(bytes=digest[:16], version=5)}"


def fork(
    old: SessionSnapshot,
    records: Sequence[JournalRecord],
    results: Mapping[tuple[int, int], ResultEntry | None],
    *,
    from_seq: int,
    session_id: str,
    order: RepairOrder,
    now_ms: int,
) -> ForkPlan:
    """Plan a fork of ``old`` keeping its chain's records ``0..from_seq-1``.

    Refused when the prefix ends inside a call (an announce whose outcome lies at or after
    ``from_seq``: the fork could not know whether it happened), when it would keep the end
    record, or when a body it needs was erased."""
    if erased(old):
        raise RepairRefused(f"cannot fork run {old.session_id}: its bodies were erased")
    chain = sorted(records, key=lambda r: r.seq)
    if not chain or [r.seq for r in chain] != list(range(len(chain))):
        raise RepairRefused(f"run {old.session_id} has no contiguous chain to fork")
    last = len(chain) - (1 if chain[-1].kind in _END_KINDS else 0)
    if not 1 <= from_seq <= last:
        raise RepairRefused(f"--from-seq must be between 1 and {last} for run {old.session_id}")
    prefix = chain[:from_seq]
    _refuse_split_calls(prefix, old.session_id, from_seq)
    copied = _copied_bodies(old.session_id, prefix, results, session_id)
    resealed: list[JournalRecord] = []
    prev = ZERO_HASH
    for record in prefix:
        moved = seal(replace(record, session_id=session_id), prev)
        resealed.append(moved)
        prev = moved.hash
    era = prefix[-1].era
    link = seal(
        JournalRecord(
            session_id=session_id,
            seq=from_seq,
            era=era,
            kind=JournalKind.RUN_RESUMED,
            stamp_ms=now_ms,
            label=default_label(),
            attrs={
                **order.attrs(),
                "forked_from_run": old.session_id,
                "from_seq": str(from_seq),
                "parent_at": chain[from_seq - 1].hash,
                "parent_head": chain[-1].hash,
            },
            prev_hash=prev,
            hash=prev,
        ),
        prev,
    )
    snapshot = SessionSnapshot(
        session_id=session_id,
        capability=old.capability,
        status=RunStatus.RUNNING,
        era=era,
        next_seq=from_seq + 1,
        last_hash=link.hash,
        case_id=old.case_id,
        admission_key=old.admission_key,  # admission ignores updates naming another run
        tenant=old.tenant,
        initiator=old.initiator,
        input_json=old.input_json,
        started_ms=now_ms,
        updated_ms=now_ms,
        era_started_ms=now_ms,
        delegation_json=old.delegation_json,  # a fork stays bounded as its original was
        # ...and its input carries what the original's did (a successor's predecessor reads).
        parts={k: v for k, v in old.parts.items() if k == INPUT_LABEL},
    )
    return ForkPlan(session_id, (*resealed, link), tuple(copied), snapshot)


def _copied_bodies(
    run_id: str,
    prefix: Sequence[JournalRecord],
    results: Mapping[tuple[int, int], ResultEntry | None],
    session_id: str,
) -> list[ResultEntry]:
    """The bodies the prefix's records commit to, moved to the fork's session."""
    copied: list[ResultEntry] = []
    keys = {(r.era, r.call_seq) for r in prefix if r.body_digest is not None}
    for era, call_seq in sorted((e, c) for e, c in keys if c is not None):
        entry = results.get((era, call_seq))
        if entry is None:
            raise RepairRefused(
                f"cannot fork run {run_id}: the body of {era}/{call_seq} is erased or missing"
            )
        copied.append(replace(entry, session_id=session_id))
    return copied


_END_KINDS = frozenset(
    {JournalKind.RUN_COMPLETED, JournalKind.RUN_FAILED, JournalKind.RUN_QUARANTINED}
)


def _refuse_split_calls(prefix: Sequence[JournalRecord], run_id: str, from_seq: int) -> None:
    announced = {(r.era, r.call_seq) for r in prefix if r.kind is JournalKind.EFFECT_ANNOUNCED}
    recorded = {(r.era, r.call_seq) for r in prefix if r.kind is JournalKind.EFFECT_RECORDED}
    open_calls = sorted(k for k in announced - recorded if k[1] is not None)
    if open_calls:
        era, call = open_calls[0]
        raise RepairRefused(
            f"cannot fork run {run_id} at seq {from_seq}: call {era}/{call} was announced "
            "before it and has no outcome in the prefix (fork before its announce or after its outcome)"
        )
