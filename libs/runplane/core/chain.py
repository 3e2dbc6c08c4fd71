"""The journal chain: sealing records, witnesses, body digests, and the checks of one record.

Every function here is pure and is *the* implementation of its rule: admission (seq 0), the
executor, the sweeper (sealed sweep runs) and the journal service (verification) all call
these, so the bytes hashed are the same everywhere. The encoding is ``canonical.py``'s.

- ``request_witness(request)`` = hex SHA-256(canonical(request)), over the *decoded* request
  body, so two encodings of one request have one witness.
- ``body_digest(ok, value, error)`` = hex SHA-256(canonical({"error": …, "ok": …,
  "value": …})) where ``error`` is ``{"message", "retryable", "type"}`` or null. It is what a
  ResultEntry's ``body_digest`` and its recording JournalRecord's ``body_digest`` carry.
- A record's canonical form is ``runplane.wire.to_dict(record)`` (enums as symbols, nulls
  kept) with the ``hash`` key removed; ``hash`` = hex SHA-256(bytes.fromhex(prev_hash) ||
  canonical bytes). Seq 0's ``prev_hash`` is 64 zeros.

Which record carries a body digest: exactly the one that *records* a call's result (kinds
EFFECT_RECORDED, SIGNAL_RECEIVED, TASK_DECIDED, CASE_WRITTEN, DEADLINE_REGISTERED,
CHECKPOINT_REPORTED with a ``call_seq``); its ResultEntry is keyed (era, call_seq). The
chain verifier (``runplane.core.verify``, built on ``check_link`` and ``check_entry`` here)
checks those against the result journal when one is given. A ResultEntry that was
erased on purpose (a tombstone: the value ``None`` in the mapping) is not a break — erasing a
body must not break the chain.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runplane.core.canonical import canonical_bytes, encode_str, format_float, sha256_hex
from runplane.core.keys import parent_of
from runplane.wire import (
    ZERO_HASH,
    Cost,
    ErrorInfo,
    JournalKind,
    JournalRecord,
    Label,
    ResultEntry,
    Sensitivity,
    StartRun,
    TenantId,
    Trust,
    canonical_encoder,
)

__all__ = [
    "INPUT_LABEL",
    "TERMINAL_KINDS",
    "ChainCheck",
    "ChainFault",
    "Draft",
    "SlotState",
    "SlotStates",
    "body_digest",
    "check_entry",
    "check_link",
    "check_signed",
    "entry_body_digest",
    "fault_seq",
    "record_canonical_bytes",
    "record_hash",
    "request_witness",
    "run_admitted",
    "run_start",
    "seal",
]

_HASH_PLACEHOLDER = ZERO_HASH

# Where a run's input label, when its input carries more than an admission input (a
# successor's), is written: seq 0's attr and the snapshot's part of that name.
INPUT_LABEL = "input_label"


def request_witness(request: Any) -> str:
    """Hex SHA-256 of the canonical encoding of a decoded request body."""
    return sha256_hex(canonical_bytes(request))


def _error_body(error: ErrorInfo | None) -> dict[str, Any] | None:
    if error is None:
        return None
    return {"message": error.message, "retryable": error.retryable, "type": error.type}


def body_digest(ok: bool, value: Any, error: ErrorInfo | None) -> str:
    """Hex SHA-256 of the canonical result body ``{"error", "ok", "value"}``."""
    body = {"error": _error_body(error), "ok": ok, "value": value if ok else None}
    return sha256_hex(canonical_bytes(body))


def entry_body_digest(entry: ResultEntry) -> str:
    """Recompute a ResultEntry's body digest from its body (not from its digest field)."""
    value = json.loads(entry.value_json) if entry.ok and entry.value_json is not None else None
    return body_digest(entry.ok, value, entry.error)


def record_hash(record: JournalRecord) -> str:
    """The hash ``record`` must carry, given its own ``prev_hash``."""
    return sha256_hex(bytes.fromhex(record.prev_hash) + record_canonical_bytes(record))


