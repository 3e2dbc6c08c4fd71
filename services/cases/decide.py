"""The cases service's functional core: ``decide(case, command, now_ms)``. Pure, no I/O.

A case is one ``CaseRecord`` (compacted topic ``cases``, key ``case_id``). Every command on
``cases.commands`` is folded into it here; the service shell only moves records.

Rules, each the answer a run (or the sweeper) gets back:

- **Creation.** A case that does not exist yet is created by its first command: version 0,
  state ``{}``, no obligations.
- **Versions** count *state* writes only. ``PutCaseState`` is accepted when
  ``expected_version`` equals the current version (the version becomes +1); otherwise it is
  refused with the current version and state, so the caller can retry from them. Obligation
  changes do not move the version: registering a deadline must not make the same run's next
  ``put_case_state`` look stale.
- **Idempotency by request id.** Every non-read command's answer is remembered in
  ``CaseRecord.applied`` (a bounded window of JSON entries ``[request_id, op, accepted,
  version, reason]``). A re-delivered command (same request id) gets the same accepted flag,
  reason and version, and changes nothing. A re-sent ``GetCaseState`` simply reads again:
  the run journals the first answer it receives, so a second read cannot diverge a replay.
- **Obligations.** ``RegisterDeadline`` adds an OPEN obligation (a terminal one of the same
  name is replaced; an open one with the same due instant is accepted as already registered;
  a different open one is refused). ``MeetDeadline`` / ``CancelDeadline`` discharge an
  OPEN/WARNED one; repeating them is accepted with "already met"/"already cancelled" and no
  change; meeting a breached or cancelled one is refused. ``WarnDeadline`` moves OPEN →
  WARNED; ``BreachDeadline`` moves OPEN/WARNED → BREACHED and records the sweep run. Both
  name the due instant they were decided for; a stale one (the obligation was re-registered
  with another due) is refused. Only the first BreachDeadline of an obligation is a
  ``transition``: that is what seals the sweep run and starts the follow-up run.
- **Tenant.** A case belongs to one tenant (admission binds case ids to tenants). The first
  ``RegisterDeadline`` naming a tenant records it in the case's ``correlation_keys`` under the
  reserved ``runplane.tenant``; a deadline from another tenant is refused. The breach
  follow-up run is admitted for that tenant (:mod:`services.cases.breach`).
- **Closing** is refused while any obligation is OPEN or WARNED; a closed case refuses state
  writes and new deadlines, and still answers reads.
- **Bad input** (state that is not a JSON object, an empty name, warn after due, a rule that
  is not a JSON object) is refused with the reason; nothing here raises on a command.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Final

from runplane.core.keys import TENANT_KEY
from runplane.wire import (
    BreachDeadline,
    CancelDeadline,
    CaseRecord,
    CaseReply,
    CloseCase,
    GetCaseState,
    MeetDeadline,
    Obligation,
    ObligationStatus,
    PutCaseState,
    RegisterDeadline,
    WarnDeadline,
)

__all__ = [
    "APPLIED_WINDOW",
    "OPEN_STATUSES",
    "CaseCommand",
    "Decision",
    "decide",
    "evaluate",
    "op_of",
    "tenant_of",
]

CaseCommand = (
    GetCaseState
    | PutCaseState
    | RegisterDeadline
    | MeetDeadline
    | CancelDeadline
    | WarnDeadline
    | BreachDeadline
    | CloseCase
)

# How many answers a case remembers for idempotency. A sender re-sends after a crash within
# seconds; 256 later mutations of the same case in between would be an unusually hot case.
APPLIED_WINDOW: Final = 256
OPEN_STATUSES: Final = frozenset({ObligationStatus.OPEN, ObligationStatus.WARNED})
EMPTY_STATE: Final = "{}"

_OPS: Final[dict[type[Any], str]] = {
    GetCaseState: "get_state",
    PutCaseState: "put_state",
    RegisterDeadline: "register_deadline",
    MeetDeadline: "meet_deadline",
    CancelDeadline: "cancel_deadline",
    WarnDeadline: "warn_deadline",
    BreachDeadline: "breach_deadline",
    CloseCase: "close",
}


def op_of(command: CaseCommand) -> str:
    """The ``op`` name a reply and the metrics use for ``command``."""
    return _OPS[type(command)]


@dataclass(frozen=True)
class Decision:
    """What one command did.

    ``case`` is the record to write, or None when nothing changed. ``reply`` is the answer
    (sent only when the command has ``reply_to``). ``outcome`` is ``accepted``, ``refused`` or
    ``duplicate`` (for metrics). ``transition`` names the obligation change this command made
    (``registered``, ``met``, ``cancelled``, ``warned``, ``breached``, ``closed``) or None, and
    ``obligation`` is the obligation after it.
    """

    case: CaseRecord | None
    reply: CaseReply
    outcome: str
    transition: str | None = None
    obligation: Obligation | None = None


def decide(
    case: CaseRecord | None, command: CaseCommand, now_ms: int
) -> tuple[CaseRecord | None, list[CaseReply]]:
    """Fold ``command`` into ``case``: (the case afterwards, the replies to send).

    The returned case is the input object itself when nothing changed.
    """
    d = evaluate(case, command, now_ms)
    new = case if d.case is None else d.case
    replies = [d.reply] if command.reply_to is not None else []
    return new, replies


def evaluate(case: CaseRecord | None, command: CaseCommand, now_ms: int) -> Decision:
    """Like :func:`decide`, with the outcome and the obligation transition spelled out."""
    current = case if case is not None else _new_case(command.case_id, now_ms)
    created = case is None
    if not isinstance(command, GetCaseState):
        seen = _recall(current, command.request_id)
        if seen is not None:
            return _duplicate(current, command, seen, created)
    step = _STEPS[type(command)](current, command, now_ms)
    if isinstance(command, GetCaseState):
        return Decision(current if created else None, step.reply, "accepted")
    written = _remember(step.case or current, command, step.reply, now_ms)
    return Decision(
        written,
        step.reply,
        "accepted" if step.reply.accepted else "refused",
        step.transition,
        step.obligation,
    )


# --- the steps, one per command type -----------------------------------------------------


@dataclass(frozen=True)
class _Step:
    case: CaseRecord | None  # None: state unchanged (the answer is still remembered)
    reply: CaseReply
    transition: str | None = None
    obligation: Obligation | None = None


def _get(case: CaseRecord, cmd: GetCaseState, now_ms: int) -> _Step:
    return _Step(None, _reply(case, cmd, True, state=case.state_json))


def _put(case: CaseRecord, cmd: PutCaseState, now_ms: int) -> _Step:
    if case.closed:
        return _refuse(case, cmd, "case is closed")
    if cmd.expected_version != case.version:
        return _refuse(
            case,
            cmd,
            f"version moved: expected {cmd.expected_version}, case is at {case.version}",
            state=case.state_json,
        )
    problem = _json_object_problem(cmd.state_json, "state_json")
    if problem:
        return _refuse(case, cmd, problem)
    new = replace(case, version=case.version + 1, state_json=cmd.state_json, updated_ms=now_ms)
    return _Step(new, _reply(new, cmd, True))


def tenant_of(case: CaseRecord) -> str | None:
    """The tenant the case belongs to, once a deadline has named it (None before)."""
    return case.correlation_keys.get(TENANT_KEY)


def _register(case: CaseRecord, cmd: RegisterDeadline, now_ms: int) -> _Step:
    problem = _deadline_problem(case, cmd) or _tenant_problem(case, cmd)
    if problem:
        return _refuse(case, cmd, problem)
    existing = _find(case, cmd.name)
    if existing is not None and existing.status in OPEN_STATUSES:
        if existing.due_ms == cmd.due_ms and existing.calendar_digest == cmd.calendar_digest:
            return _Step(None, _reply(case, cmd, True, reason="already registered"))
        return _refuse(
            case, cmd, f"obligation {cmd.name!r} is already open (due {existing.due_ms})"
        )
    if (
        existing is not None
        and existing.status == ObligationStatus.BREACHED
        and existing.due_ms == cmd.due_ms
    ):
        # Everything the sweeper sends for a breach is named from (case, name, due)
        # (runplane/core/keys.py): a new cycle at the same due instant would get the spent
        # breach request id (answered as a duplicate: the obligation stays open forever) and
        # the same sweep run id (a second chain under one session id: a broken audit). That
        # instant has been breached already; a new cycle needs a new due.
        return _refuse(
            case,
            cmd,
            f"obligation {cmd.name!r} was already breached at due {cmd.due_ms}"
            f" (sweep run {existing.sweep_run_id}); register it with another due",
        )
    ob = Obligation(
        name=cmd.name,
        due_ms=cmd.due_ms,
        warn_ms=cmd.warn_ms,
        calendar=cmd.calendar,
        calendar_digest=cmd.calendar_digest,
        rule_json=cmd.rule_json,
        on_breach=cmd.on_breach,
        status=ObligationStatus.OPEN,
        sweep_run_id=None,
        # A run's request id is ``session/era/call_seq``; fire-and-forget commands (the core
        # sends deadlines without reply_to) still name their session that way.
        registered_by=cmd.reply_to or cmd.request_id.split("/", 1)[0],
        updated_ms=now_ms,
        owner_role=cmd.owner_role,
    )
    if cmd.tenant is not None and tenant_of(case) is None:
        case = replace(case, correlation_keys={**case.correlation_keys, TENANT_KEY: cmd.tenant})
    return _with_obligation(case, cmd, ob, now_ms, "registered")


def _meet(case: CaseRecord, cmd: MeetDeadline, now_ms: int) -> _Step:
    return _discharge(case, cmd, now_ms, ObligationStatus.MET, "met")


def _cancel(case: CaseRecord, cmd: CancelDeadline, now_ms: int) -> _Step:
    return _discharge(case, cmd, now_ms, ObligationStatus.CANCELLED, "cancelled")


def _discharge(
    case: CaseRecord,
    cmd: MeetDeadline | CancelDeadline,
    now_ms: int,
    target: ObligationStatus,
    word: str,
) -> _Step:
    ob = _find(case, cmd.name)
    if ob is None:
        return _refuse(case, cmd, f"no obligation named {cmd.name!r}")
    if ob.status == target:
        return _Step(None, _reply(case, cmd, True, reason=f"already {word}"))
    if ob.status not in OPEN_STATUSES:
        return _refuse(case, cmd, f"obligation {cmd.name!r} is already {_word(ob.status)}")
    return _with_obligation(case, cmd, replace(ob, status=target, updated_ms=now_ms), now_ms, word)


def _warn(case: CaseRecord, cmd: WarnDeadline, now_ms: int) -> _Step:
    ob = _sweepable(case, cmd)
    if isinstance(ob, _Step):
        return ob
    if ob.status == ObligationStatus.WARNED:
        return _Step(None, _reply(case, cmd, True, reason="already warned"))
    if ob.status != ObligationStatus.OPEN:
        return _refuse(case, cmd, f"obligation {cmd.name!r} is already {_word(ob.status)}")
    warned = replace(ob, status=ObligationStatus.WARNED, updated_ms=now_ms)
    return _with_obligation(case, cmd, warned, now_ms, "warned")


def _breach(case: CaseRecord, cmd: BreachDeadline, now_ms: int) -> _Step:
    ob = _sweepable(case, cmd)
    if isinstance(ob, _Step):
        return ob
    if ob.status == ObligationStatus.BREACHED:
        # A second sweeper (or tick) decided the same breach: the first one stands.
        return _Step(None, _reply(case, cmd, True, reason="already breached"))
    if ob.status not in OPEN_STATUSES:
        return _refuse(case, cmd, f"obligation {cmd.name!r} is already {_word(ob.status)}")
    if not cmd.sweep_run_id:
        return _refuse(case, cmd, "sweep_run_id is empty")
    breached = replace(
        ob, status=ObligationStatus.BREACHED, sweep_run_id=cmd.sweep_run_id, updated_ms=now_ms
    )
    return _with_obligation(case, cmd, breached, now_ms, "breached")


def _close(case: CaseRecord, cmd: CloseCase, now_ms: int) -> _Step:
    if case.closed:
        return _Step(None, _reply(case, cmd, True, reason="already closed"))
    still_open = [ob.name for ob in case.obligations if ob.status in OPEN_STATUSES]
    if still_open:
        return _refuse(case, cmd, f"obligations still open: {', '.join(sorted(still_open))}")
    new = replace(case, closed=True, updated_ms=now_ms)
    return _Step(new, _reply(new, cmd, True), "closed")


_STEPS: Final[dict[type[Any], Any]] = {
    GetCaseState: _get,
    PutCaseState: _put,
    RegisterDeadline: _register,
    MeetDeadline: _meet,
    CancelDeadline: _cancel,
    WarnDeadline: _warn,
    BreachDeadline: _breach,
    CloseCase: _close,
}


# --- helpers -----------------------------------------------------------------------------


def _new_case(case_id: str, now_ms: int) -> CaseRecord:
    return CaseRecord(case_id=case_id, version=0, state_json=EMPTY_STATE, updated_ms=now_ms)


def _reply(
    case: CaseRecord,
    cmd: CaseCommand,
    accepted: bool,
    *,
    state: str | None = None,
    reason: str | None = None,
) -> CaseReply:
    return CaseReply(
        session_id=cmd.reply_to or "",
        request_id=cmd.request_id,
        case_id=case.case_id,
        era=cmd.era,
        call_seq=cmd.call_seq,
        op=op_of(cmd),
        accepted=accepted,
        state_json=state,
        version=case.version,
        reason=reason,
    )


def _refuse(case: CaseRecord, cmd: CaseCommand, reason: str, *, state: str | None = None) -> _Step:
    return _Step(None, _reply(case, cmd, False, state=state, reason=reason))


def _find(case: CaseRecord, name: str) -> Obligation | None:
    return next((ob for ob in case.obligations if ob.name == name), None)


def _with_obligation(
    case: CaseRecord, cmd: CaseCommand, ob: Obligation, now_ms: int, transition: str
) -> _Step:
    others = tuple(o for o in case.obligations if o.name != ob.name)
    # Keep obligations sorted by name so equal cases encode to equal bytes.
    obligations = tuple(sorted((*others, ob), key=lambda o: o.name))
    new = replace(case, obligations=obligations, updated_ms=now_ms)
    return _Step(new, _reply(new, cmd, True), transition, ob)


def _sweepable(case: CaseRecord, cmd: WarnDeadline | BreachDeadline) -> Obligation | _Step:
    """The obligation a sweeper decision is about, or the refusal step."""
    ob = _find(case, cmd.name)
    if ob is None:
        return _refuse(case, cmd, f"no obligation named {cmd.name!r}")
    if ob.due_ms != cmd.due_ms:
        # Decided for an earlier registration of this name; the current one has its own due.
        return _refuse(case, cmd, f"stale: obligation {cmd.name!r} is now due {ob.due_ms}")
    return ob


def _word(status: ObligationStatus) -> str:
    return status.value.lower()


def _json_object_problem(text: str, what: str) -> str | None:
    try:
        value = json.loads(text)
    except ValueError:
        return f"{what} is not JSON"
    return None if isinstance(value, dict) else f"{what} is not a JSON object"


def _deadline_problem(case: CaseRecord, cmd: RegisterDeadline) -> str | None:
    if case.closed:
        return "case is closed"
    if not cmd.name.strip():
        return "obligation name is empty"
    if not cmd.calendar:
        return "calendar is empty"
    if cmd.due_ms < 0:
        return "due_ms is negative"
    if cmd.warn_ms is not None and cmd.warn_ms > cmd.due_ms:
        return "warn_ms is after due_ms"
    if cmd.on_breach is not None and not cmd.on_breach.strip():
        return "on_breach is an empty capability name"
    return _json_object_problem(cmd.rule_json, "rule_json")


def _tenant_problem(case: CaseRecord, cmd: RegisterDeadline) -> str | None:
    if cmd.tenant is None:
        return None  # a writer older than the field: the case's tenant stays as it is
    # cmd.tenant is a TenantId: a command naming an invalid tenant never decodes (a dead
    # letter with the reason), so only ownership is left to judge here.
    owner = tenant_of(case)
    if owner is not None and owner != cmd.tenant:
        # Not the owner's name in the reason: the asking run learns nothing about the case.
        return f"the case does not belong to tenant {cmd.tenant!r}"
    return None


# --- the idempotency window --------------------------------------------------------------


@dataclass(frozen=True)
class _Seen:
    op: str
    accepted: bool
    version: int
    reason: str | None


def _remember(case: CaseRecord, cmd: CaseCommand, reply: CaseReply, now_ms: int) -> CaseRecord:
    entry = json.dumps(
        [cmd.request_id, reply.op, reply.accepted, reply.version, reply.reason],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    applied = (*case.applied, entry)[-APPLIED_WINDOW:]
    return replace(case, applied=applied, updated_ms=now_ms)


def _recall(case: CaseRecord, request_id: str) -> _Seen | None:
    # Entries start with the JSON of their request id, so a prefix test finds the one entry
    # worth parsing without decoding the whole window on every command.
    prefix = "[" + json.dumps(request_id, ensure_ascii=False) + ","
    for entry in reversed(case.applied):
        if not entry.startswith(prefix):
            continue
        try:
            rid, op, accepted, version, reason = json.loads(entry)
        except (ValueError, TypeError):
            continue  # an entry another writer version wrote differently: not ours to judge
        if rid == request_id:
            return _Seen(str(op), bool(accepted), int(version), reason)
    return None


def _duplicate(case: CaseRecord, cmd: CaseCommand, seen: _Seen, created: bool) -> Decision:
    if seen.op != op_of(cmd):
        reply = _reply(case, cmd, False, reason=f"request id already used for {seen.op}")
        return Decision(case if created else None, reply, "refused")
    state = case.state_json if not seen.accepted and isinstance(cmd, PutCaseState) else None
    # A refused put is answered with the case as it is now: still refused, and the newest
    # version to retry from. Everything else repeats the remembered answer exactly.
    version = case.version if state is not None else seen.version
    reply = CaseReply(
        session_id=cmd.reply_to or "",
        request_id=cmd.request_id,
        case_id=case.case_id,
        era=cmd.era,
        call_seq=cmd.call_seq,
        op=seen.op,
        accepted=seen.accepted,
        state_json=state,
        version=version,
        reason=seen.reason,
    )
    return Decision(case if created else None, reply, "duplicate")
