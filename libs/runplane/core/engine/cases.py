"""Effect family: case commands and deadlines — requests to the cases service.

A case read or write, and a deadline's register / meet / cancel, are sent with ``reply_to`` =
the run and request id ``<session>/<era>/<call_seq>``; the run parks until the CaseReply,
which is journaled as the call's result. A deadline's due instant is resolved once, when it
is asked, and rides in the open request until the reply comes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from runplane.core.canonical import canonical_json
from runplane.core.effect import CaseConflict, CaseState, Effect, EffectError, Op
from runplane.core.engine.decode import error_info, serve
from runplane.core.engine.eras import note_early, set_open
from runplane.core.engine.state import Run
from runplane.core.engine.step import Command
from runplane.core.engine.values import OpenRequest, RequestKind
from runplane.core.engine.vocab import (
    SUSPEND,
    Rejected,
    Resolution,
    Slot,
    Throw,
    Wait,
    WaitKind,
)
from runplane.errors import CalendarError
from runplane.wire import (
    CancelDeadline,
    CaseReply,
    CloseCase,
    ErrorInfo,
    GetCaseState,
    JournalKind,
    MeetDeadline,
    ParkKind,
    PutCaseState,
    RegisterDeadline,
    ResultEntry,
    RunStatus,
)

__all__ = ["DECODE", "ask_case", "case_command", "deadline", "no_case", "on_case_reply"]

_WALL_UNITS_MS: Final = {"minutes": 60_000, "hours": 3_600_000, "days": 86_400_000}
# CaseReply.op → the engine op of the command that asked (for replies journaled early).
_CASE_OPS: Final = {
    "get_state": Op.CASE_GET,
    "put_state": Op.CASE_PUT,
    "register_deadline": Op.DEADLINE,
    "meet_deadline": Op.DEADLINE_MEET,
    "cancel_deadline": Op.DEADLINE_CANCEL,
    "close": Op.CASE_CLOSE,
}
_CaseCommand = (
    GetCaseState | PutCaseState | RegisterDeadline | MeetDeadline | CancelDeadline | CloseCase
)


def no_case(run: Run) -> Throw:
    return Throw(EffectError("NoCase", f"run {run.session_id} belongs to no case"))


def case_command(run: Run, slot: Slot) -> Resolution:
    """Read or write the run's case."""
    if run.case_id is None:
        return no_case(run)
    effect, call_seq, _ = slot
    request_id = f"{run.session_id}/{run.era}/{call_seq}"
    command: _CaseCommand
    if effect.op == Op.CASE_GET:
        command = GetCaseState(
            case_id=run.case_id,
            request_id=request_id,
            reply_to=run.session_id,
            era=run.era,
            call_seq=call_seq,
        )
    else:
        try:
            state_json = canonical_json(effect.request["state"])
        except (TypeError, ValueError) as exc:
            return Throw(EffectError("InvalidRequest", str(exc)))
        command = PutCaseState(
            case_id=run.case_id,
            request_id=request_id,
            reply_to=run.session_id,
            era=run.era,
            call_seq=call_seq,
            expected_version=int(effect.request["expected_version"]),
            state_json=state_json,
        )
    return ask_case(run, slot, command)


def ask_case(run: Run, slot: Slot, command: _CaseCommand, value: Any = None) -> Resolution:
    """Send a case command with ``reply_to`` = this session and park until its CaseReply
    (request id ``<session>/<era>/<call_seq>``); the reply is journaled as the result."""
    effect, call_seq, witness = slot
    routed: Command = command
    run.rec.out.commands.append(routed)
    run.rec.at(
        JournalKind.EFFECT_ANNOUNCED,
        slot,
        {"request_id": command.request_id, "case_id": command.case_id},
    )
    set_open(
        run,
        OpenRequest(
            RequestKind.CASE,
            command.request_id,
            run.era,
            call_seq,
            effect.family,
            effect.name,
            witness,
            value,
        ),
    )
    run.park(ParkKind.CASE_REPLY, command.request_id, call_seq, RunStatus.PARKED)
    run.waiting = Wait(WaitKind.CASE, slot, value=value)
    return SUSPEND


def deadline(run: Run, slot: Slot) -> Resolution:
    """Deadline commands ask and wait like the other case commands: a refusal (a closed
    case, no such obligation, one already open with another due) must reach the agent."""
    if run.case_id is None:
        return no_case(run)
    effect, call_seq, _ = slot
    req = effect.request
    request_id = f"{run.session_id}/{run.era}/{call_seq}"
    if effect.op != Op.DEADLINE:
        make = MeetDeadline if effect.op == Op.DEADLINE_MEET else CancelDeadline
        command = make(
            case_id=run.case_id,
            request_id=request_id,
            reply_to=run.session_id,
            era=run.era,
            call_seq=call_seq,
            name=str(req["name"]),
        )
        return ask_case(run, slot, command)
    try:
        due, digest = run.calendars_or_wall().resolve(
            str(req["calendar"]), req["rule"], run.clock_ms
        )
        warn = None if req["warn_before"] is None else due - _wall_duration_ms(req["warn_before"])
    except CalendarError as exc:
        entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, error=error_info(exc))
        return serve(run.rec, effect, entry)
    # Resolved once, here: the instant rides in the OpenRequest until the reply comes, so a
    # rebuilt run journals what was sent even if the calendar changed meanwhile.
    value = {
        "due_ms": due,
        "warn_ms": warn,
        "calendar": req["calendar"],
        "calendar_digest": digest,
    }
    register = RegisterDeadline(
        case_id=run.case_id,
        request_id=request_id,
        reply_to=run.session_id,
        era=run.era,
        call_seq=call_seq,
        name=str(req["name"]),
        due_ms=due,
        warn_ms=warn,
        calendar=str(req["calendar"]),
        calendar_digest=digest,
        rule_json=canonical_json(req["rule"]),
        on_breach=req["on_breach"],
        tenant=run.tenant,  # the follow-up on a breach runs for this tenant
        owner_role=req.get("owner_role"),
    )
    return ask_case(run, slot, register, value)