_NOT_HASHED = frozenset({"hash"})


def record_canonical_bytes(record: JournalRecord) -> bytes:
    """``canonical_bytes(to_dict(record))`` without the ``hash`` key: what a record's hash covers.

    Computed by an encoder compiled from the schema with canonical.py's own leaf encoders
    (see ``runplane.wire.canonical_encoder``), which writes the same text without building the
    dict; ``tests/unit/test_canonical_fast.py`` holds it to the reference on random records.
    """
    encoder = _HASH_ENCODERS.get(type(record))
    if encoder is None:
        encoder = canonical_encoder(
            type(record), encode_str=encode_str, encode_float=format_float, exclude=_NOT_HASHED
        )
        _HASH_ENCODERS[type(record)] = encoder
    # "strict" UTF-8: a lone surrogate is refused here, as canonical_bytes refuses it.
    return encoder(record).encode("utf-8")


_HASH_ENCODERS: dict[type[JournalRecord], Callable[[JournalRecord], str]] = {}


def default_label(provenance: Iterable[str] = ()) -> Label:
    """Trusted, internal, with the given origins (sorted, unique as the wire requires)."""
    return _default_label(tuple(sorted(set(provenance))))


@functools.lru_cache(maxsize=1024)
def _default_label(provenance: tuple[str, ...]) -> Label:
    # Every record the engine writes without a label of its own gets this one, built and
    # validated once per distinct provenance; a Label is immutable, so sharing it is safe.
    return Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=provenance)


@dataclass(frozen=True)
class Draft:
    """A journal record before it is linked and hashed (``seal`` adds prev_hash and hash)."""

    session_id: str
    seq: int
    era: int
    kind: JournalKind
    stamp_ms: int
    call_seq: int | None = None
    family: str | None = None
    name: str | None = None
    request_witness: str | None = None
    body_digest: str | None = None
    label: Label = field(default_factory=default_label)
    cost: Cost | None = None
    attrs: Mapping[str, str] = field(default_factory=dict)


def seal(draft: Draft | JournalRecord, prev_hash: str) -> JournalRecord:
    """Link ``draft`` to ``prev_hash`` and compute its hash.

    A JournalRecord passed in is re-sealed (its prev_hash and hash are replaced), which is
    how a test forges a *validly hashed* record to prove the verifier checks links too.
    """
    record = JournalRecord(
        session_id=draft.session_id,
        seq=draft.seq,
        era=draft.era,
        kind=draft.kind,
        call_seq=draft.call_seq,
        family=draft.family,
        name=draft.name,
        request_witness=draft.request_witness,
        body_digest=draft.body_digest,
        stamp_ms=draft.stamp_ms,
        label=draft.label,
        cost=draft.cost,
        attrs=dict(draft.attrs),
        prev_hash=prev_hash,
        hash=_HASH_PLACEHOLDER,
    )
    # Every field was validated above, the hash with a placeholder (the hash never covers
    # itself). The real hash is a SHA-256 hexdigest, which the hash rule (64 lowercase hex)
    # accepts by construction, so it is set in place instead of validating the whole record
    # a second time; the record has not been shared yet, so nothing sees it change.
    object.__setattr__(record, "hash", record_hash(record))
    return record


def run_admitted(
    session_id: str,
    *,
    capability: str,
    admission_key: str,
    tenant: str,
    initiator: str,
    input_json: str,
    now_ms: int,
    case_id: str | None = None,
    attrs: Mapping[str, str] | None = None,
) -> JournalRecord:
    """Seq 0 of a run's chain, written by admission (or by the sweeper for a sweep run).

    Its ``request_witness`` is the witness of the decoded input, so the chain commits to what
    the run was asked to do without carrying the input itself.
    """
    facts = {
        "capability": capability,
        "admission_key": admission_key,
        "tenant": tenant,
        "initiator": initiator,
    }
    if case_id is not None:
        facts["case_id"] = case_id
    facts.update(attrs or {})
    draft = Draft(
        session_id=session_id,
        seq=0,
        era=0,
        kind=JournalKind.RUN_ADMITTED,
        stamp_ms=now_ms,
        request_witness=request_witness(json.loads(input_json)),
        label=default_label([f"agent/{capability}"]),
        attrs=facts,
    )
    return seal(draft, ZERO_HASH)


