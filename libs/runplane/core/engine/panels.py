"""Effect family: panels of people — one worklist task per seat, decided by a ``Quorum``.

``panel`` opens an APPROVAL task per seat (task id ``<session>/<era>/<call_seq>/panel/<seat>``)
and parks the run on the panel (``ParkKind.TASK``, ref ``<session>/<era>/<call_seq>``); the
panel's bookkeeping (``core.panels.PanelState``) is the value of the run's open request, so it
rides in the snapshot. Each TaskDecision on a seat is journaled (TASK_DECIDED at the panel's
slot, chain only, attrs ``seat``, ``decided_by``, ``counted``); once the quorum rule is decided
the seats still open are withdrawn (CloseTask) and the outcome is recorded as the slot's result
(TASK_DECIDED with the votes and who cast them), which a replay serves without asking again.

A checkpointed restore adopts the panel like any carried task (``eras.adopt``): nobody is
asked again, and decisions arriving before the new era re-reaches the panel are counted; one
that decides it is journaled at the panel's own slot and served from the side-effect log.

The family is ``approval`` (it is one, and so crosses eras with the approval row); the op is
``Op.PANEL``. It claims the TaskDecisions of its seats (``claims``); every other one is the
approval row's (the registry routes them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from runplane.core.canonical import canonical_json
from runplane.core.effect import Effect, EffectError, Op
from runplane.core.engine.asking import ask_person, decision_identity_problem
from runplane.core.engine.decode import serve
from runplane.core.engine.eras import note_early, set_open
from runplane.core.engine.state import Run
from runplane.core.engine.values import OpenRequest, RequestKind
from runplane.core.engine.vocab import SUSPEND, Rejected, Resolution, Slot, Throw, Wait, WaitKind
from runplane.core.panels import PanelState, outcome_from
from runplane.core.plan import Pending, QuorumOutcome
from runplane.errors import TerminalError
from runplane.wire import (
    CloseTask,
    DecisionOutcome,
    JournalKind,
    Label,
    ParkKind,
    RunStatus,
    Sensitivity,
    TaskDecision,
    TaskKind,
    Trust,
)

__all__ = ["claims", "decode", "on_decision", "panel"]


def panel(run: Run, slot: Slot) -> Resolution:
    """Open a task per seat and park until the quorum rule is decided."""
    effect, call_seq, witness = slot
    req = effect.request
    panel_id = f"{run.session_id}/{run.era}/{call_seq}"
    try:
        ask = {"question": str(req["question"]), "answer_json": canonical_json(req["answer"])}
        seats = {seat: f"{panel_id}/panel/{seat}" for seat in req["seats"]}
        state = PanelState.opened(req, seats)
    except (TypeError, ValueError, KeyError, TerminalError) as exc:
        return Throw(EffectError("InvalidRequest", str(exc)[:500]))
    for seat, task_id in sorted(seats.items()):
        _open_seat(run, state, seat, task_id, ask, call_seq)
        attrs = {"task_id": task_id, "kind": "PANEL", "role": state.roles[seat], "seat": seat}
        run.rec.at(JournalKind.TASK_OPENED, slot, attrs)
    # The state and the question ride in the open request (the snapshot): a seat asked
    # again, after a restore too, is asked the same question.
    value = {**state.to_json(), "ask": ask}
    request = OpenRequest(
        RequestKind.TASK, panel_id, run.era, call_seq, effect.family, effect.name, witness, value
    )
    set_open(run, request)
    run.park(ParkKind.TASK, panel_id, call_seq, RunStatus.AWAITING_HUMAN)
    due = run.timeout_at(req.get("timeout"))
    if due is not None:  # WaitTimedOut past it; the open seats are withdrawn
        run.rec.at(
            JournalKind.RUN_PARKED, slot, {"parked_on": f"task:{panel_id}", **run.bound_by(due)}
        )
    run.waiting = Wait(WaitKind.APPROVAL, slot)
    return SUSPEND


def _open_seat(
    run: Run, state: PanelState, seat: str, task_id: str, ask: Mapping[str, str], call_seq: int
) -> None:
    quorum = state.quorum
    question = (
        f"{ask['question']} (panel seat {seat}: {quorum.approve_at} of {len(quorum.panel)} "
        f"approvals carry it, {quorum.reject_at} rejections stop it)"
    )
    ask_person(
        run,
        call_seq,
        task_id,
        kind=TaskKind.APPROVAL,
        question=question,
        answer_json=ask["answer_json"],
        role=state.roles[seat],  # the worklist refuses the initiator every seat
    )


def _panel(run: Run) -> tuple[OpenRequest, PanelState] | None:
    open_ = run.open
    if open_ is None or open_.kind is not RequestKind.TASK or not PanelState.is_panel(open_.value):
        return None
    return open_, PanelState.from_json(open_.value)


def claims(run: Run, decision: TaskDecision) -> bool:
    """Whether ``decision`` is a seat's of the run's open panel (the registry routes it here)."""
    found = _panel(run)
    return found is not None and found[1].seat_of(decision.task_id) is not None


def on_decision(run: Run, decision: TaskDecision) -> Resolution | Rejected:
    """A TaskDecision on a seat of the run's open panel (``claims``)."""
    found = _panel(run)
    seat = None if found is None else found[1].seat_of(decision.task_id)
    if found is None or seat is None:
        return Rejected(f"no open panel seat {decision.task_id!r} for this run")
    open_, state = found
    outcome = decision.outcome
    if outcome not in (
        DecisionOutcome.APPROVED,
        DecisionOutcome.REJECTED,
        DecisionOutcome.ESCALATED,
    ):
        return Rejected(f"{outcome} does not decide a panel seat")
    problem = decision_identity_problem(decision, initiator=run.initiator, approvals=1)
    if problem is not None:
        return Rejected(problem)
    principals = tuple(p for p in decision.decided_by if p.strip())
    if not principals and outcome is not DecisionOutcome.ESCALATED:
        return Rejected("a panel seat is decided by somebody: decided_by is empty")
    attrs = {
        "task_id": decision.task_id,
        "seat": seat,
        "outcome": str(outcome),
        "decided_by": ",".join(principals)[:200],
    }
    wait = _waited(run, open_)
    if outcome is DecisionOutcome.ESCALATED:
        # The worklist reopened the seat's task for another role: it still asks the seat.
        _note(run, open_, wait, {**attrs, "counted": "no"})
        _still_parked(run, open_, wait)
        return SUSPEND
    repeat = state.repeat(principals)
    if repeat is not None:
        # Four-eyes across the panel: this person already counts on another seat.
        _note(
            run,
            open_,
            wait,
            {
                **attrs,
                "counted": "no",
                "reason": f"{repeat.principal} decided {repeat.seat_decided}",
            },
        )
        return _ask_again(run, open_, state, seat, wait)
    state = state.vote(seat, principals, outcome is DecisionOutcome.APPROVED, decision.comment)
    _note(run, open_, wait, {**attrs, "counted": "yes"})
    if isinstance(state.outcome, Pending):
        run.open = replace(open_, value={**state.to_json(), "ask": open_.value["ask"]})
        _still_parked(run, open_, wait)
        return SUSPEND
    return _decided(run, open_, state, wait)


