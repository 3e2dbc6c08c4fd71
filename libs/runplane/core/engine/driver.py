"""The coroutine driver: run the agent until it suspends on something outside, or ends.

Each effect the agent awaits takes the era's next call_seq; ``replay.decide_slot`` says what
that slot holds, and the driver serves the record, quarantines, waits again, runs a doubt's
recovery, or hands a fresh slot to the handler of the effect's op (``registry.HANDLERS``).
"""

from __future__ import annotations

import json
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, cast

from runplane.core.chain import request_witness
from runplane.core.ctx import StepCtx
from runplane.core.effect import Effect, EffectError
from runplane.core.engine import bounds, cancel, patches
from runplane.core.engine.decode import error_info, serve
from runplane.core.engine.doubt import in_doubt
from runplane.core.engine.ends import fail, finish, quarantine
from runplane.core.engine.eras import adopt, from_prior_era
from runplane.core.engine.registry import HANDLERS
from runplane.core.engine.replay import SlotCase, decide_slot
from runplane.core.engine.sinkgate import proposed_labels, value_label
from runplane.core.engine.state import Mark, Run
from runplane.core.engine.table import REWAIT
from runplane.core.engine.tools import decl_for
from runplane.core.engine.values import InFlight
from runplane.core.engine.vocab import (
    SUSPEND,
    Diverged,
    Resolution,
    Slot,
    Throw,
    Value,
    Wait,
    WaitKind,
)
from runplane.wire import ErrorInfo, JournalKind

__all__ = ["drive", "launch"]


def launch(run: Run) -> None:
    """Start the agent's coroutine on the run's input and drive it."""
    ctx = StepCtx(run, _Inline(run))
    try:
        value = json.loads(run.input_json)
        coro = run.spec.fn(ctx, value)
        if not hasattr(coro, "send"):
            raise TypeError(f"agent {run.spec.capability!r} must be an async def")
        run.coro = cast("Coroutine[Any, Any, Any]", coro)
    except Exception as exc:
        fail(run, ErrorInfo(type=type(exc).__name__, message=str(exc), retryable=False))
        return
    drive(run, Value(None))


@dataclass(frozen=True)
class _Inline:
    """What ``StepCtx`` asks the engine on the spot (``ctx.InlineAnswers``): the sink gate's
    label of a value and of a proposed call's arguments, over the outputs recorded before
    this point, and the patch markers."""

    run: Run

    def label_of(self, value: Any) -> Any:
        return value_label(self.run, value)

    def call_labels(self, call_id: str, tool: str, arguments: Any) -> Any:
        return proposed_labels(self.run, (self.run.era, self.run.cursor), call_id, tool, arguments)

    def patch(self, change_id: str, *, deprecated: bool) -> bool:
        if deprecated:
            patches.deprecate_patch(self.run, change_id)
            return True
        return patches.patched(self.run, change_id)

    def progress(self, note: Mapping[str, Any]) -> None:
        # Live only: before a slot the history already holds (recorded, in flight, parked on)
        # the agent is replaying, and its notes then were news once already.
        run = self.run
        if run.max_slot.get(run.era, -1) < run.cursor and not run.slot_taken(run.cursor):
            run.progress.append(dict(note))


def drive(run: Run, resolution: Resolution) -> None:
    """Drive the coroutine until it suspends on something outside, or ends."""
    try:
        while run.coro is not None:
            try:
                if isinstance(resolution, Value):
                    request = run.coro.send(resolution.value)
                elif isinstance(resolution, Throw):
                    request = run.coro.throw(resolution.error)
                else:
                    return  # suspended: the answer comes later
            except StopIteration as stop:
                finish(run, stop.value)
                return
            except Exception as exc:
                if run.fault is not None:
                    raise Diverged(run.fault) from None
                fail(run, error_info(exc))
                return
            if run.fault is not None:
                raise Diverged(run.fault)
            if not isinstance(request, Effect):
                fail(
                    run,
                    ErrorInfo(
                        type="TerminalError",
                        message=f"agents may only await StepCtx effects, got {type(request).__name__}",
                        retryable=False,
                    ),
                )
                return
            resolution = _dispatch_guarded(run, request)
    except Diverged as q:
        quarantine(run, str(q))