def _lineage(admission_key: str) -> dict[str, str] | None:
    """A commissioned child's seq 0 names its parent (``parent_run``) and the parent's call
    that started it (``parent_call``, ``era/call_seq``); nothing for any other run."""
    parent = parent_of(admission_key)
    return None if parent is None else {"parent_run": parent[0], "parent_call": parent[1]}


def run_start(
    session_id: str,
    *,
    capability: str,
    admission_key: str,
    tenant: str,
    initiator: str,
    input_json: str,
    now_ms: int,
    case_id: str | None = None,
    attrs: Mapping[str, str] | None = None,
    agent_version: str | None = None,
    delegation_json: str | None = None,
    input_label_json: str | None = None,
) -> tuple[JournalRecord, StartRun]:
    """Seq 0 of a new run and the StartRun that hands its hash to the executor.

    What admission writes for a run it admits, and what a harness, a test driver or a
    benchmark writes for a run it starts without admission: one function, so the StartRun
    always states the facts seq 0 commits to (the executor links seq 1 to ``admitted_hash``).
    ``delegation_json``: the Delegation a commissioned child runs under — in seq 0's attrs
    (``delegation``, so the chain commits to it) and the StartRun. ``tenant`` is validated
    here (``TenantId``), before seq 0 names it. ``input_label_json``: what a successor's input
    carries from its predecessor (a Label) — in seq 0's attrs (``input_label``) and the
    StartRun.
    """
    tenant = TenantId(tenant)
    if delegation_json is not None:
        attrs = {**(attrs or {}), "delegation": delegation_json}
    if input_label_json is not None:
        attrs = {**(attrs or {}), INPUT_LABEL: input_label_json}
    admitted = run_admitted(
        session_id,
        capability=capability,
        admission_key=admission_key,
        tenant=tenant,
        initiator=initiator,
        input_json=input_json,
        now_ms=now_ms,
        case_id=case_id,
        # The pin only when pinned, the parent only for a child: other runs' seq 0 is unchanged.
        attrs=({**(_lineage(admission_key) or {}), **(attrs or {})} or None)
        if agent_version is None
        else {**(_lineage(admission_key) or {}), **(attrs or {}), "agent_version": agent_version},
    )
    start = StartRun(
        session_id=session_id,
        capability=capability,
        input_json=input_json,
        case_id=case_id,
        admission_key=admission_key,
        tenant=tenant,
        initiator=initiator,
        admitted_hash=admitted.hash,
        admitted_ms=now_ms,
        agent_version=agent_version,
        delegation_json=delegation_json,
        input_label_json=input_label_json,
    )
    return admitted, start


class ChainFault(enum.StrEnum):
    """Why a chain does not verify (the first fault found wins)."""

    EMPTY = "empty"
    WRONG_SESSION = "wrong_session"
    GAP = "gap"  # a seq is missing (dropped record)
    REORDER = "reorder"  # a seq arrives lower than expected (reordered or duplicated)
    BAD_LINK = "bad_link"  # prev_hash is not the previous record's hash
    BAD_HASH = "bad_hash"  # the record's content does not hash to its hash (tampered)
    BODY_DIGEST_MISMATCH = "body_digest_mismatch"  # results body does not match the chain
    BODY_MISSING = "body_missing"  # the chain names a body the result journal lacks
    AFTER_END = "after_end"  # a record after the run's terminal record (nothing may follow it)
    BAD_SIGNATURE = "bad_signature"  # not signed by a chain writer's key (runplane.signing.journal)
    DUPLICATE_SLOT = "duplicate_slot"  # a second announce or record for one (era, call_seq)