def on_case_reply(run: Run, reply: CaseReply) -> Resolution | Rejected:
    """A CaseReply on the inbox: the answer the run waits for, or an early one."""
    wait = run.waiting
    parked = run.parked
    if (
        wait is not None
        and wait.kind is WaitKind.CASE
        and parked is not None
        and parked.ref == reply.request_id
    ):
        run.waiting = None
        run.open = None
        run.unpark()
        entry = _record_reply(run, wait.slot, wait.value, reply)
        return serve(run.rec, wait.slot.effect, entry)
    carried = run.open
    if (
        carried is not None
        and carried.kind is RequestKind.CASE
        and carried.ref == reply.request_id
        and carried.era < run.era
    ):
        # Answered before the new era asked again: journal it at its own slot (as an early
        # approval decision is).
        op = _CASE_OPS.get(reply.op)
        if op is None:
            return Rejected(f"case reply op {reply.op!r} is not a run's case command")
        run.open = None
        slot = Slot(
            Effect(carried.family, carried.name, None, op), carried.call_seq, carried.witness
        )
        entry = _record_reply(run, slot, carried.value, reply, era=carried.era)
        note_early(run, carried, entry)
        return SUSPEND
    return Rejected(f"no case request {reply.request_id!r} outstanding for this run")


def _record_reply(
    run: Run, slot: Slot, value: Any, reply: CaseReply, *, era: int | None = None
) -> ResultEntry:
    """Journal a CaseReply as the result of the case command that asked for it."""
    attrs = {"request_id": reply.request_id, "case_id": reply.case_id}
    if era is not None:
        attrs["answers"] = f"{era}/{slot.call_seq}"
    op = slot.effect.op
    rec = run.rec
    if op == Op.CASE_PUT:
        recorded = {"accepted": reply.accepted, "version": reply.version, "reason": reply.reason}
        kind = JournalKind.CASE_WRITTEN if reply.accepted else JournalKind.EFFECT_RECORDED
        return rec.result(slot, kind, value=recorded, attrs=attrs, era=era)
    if not reply.accepted:
        error = ErrorInfo(type="CaseRefused", message=reply.reason or "refused", retryable=False)
        return rec.result(slot, JournalKind.EFFECT_RECORDED, error=error, attrs=attrs, era=era)
    if op == Op.CASE_GET:
        state = json.loads(reply.state_json) if reply.state_json else None
        got = {"state": state, "version": reply.version}
        return rec.result(slot, JournalKind.EFFECT_RECORDED, value=got, attrs=attrs, era=era)
    if op == Op.CASE_CLOSE:
        return rec.result(slot, JournalKind.EFFECT_RECORDED, attrs=attrs, era=era)
    attrs["deadline"] = slot.effect.name.removeprefix("deadline:")
    if op != Op.DEADLINE:  # meet / cancel
        return rec.result(slot, JournalKind.EFFECT_RECORDED, attrs=attrs, era=era)
    if not isinstance(value, Mapping) or "due_ms" not in value:
        # Only a snapshot written before deadlines waited for replies could lack it.
        error = ErrorInfo(
            type="DeadlineUnknown",
            message="the resolved due instant was not kept with the request",
            retryable=False,
        )
        return rec.result(slot, JournalKind.EFFECT_RECORDED, error=error, attrs=attrs, era=era)
    attrs.update(
        {"calendar": str(value["calendar"]), "calendar_digest": str(value["calendar_digest"])}
    )
    return rec.result(
        slot, JournalKind.DEADLINE_REGISTERED, value=dict(value), attrs=attrs, era=era
    )


def _wall_duration_ms(rule: Mapping[str, Any]) -> int:
    if len(rule) != 1:
        raise CalendarError(f"warn_before must be one of minutes/hours/days, got {dict(rule)!r}")
    ((unit, n),) = rule.items()
    if unit not in _WALL_UNITS_MS or not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise CalendarError(
            f"warn_before must be {{minutes|hours|days: n >= 0}}, got {dict(rule)!r}"
        )
    return int(n) * _WALL_UNITS_MS[unit]


def _decode_case_put(_effect: Effect, raw: Any) -> int:
    if not raw["accepted"]:
        raise CaseConflict(int(raw["version"]), str(raw.get("reason") or "the case moved"))
    return int(raw["version"])


# What each case op's recorded value decodes to for the agent (a close: the value as is).
DECODE: Final = {
    Op.CASE_GET: lambda _e, raw: CaseState(raw["state"], int(raw["version"])),
    Op.CASE_PUT: _decode_case_put,
    Op.DEADLINE: lambda _e, raw: int(raw["due_ms"]),
    Op.DEADLINE_MEET: lambda _e, raw: None,
    Op.DEADLINE_CANCEL: lambda _e, raw: None,
}