def _dispatch_guarded(run: Run, effect: Effect) -> Resolution:
    """``_dispatch``, where a bad argument is the agent's error, never the engine's crash.

    An exception out of a handler (``int("x")`` for an expected version, a wire record's
    validator refusing a field) would otherwise escape ``Runtime`` and crash the executor
    on the same inbox record again and again (a poison pill). Whatever the handler did
    before raising is undone; then the failure is *recorded* at the call's slot, so a
    replay serves the same failure instead of meeting an empty slot followed by later
    calls (which would quarantine the run). A slot that already holds something (a
    replayed result, a call in doubt, a park) cannot take a record: the run fails.
    """
    mark = Mark.take(run)
    try:
        return _dispatch(run, effect)
    except Diverged:
        raise
    except Exception as exc:
        mark.restore(run)
        error = ErrorInfo(
            type="InvalidRequest",
            message=f"{effect.family}:{effect.name}: {type(exc).__name__}: {exc}"[:500],
            retryable=False,
        )
        call_seq = mark.cursor
        run.cursor = call_seq + 1
        if run.slot_taken(call_seq) or run.verify_only:
            fail(run, error)
            return SUSPEND
        try:
            witness = request_witness(effect.request)
        except (TypeError, ValueError):  # _dispatch answers that itself; belt and braces
            fail(run, error)
            return SUSPEND
        slot = Slot(effect, call_seq, witness)
        return serve(
            run.rec, effect, run.rec.result(slot, JournalKind.EFFECT_RECORDED, error=error)
        )


def _dispatch(run: Run, effect: Effect) -> Resolution:
    call_seq = run.cursor
    run.cursor += 1
    try:
        witness = request_witness(effect.request)
    except (TypeError, ValueError) as exc:
        return Throw(EffectError("InvalidRequest", f"request is not canonical JSON: {exc}"))
    era = run.era
    entry = run.rec.results.get((era, call_seq))
    decision = decide_slot(
        era,
        call_seq,
        (effect.family, effect.name, witness),
        entry,
        run.in_flight,
        run.parked,
        run.max_slot.get(era, -1) > call_seq,
        run.verify_only,
    )
    case = decision.case
    if case is SlotCase.REPLAY:
        assert entry is not None
        run.rec.out.replayed += 1
        run.rec.clock_ms = entry.stamp_ms
        return serve(run.rec, effect, entry)
    # tuple.__new__, not Slot(...): a NamedTuple's __new__ is a Python function (per effect).
    slot = tuple.__new__(Slot, (effect, call_seq, witness))
    if case is SlotCase.FRESH:
        # Nothing recorded here: what the era carries decides first, then the op's handler.
        if cancel.untold(run):
            return cancel.at_slot(run, slot)  # a cancel waiting for the agent's next effect
        if run.rec.next_seq >= run.limits.max_journal_records and (
            (refused := bounds.history_too_long(run, slot)) is not None
        ):
            return refused
        if run.prior and (served := from_prior_era(run, slot)) is not None:
            return served
        if run.doubts:
            return _carried_doubt(run, slot)
        carried = run.open
        if carried is not None and carried.era < era and carried.matches(effect, witness):
            return adopt(run, carried, slot)
        return HANDLERS[effect.op](run, slot)
    if case is SlotCase.IN_DOUBT:
        assert run.in_flight is not None
        return in_doubt(run, slot, run.in_flight.recovery)
    if case is SlotCase.OPERATOR:
        run.waiting = Wait(WaitKind.OPERATOR, slot, decl_for(run, effect))
        return SUSPEND
    if case is SlotCase.PARKED:
        return _rewait(run, slot)
    raise Diverged(decision.diagnostic)  # DIVERGED, HISTORY_ENDS, GAP


def _rewait(run: Run, slot: Slot) -> Resolution:
    """Rebuilding a parked run: its command was sent when it parked; just wait again."""
    parked = run.parked
    assert parked is not None
    kind = REWAIT.get(parked.kind, WaitKind.SIGNAL)  # each park's row says how it waits
    carried = run.open
    value = carried.value if carried is not None and carried.ref == parked.ref else None
    run.waiting = Wait(kind, slot, value=value)
    return SUSPEND


def _carried_doubt(run: Run, slot: Slot) -> Resolution:
    """A fresh slot while earlier eras' calls are in doubt: the same call asked again runs its
    declared recovery before it can be performed; any other call goes on as fresh."""
    effect, call_seq, witness = slot
    key = (effect.family, effect.name, witness)
    doubt = next((d for d in run.doubts if d.key() == key), None)
    if doubt is not None:
        # It moves to this slot (still durable: the snapshot's in-flight call, carried again by
        # the next restore) and keeps its origin.
        run.doubts.remove(doubt)
        run.in_flight = InFlight(
            run.era,
            call_seq,
            effect.family,
            effect.name,
            witness,
            doubt.recovery,
            doubt.origin,
            announced_ms=doubt.announced_ms,  # its timeout runs from the first announce
        )
        return in_doubt(run, slot, doubt.recovery)
    carried = run.open
    if carried is not None and carried.era < run.era and carried.matches(effect, witness):
        return adopt(run, carried, slot)
    return HANDLERS[effect.op](run, slot)