# The records that end a run. The engine writes nothing after one (an event for an ended run
# is rejected, not journaled), so any record that follows one — however well chained — was
# written by someone other than the run's writer: a break, not an extension.
TERMINAL_KINDS = frozenset(
    {
        JournalKind.RUN_COMPLETED,
        JournalKind.RUN_FAILED,
        JournalKind.RUN_QUARANTINED,
        JournalKind.RUN_CANCELLED,
    }
)


# The ends an operator may resume from (``runplane.core.repair``); a completed run stays closed.
RESUMABLE_KINDS = frozenset({JournalKind.RUN_FAILED, JournalKind.RUN_QUARANTINED})


def reopens(record: JournalRecord) -> bool:
    """An operator's resume (``runplane.core.repair``): the one record that may follow an end
    record, and only a RUN_FAILED or RUN_QUARANTINED one (``check_link``'s ``resumable``) —
    RUN_RESUMED with ``repair=resume``, naming who resumed the run."""
    return record.kind is JournalKind.RUN_RESUMED and record.attrs.get("repair") == "resume"


def erases(record: JournalRecord) -> bool:
    """An operator's erase (``runplane.core.repair``), or retention's: RUN_ERASED, the one
    record that may follow any end record (``check_link``'s ``erasable``) — once, and nothing
    follows it. It says that the run's bodies were tombstoned, by whom and how many, so the
    erasure reaches ``audit`` and every reader of the chain; it takes no body itself."""
    return record.kind is JournalKind.RUN_ERASED


@dataclass(frozen=True)
class ChainCheck:
    """The outcome of verifying a chain. ``bad_seq`` is the position the fault was found at
    (for a gap or a reorder: the seq that was expected there)."""

    ok: bool
    checked: int
    bad_seq: int | None = None
    fault: ChainFault | None = None
    detail: str = ""

    def __str__(self) -> str:
        if self.ok:
            return f"verified {self.checked} records"
        return f"broken at seq {self.bad_seq}: {self.fault} — {self.detail}"


def check_link(
    record: JournalRecord,
    expected_seq: int,
    expected_prev: str,
    *,
    ended: bool = False,
    resumable: bool = False,
    erasable: bool = False,
) -> tuple[ChainFault, str] | None:
    """Position, link and hash of ``record`` where its chain stands: ``expected_seq`` next,
    linking to ``expected_prev``; ``ended`` when the chain's last record is terminal. For
    consumers that keep only that much of a chain (the journal service keeps a session's next
    seq, last hash and whether it ended, restored from ``audit``).

    An ended chain takes no record at all, checked first (except an operator's resume right
    after a failed or quarantined end, ``resumable``: see ``reopens``; and the erasure of an
    ended run's bodies, ``erasable`` — ended, not erased yet: see ``erases``): a correct link
    after the end is still a break (it extends a closed chain), and a re-sent old record after
    the end is the same fault at the same position, so every reader names one fault for one
    forgery."""
    if ended and not (resumable and reopens(record)) and not (erasable and erases(record)):
        return (
            ChainFault.AFTER_END,
            f"seq {record.seq} ({record.kind}) after the run ended at seq {expected_seq - 1}",
        )
    if record.seq > expected_seq:
        return ChainFault.GAP, f"expected seq {expected_seq}, got {record.seq}"
    if record.seq < expected_seq:
        return ChainFault.REORDER, f"expected seq {expected_seq}, got {record.seq}"
    if record.prev_hash != expected_prev:
        return (
            ChainFault.BAD_LINK,
            f"prev_hash {record.prev_hash[:12]}… does not match {expected_prev[:12]}…",
        )
    actual = record_hash(record)
    if actual != record.hash:
        return (
            ChainFault.BAD_HASH,
            f"content hashes to {actual[:12]}…, record says {record.hash[:12]}…",
        )
    return None


def fault_seq(fault: ChainFault, expected_seq: int, record: JournalRecord) -> int:
    """The position a fault is reported at: for a gap, a reorder or a record after the end the
    seq that was expected there (the record found is not where it should be), otherwise the
    record's own seq."""
    return expected_seq if fault in _POSITIONAL else record.seq