def _waited(run: Run, open_: OpenRequest) -> Wait | None:
    """The run's wait on this panel, or None (carried from an earlier era, not asked yet)."""
    wait, parked = run.waiting, run.parked
    if wait is not None and parked is not None and parked.ref == open_.ref:
        return wait
    return None


def _note(
    run: Run,
    open_: OpenRequest,
    wait: Wait | None,
    attrs: Mapping[str, str],
    kind: JournalKind = JournalKind.TASK_DECIDED,
) -> None:
    """Journal one seat's decision, or its task opened again (chain only: the panel's result
    comes once, decided) — at the wait's slot, or named after the era that asked."""
    if wait is not None:
        run.rec.at(kind, wait.slot, attrs, witness=False)
        return
    run.rec.seal(
        kind,
        family=open_.family,
        name=open_.name,
        attrs={**attrs, "carried_from": f"{open_.era}/{open_.call_seq}"},
    )


def _still_parked(run: Run, open_: OpenRequest, wait: Wait | None) -> None:
    """The run waits on: say so after the decision (as an escalation does), so a reader of
    the journal alone (its summary, the runs UI) sees it awaiting people, not running."""
    if wait is None:
        return  # carried: the run is busy elsewhere in its new era
    attrs = {"parked_on": f"task:{open_.ref}", "task_id": open_.ref, "panel": "pending"}
    run.rec.seal(JournalKind.RUN_PARKED, call_seq=wait.slot.call_seq, attrs=attrs)


def _ask_again(
    run: Run, open_: OpenRequest, state: PanelState, seat: str, wait: Wait | None
) -> Resolution:
    """The seat's decision did not count: ask the seat again, under a task id of its own."""
    task_id = f"{open_.ref}/panel/{seat}/{state.asks.get(seat, 0) + 1}"
    state = state.ask_again(seat, task_id)
    ask = dict(open_.value["ask"])
    call_seq = wait.slot.call_seq if wait is not None else open_.call_seq
    _open_seat(run, state, seat, task_id, ask, call_seq)
    attrs = {"task_id": task_id, "kind": "PANEL", "role": state.roles[seat], "seat": seat}
    _note(run, open_, wait, attrs, JournalKind.TASK_OPENED)
    run.open = replace(open_, value={**state.to_json(), "ask": ask})
    return SUSPEND


def _own_slot(open_: OpenRequest) -> Slot:
    return Slot(Effect(open_.family, open_.name, None, Op.PANEL), open_.call_seq, open_.witness)


def _decided(
    run: Run, open_: OpenRequest, state: PanelState, wait: Wait | None
) -> Resolution | Rejected:
    """The quorum rule is decided: withdraw the open seats, record the outcome, resume."""
    for task_id in sorted(state.open.values()):
        run.rec.out.commands.append(
            CloseTask(task_id=task_id, reason="the panel is decided", at_ms=run.now)
        )
    decided = type(state.outcome).__name__.upper()  # APPROVED, REJECTED or SPLIT
    value = {
        "outcome": decided,
        "quorum": state.quorum.to_json(),
        "deciders": {s: list(p) for s, p in sorted(state.deciders.items())},
    }
    people = sorted({f"human:{p}" for ps in state.deciders.values() for p in ps})
    label = Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=tuple(people))
    attrs = {"panel": decided, "seats_decided": str(len(state.deciders))}
    run.open = None
    if wait is None:
        slot = _own_slot(open_)
        entry = run.rec.result(
            slot,
            JournalKind.TASK_DECIDED,
            value=value,
            label=label,
            attrs={**attrs, "answers": f"{open_.era}/{open_.call_seq}"},
            era=open_.era,
        )
        note_early(run, open_, entry)
        return SUSPEND
    run.waiting = None
    run.unpark()
    entry = run.rec.result(
        wait.slot, JournalKind.TASK_DECIDED, value=value, label=label, attrs=attrs
    )
    return serve(run.rec, wait.slot.effect, entry)


def decode(_effect: Effect, raw: Any) -> QuorumOutcome:
    """A panel's recorded result: the quorum's outcome, recomputed from the votes."""
    return outcome_from(raw)
