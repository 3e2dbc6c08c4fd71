"""Effect family: patch markers — ``ctx.patched("change-id")`` and ``ctx.deprecate_patch``.

A fix to a live agent changes its call sequence; runs recorded before it would diverge (and be
quarantined) on replay. ``patched`` lets the new code branch on the history instead:

- a run whose history recorded the marker here (it took the new branch): True, served;
- a history that predates it — this slot holds another call, a park, a call in doubt, or is
  empty while later slots are recorded (a derived draw): False, and the slot is *not* taken,
  so the old branch replays onto the old history unchanged;
- a fresh slot (a new run, or a run in flight that has not got here yet): the marker is
  journaled (family ``patch``, name ``patch:<change-id>``, request ``{"patch": id}``, value
  ``true``) and it is True.

``deprecate_patch(id)``, for when no run can take the old branch any more: it consumes the
marker where a history has one and records nothing where it has none (new runs record no
marker), so the ``patched`` call and its old branch can be deleted; once no run in flight has
the marker (``runplane replay --from-kafka`` passes without it), the call goes too.

It is synchronous (``if ctx.patched(...)``), like ``ctx.random``: it reads the slot at the
cursor instead of yielding an effect, because "not here" must leave the slot to the next call
— the driver's slot decision would call that a divergence. No registry row for that reason.
"""

from __future__ import annotations

from runplane.core.chain import request_witness
from runplane.core.effect import Effect, Op
from runplane.core.engine.state import Run
from runplane.core.engine.vocab import Slot
from runplane.wire import JournalKind

__all__ = ["FAMILY", "deprecate_patch", "marker", "patched"]

FAMILY = "patch"


def marker(change_id: str) -> Effect:
    """The effect a marker is journaled as (never yielded to the driver)."""
    if not change_id or not isinstance(change_id, str):
        raise ValueError("a patch needs a non-empty change id")
    return Effect(FAMILY, f"patch:{change_id}", {"patch": change_id}, Op.OBSERVE)


def _recorded_here(run: Run, effect: Effect) -> bool | None:
    """True: the slot at the cursor holds this marker; False: it holds something else or the
    history goes on past it; None: nothing here or after (fresh)."""
    era, call_seq = run.era, run.cursor
    entry = run.rec.results.get((era, call_seq))
    if entry is not None:
        return entry.family == effect.family and entry.name == effect.name
    if run.slot_taken(call_seq) or run.max_slot.get(era, -1) > call_seq:
        return False
    return None


def patched(run: Run, change_id: str) -> bool:
    """Whether this run takes the patched branch (see the module docstring)."""
    effect = marker(change_id)
    here = _recorded_here(run, effect)
    if here is False:
        return False
    call_seq = run.cursor
    run.cursor += 1
    if here:
        run.rec.out.replayed += 1
        return True
    if not run.verify_only:  # a verifying replay never extends the history
        slot = Slot(effect, call_seq, request_witness(effect.request))
        run.rec.result(slot, JournalKind.EFFECT_RECORDED, value=True)
    return True


def deprecate_patch(run: Run, change_id: str) -> None:
    """Consume the marker where the history has one here; record nothing otherwise."""
    if _recorded_here(run, marker(change_id)):
        run.cursor += 1
        run.rec.out.replayed += 1