# Faults found at a position rather than in a record: the seq expected there is reported.
_POSITIONAL = frozenset({ChainFault.GAP, ChainFault.REORDER, ChainFault.AFTER_END})


def check_entry(record: JournalRecord, entry: ResultEntry) -> tuple[ChainFault, str] | None:
    """A present ResultEntry against the chain record that recorded it (one with a
    ``body_digest``): its body, and every other field replay trusts. Whether an absent or
    erased body is a fault is the caller's rule (here BODY_MISSING / not one; the journal
    service reports both as a BODY_MISSING verdict)."""
    if entry.body_digest != record.body_digest:
        return (
            ChainFault.BODY_DIGEST_MISMATCH,
            "result entry's body_digest differs from the chain's",
        )
    if entry_body_digest(entry) != record.body_digest:
        return ChainFault.BODY_DIGEST_MISMATCH, "result entry's body does not hash to its digest"
    # Not only the body: replay trusts the entry's other fields too (its stamp becomes
    # ctx.now(), its witness is what a re-issued call is compared with), so each must be the
    # one the chain committed to. Optional fields are compared where the record states them.
    stated = {
        "family": record.family,
        "name": record.name,
        "request_witness": record.request_witness,
    }
    for name, expected in stated.items():
        if expected is not None and getattr(entry, name) != expected:
            return (
                ChainFault.BODY_DIGEST_MISMATCH,
                f"result entry's {name} differs from the chain's",
            )
    if entry.stamp_ms != record.stamp_ms:
        return ChainFault.BODY_DIGEST_MISMATCH, "result entry's stamp_ms differs from the chain's"
    if entry.label != record.label:
        return ChainFault.BODY_DIGEST_MISMATCH, "result entry's label differs from the chain's"
    return None


def check_signed(record: JournalRecord, problem: str | None) -> tuple[ChainFault, str] | None:
    """The record's writer signature, as a reader found it (``runplane.signing.journal``: None = signed
    by a key of the keyring). Checked after position, link and hash, so an edited record is
    still ``bad_hash`` and only a well-formed record by a foreign writer is ``bad_signature``."""
    if problem is None:
        return None
    return ChainFault.BAD_SIGNATURE, f"seq {record.seq}: {problem}"


# -- one start per slot ------------------------------------------------------------------------


class SlotState(enum.Enum):
    """Where the chain has taken one slot (era, call_seq): see ``SlotStates``."""

    ANNOUNCED = "announced"  # its call announced, no outcome yet
    DOUBTED = "doubted"  # announced, then found in doubt (EFFECT_IN_DOUBT): it may start again
    RECORDED = "recorded"  # its result recorded (the record with its body digest): closed


def _slot_event(record: JournalRecord) -> SlotState | None:
    """What ``record`` does to its slot: announce it, put it in doubt, record it, or nothing.

    The announce is the slot's own call's (a probe of a call in doubt is announced at the
    call's slot too, family ``probe``: it checks the call, it does not start it again); the
    record is the one that carries the body digest (an operator's or a seat's TASK_DECIDED,
    an escalation, a probe's answer carry none: the slot's result comes once, after them)."""
    if record.kind is JournalKind.EFFECT_ANNOUNCED:
        return None if record.family == "probe" else SlotState.ANNOUNCED
    if record.kind is JournalKind.EFFECT_IN_DOUBT:
        return SlotState.DOUBTED
    if record.body_digest is not None:
        return SlotState.RECORDED
    return None


# The attrs by which an announce names the key its peer deduplicates it under: a child run's
# admission key (admission starts one run per key) and a case command's request id.
_DEDUP_ATTRS = ("child_key", "request_id")

Repeat = tuple[str | None, str | None, str | None, str | None]


