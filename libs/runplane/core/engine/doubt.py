"""Effect family: calls in doubt — announced, with no outcome — and their recovery.

A call is in doubt when a restore finds it announced and not recorded (its owner died
mid-call), or when the executor cannot tell whether it took effect (no answer within its
timeout, a broken connection after sending, a 5xx). Either way its declared recovery decides:
``retry`` performs it again under the same key; ``reconcile`` asks the tool's probe whether
it happened; ``requires_operator`` (or a probe that cannot tell) opens an operator task and
parks until a verdict: APPROVED (it happened), RETRY (perform it again, announced first) or
ABANDON/REJECTED (record it failed).

A probe cannot see a request still in flight, so it never asks before the call's deadline
(``probe_at``): the journal's stamp of the announce plus the call's whole timeout budget
(``tools.deadline``), after which the executor sends no attempt of it. Until then the run
waits for that instant (``Run.wait_until``: RUN_PARKED ``parked_on: doubt`` with the instant),
and when it comes the probe asks (``deadline_passed``, this row's ``on_due``). What still reaches the peer
after that (a request the peer keeps working on after the client gave up) only the call's
idempotency key can deduplicate — which is why a reconciling mutation must carry one
(``runplane.providers._keyed``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from runplane.core.agents import EffectDecl, Recovery
from runplane.core.canonical import canonical_json
from runplane.core.chain import request_witness
from runplane.core.engine.asking import answer_task, ask_person
from runplane.core.engine.decode import serve
from runplane.core.engine.sinkgate import gate
from runplane.core.engine.state import Run
from runplane.core.engine.tools import deadline, decl_for, idempotency_key, request_live, waits_out
from runplane.core.engine.values import InFlight, LiveCall, Outcome
from runplane.core.engine.vocab import SUSPEND, Rejected, Resolution, Slot, Wait, WaitKind
from runplane.wire import (
    DecisionOutcome,
    ErrorInfo,
    ExpiryPolicy,
    JournalKind,
    ParkKind,
    RunStatus,
    TaskDecision,
    TaskKind,
)

__all__ = [
    "claims",
    "deadline_passed",
    "decide_operator",
    "in_doubt",
    "on_decision",
    "open_operator_task",
    "perform_again",
    "probe_at",
    "probe_done",
]

_VERDICTS = (
    DecisionOutcome.APPROVED,
    DecisionOutcome.RETRY,
    DecisionOutcome.ABANDON,
    DecisionOutcome.REJECTED,
)


def probe_at(flight: InFlight | None, decl: EffectDecl, now_ms: int) -> int | None:
    """When the probe of the call in doubt ``flight`` may ask, at ``now_ms``: None = now;
    else the instant to wait for — the call's deadline (``tools.deadline``) from the
    journal's stamp of its announce, while a request of it may still be on its way. A call
    whose doubt need not wait (not a reconciling mutation) or whose stamp is unknown (a
    snapshot older than the stamp) is probed at once."""
    if flight is None or not flight.announced_ms or not waits_out(decl):
        return None
    due = deadline(flight.announced_ms, decl)
    return due if now_ms < due else None


def in_doubt(run: Run, slot: Slot, recovery: Recovery) -> Resolution:
    """Journal that the call at ``slot`` is in doubt and run its declared recovery."""
    effect, call_seq, _ = slot
    decl = decl_for(run, effect)
    flight = run.in_flight
    waiting = run.waits_until(call_seq)
    if not waiting:  # a run rebuilt while it waits out the deadline journaled this already
        attrs = {"recovery": str(recovery)}
        if flight is not None and flight.origin != f"{run.era}/{call_seq}":
            attrs["origin"] = flight.origin  # carried from an earlier era's announce
        due = probe_at(flight, decl, run.now) if recovery is Recovery.RECONCILE else None
        if due is not None:
            attrs["probe_at"] = str(due)
        run.rec.at(JournalKind.EFFECT_IN_DOUBT, slot, attrs)
    if recovery is Recovery.RECONCILE and decl.probe:
        due = probe_at(flight, decl, run.now)
        if due is not None:
            if not waiting:
                run.wait_until(slot, due, "doubt")
            run.waiting = Wait(WaitKind.DOUBT, slot, decl)
            return SUSPEND
    if waiting:
        run.leave_wait()  # the deadline passed while the run was out of memory
    elif flight is not None and flight.announced_ms:
        # A checkpointed restore past the deadline an earlier era waited for: its timer
        # would only wake the run again for nothing.
        run.drop_instant(deadline(flight.announced_ms, decl))
    if recovery is Recovery.RETRY:
        # The announce is already durable; repeating is safe by declaration.
        return perform_again(run, slot, decl, announce_first=False)
    if recovery is Recovery.RECONCILE and decl.probe:
        return _probe(run, slot, decl)
    return open_operator_task(run, slot, decl)


def deadline_passed(run: Run, wait: Wait) -> Resolution:
    """The deadline of the call in doubt came (``Run.wait_until``'s instant): the probe asks."""
    decl = wait.decl or decl_for(run, wait.slot.effect)
    run.leave_wait()
    return _probe(run, wait.slot, decl)


def perform_again(run: Run, slot: Slot, decl: EffectDecl, *, announce_first: bool) -> Resolution:
    """Perform a call in doubt again (its recovery says so), through the sink gate again."""
    refused = _gate_again(run, slot, decl)
    if refused is not None:
        return refused
    _restamp(run, slot)
    return request_live(run, slot, decl, announce_first=announce_first)


def _restamp(run: Run, slot: Slot) -> None:
    """The call starts again now: a later doubt waits out its timeout from this step's stamp
    (the record that performs it again), not from the first announce's."""
    flight = run.in_flight
    if flight is not None and (flight.era, flight.call_seq) == (run.era, slot.call_seq):
        run.in_flight = replace(flight, announced_ms=run.now)


def _gate_again(run: Run, slot: Slot, decl: EffectDecl) -> Resolution | None:
    """The gate's decision on performing a call in doubt again (issue 13): the exact JSON is
    judged as on the first attempt, against the policy bound now, so a re-performed call is
    no bypass and its result is labelled by what it sent (``sinkgate.result_label``) even in
    a restored run that never saw the first attempt's gate state. The budget is not asked
    again: it admitted this call when it was first announced, and a repeat spends nothing new.
    A refusal records the call failed (``SinkRefused``) and ends the doubt: the platform will
    not perform it (the first attempt may still have taken effect, as with an ABANDON)."""
    refused = gate(run, slot, decl, recovering=True)
    if refused is not None:
        run.in_flight = None
    return refused


def _probe(run: Run, slot: Slot, decl: EffectDecl) -> Resolution:
    assert decl.probe is not None
    effect, call_seq, _ = slot
    # The probe is called like the tool it checks: same args, same idempotency key, so a
    # peer can look the call up by key (billing: GET /charges/{idempotency_key}).
    key = idempotency_key(run, effect, call_seq, decl)
    request = {
        "tool": decl.probe,
        "args": effect.request.get("args"),
        "idempotency_key": key,
        "probe_for": effect.name,
    }
    probe_witness = request_witness(request)
    name = f"tool://{decl.probe}"
    run.rec.seal(
        JournalKind.EFFECT_ANNOUNCED,
        call_seq=call_seq,
        family="probe",
        name=name,
        witness=probe_witness,
        attrs={"probe_for": effect.name},
    )
    call = LiveCall(
        run.session_id,
        run.era,
        call_seq,
        "probe",
        name,
        decl.probe,
        request,
        probe_witness,
        False,
        Recovery.RETRY,
        decl.retry,
        decl.timeout_s,
        False,
        key,
    )
    run.rec.out.live.append(call)
    run.pending_live = call
    run.waiting = Wait(WaitKind.PROBE, slot, decl)
    return SUSPEND


def _applied(outcome: Outcome) -> tuple[bool | None, Any]:
    """What a probe's answer says: ``None`` → the call never happened; ``{"applied": bool,
    "result": v}`` → as it says; any other value → it happened and that is its result; a
    failed probe → nobody knows (None)."""
    if not outcome.ok:
        return None, None
    value = outcome.value
    if value is None:
        return False, None
    if (
        isinstance(value, Mapping)
        and isinstance(value.get("applied"), bool)
        and set(value) <= {"applied", "result"}
    ):
        return bool(value["applied"]), value.get("result")
    return True, value


def probe_done(run: Run, wait: Wait, outcome: Outcome) -> Resolution:
    """The probe answered: record the call as it says, perform it, or ask an operator."""
    assert wait.decl is not None
    slot = wait.slot
    applied, result = _applied(outcome)
    run.rec.seal(
        JournalKind.EFFECT_RECORDED,
        call_seq=slot.call_seq,
        family="probe",
        name=f"tool://{wait.decl.probe}",
        attrs={
            "applied": "unknown" if applied is None else str(applied).lower(),
            "probe_for": slot.effect.name,
        },
    )
    if applied is True:
        entry = run.rec.result(
            slot, JournalKind.EFFECT_RECORDED, value=result, attrs={"reconciled": "applied"}
        )
        run.in_flight = None
        return serve(run.rec, slot.effect, entry)
    if applied is False:
        # The peer says it never happened: performing it now is the first application.
        # Durable before it leaves (the probe's record and the new stamp): a crash mid-call
        # must find the doubt's deadline counted from this attempt, not the first one.
        return perform_again(run, slot, wait.decl, announce_first=True)
    return open_operator_task(run, slot, wait.decl)


def open_operator_task(run: Run, slot: Slot, decl: EffectDecl) -> Resolution:
    """Ask an operator whether the call took effect, and park until the verdict."""
    effect, call_seq, _ = slot
    task_id = f"{run.session_id}/{run.era}/{call_seq}/operator"
    flight = run.in_flight
    if flight is not None and (flight.era, flight.call_seq) == (run.era, call_seq):
        # The same slot can be in doubt again in the same era (a replayable run: RETRY
        # verdict, then a crash after the act): the repeat needs a task id of its own.
        if flight.asks:
            task_id = f"{task_id}/{flight.asks}"
        run.in_flight = replace(flight, asks=flight.asks + 1)
    question = (
        f"Did {effect.name} (call {call_seq} of run {run.session_id}) take effect? APPROVED = it happened "
        "(comment: its result as JSON), RETRY = perform it again, ABANDON = record it as failed."
    )
    ask_person(
        run,
        call_seq,
        task_id,
        kind=TaskKind.OPERATOR,
        question=question,
        answer_json=canonical_json({"effect": effect.name, "request": effect.request}),
        role="operator",
        on_expiry=ExpiryPolicy.ESCALATE,
    )
    run.rec.at(JournalKind.TASK_OPENED, slot, {"task_id": task_id, "kind": "OPERATOR"})
    run.park(ParkKind.OPERATOR, task_id, call_seq, RunStatus.AWAITING_HUMAN)
    run.waiting = Wait(WaitKind.OPERATOR, slot, decl)
    return SUSPEND


def claims(run: Run, decision: TaskDecision) -> bool:
    """Whether ``decision`` answers the operator task the run waits on (routed here)."""
    wait, parked = run.waiting, run.parked
    return (
        wait is not None
        and wait.kind is WaitKind.OPERATOR
        and parked is not None
        and parked.ref == decision.task_id
    )


def on_decision(run: Run, decision: TaskDecision) -> Resolution | Rejected:
    """A TaskDecision on the operator task the run waits on (``claims``): four-eyes checked
    as for any task; an escalation keeps the run waiting; else the verdict."""
    wait = run.waiting
    if not claims(run, decision) or wait is None:
        return Rejected(f"no open task {decision.task_id!r} for this run")
    return answer_task(
        run,
        decision,
        approvals=1,
        waited=wait,
        carried=None,
        decide=lambda attrs: decide_operator(run, wait, decision, attrs),
    )


def decide_operator(
    run: Run, wait: Wait, decision: TaskDecision, attrs: dict[str, str]
) -> Resolution | Rejected:
    """Operator verdict on a call in doubt: APPROVED = it happened (comment: its result
    as JSON, or null); RETRY = perform it again; ABANDON/REJECTED = record it failed."""
    outcome = decision.outcome
    if outcome not in _VERDICTS:
        return Rejected(f"{outcome} is not an operator verdict")
    slot = wait.slot
    run.waiting = None
    run.unpark()
    run.rec.at(JournalKind.TASK_DECIDED, slot, attrs, witness=False)
    decl = wait.decl or decl_for(run, slot.effect)
    if outcome is DecisionOutcome.RETRY:
        refused = _gate_again(run, slot, decl)
        if refused is not None:
            return refused
        # Announced again, and durable before the call is performed: if the process dies
        # after the act, the restored run finds the call in doubt (and asks again) instead
        # of re-reading the verdict from the inbox and performing it once more.
        run.rec.at(
            JournalKind.EFFECT_ANNOUNCED,
            slot,
            {
                "recovery": str(decl.effective_recovery),
                "verdict": "retry",
                "mutating": "true" if decl.mutating else "false",
            },
        )
        _restamp(run, slot)
        return request_live(run, slot, decl, announce_first=True)
    if outcome is DecisionOutcome.APPROVED:
        try:
            value = json.loads(decision.comment) if decision.comment.strip() else None
        except ValueError:
            value = decision.comment
        entry = run.rec.result(
            slot, JournalKind.EFFECT_RECORDED, value=value, attrs={"verdict": "applied"}
        )
    else:
        error = ErrorInfo(
            type="EffectAbandoned",
            message=decision.comment or f"operator abandoned {slot.effect.name}",
            retryable=False,
        )
        entry = run.rec.result(
            slot, JournalKind.EFFECT_RECORDED, error=error, attrs={"verdict": "abandoned"}
        )
    run.in_flight = None
    return serve(run.rec, slot.effect, entry)