def _repeat(record: JournalRecord) -> Repeat | None:
    """What makes announcing ``record``'s call again harmless, or None: it is declared
    non-mutating (``mutating=false``: a fan-out branch re-dispatched after a crash is
    performed again, by design), or its peer deduplicates it (a commission's ``child_key``, a
    case command's ``request_id``: the child is admitted once, the command applied once). A
    repeat must be the same call: family, name, witness and that key all equal."""
    key = next((record.attrs[a] for a in _DEDUP_ATTRS if a in record.attrs), None)
    if key is None and record.attrs.get("mutating") != "false":
        return None
    return (record.family, record.name, record.request_witness, key)


@dataclass(frozen=True, slots=True)
class SlotStates:
    """What a chain has said about its slots so far: the rule "one start per slot".

    A slot is recorded at most once (the record with its body digest; ``results`` is
    compacted on the slot, so a second record could keep only one body) and its call is
    started at most once: a second announce while the first has no outcome, any announce
    after the record, or a second record is ``duplicate_slot``. Two second starts are the
    protocol's own: a call found in doubt (EFFECT_IN_DOUBT at its slot, a crash between
    announce and outcome) whose recovery announces it again (an operator's RETRY), and the
    same call announced again when repeating it is harmless by its announce (``_repeat``:
    non-mutating, or deduplicated by its peer — a fan-out re-dispatched after a crash).

    Kept small for a fold that copies it at every record: ``floors[era]`` is the first
    call_seq of the era not yet recorded (every slot below it is recorded), ``open`` holds
    the slots at or above it the chain has named — in practice the calls in flight — with
    what a harmless repeat of its announce must equal."""

    floors: Mapping[int, int] = field(default_factory=dict)
    open: Mapping[tuple[int, int], tuple[SlotState, Repeat | None]] = field(default_factory=dict)

    def state(self, era: int, call_seq: int) -> SlotState | None:
        """The slot's state; None: the chain has not named it yet."""
        if call_seq < self.floors.get(era, 0):
            return SlotState.RECORDED
        held = self.open.get((era, call_seq))
        return None if held is None else held[0]

    def check(self, record: JournalRecord) -> tuple[ChainFault, str] | None:
        """``duplicate_slot`` when ``record`` starts or records its slot a second time."""
        if record.call_seq is None:
            return None
        event = _slot_event(record)
        if event is None or event is SlotState.DOUBTED:
            return None
        era, call_seq = record.era, record.call_seq
        now = self.state(era, call_seq)
        call = f"call {era}/{call_seq}"
        if now is SlotState.RECORDED:
            what = "an announce" if event is SlotState.ANNOUNCED else "a record"
            return (
                ChainFault.DUPLICATE_SLOT,
                f"seq {record.seq}: {what} of {call}, already recorded",
            )
        if now is SlotState.ANNOUNCED and event is SlotState.ANNOUNCED:
            first = self.open[(era, call_seq)][1]
            if first is None or _repeat(record) != first:
                return (
                    ChainFault.DUPLICATE_SLOT,
                    f"seq {record.seq}: a second announce of {call}, not in doubt",
                )
        return None

    def after(self, record: JournalRecord) -> SlotStates:
        """The states once ``record`` is on the chain (``self`` when it names no slot)."""
        if record.call_seq is None:
            return self
        event = _slot_event(record)
        if event is None:
            return self
        era, call_seq = record.era, record.call_seq
        now = self.state(era, call_seq)
        if now is SlotState.RECORDED or now is event:
            return self  # nothing undoes a record; a repeat changes nothing (or was a fault)
        floor = self.floors.get(era, 0)
        open_ = dict(self.open)
        open_[(era, call_seq)] = (event, _repeat(record) if event is SlotState.ANNOUNCED else None)
        if event is not SlotState.RECORDED or call_seq != floor:
            return SlotStates(self.floors, open_)
        while (held := open_.get((era, floor))) is not None and held[0] is SlotState.RECORDED:
            del open_[(era, floor)]
            floor += 1
        return SlotStates({**self.floors, era: floor}, open_)


NO_SLOTS = SlotStates()
