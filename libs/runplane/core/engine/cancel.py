"""Cancelling a run: an operator's request, journaled, told to the agent, then the end.

A cancel arrives as a Signal with the reserved name ``runplane.cancel`` (payload
``{"reason": …}``), naming who asked (``sent_by``, from authentication); as any signal it is
accepted once per ``signal_id``. Agents cannot wait for a reserved name. It is journaled at once (CANCEL_REQUESTED, reason
and requester) and kept as the cancel's part of the run (``operated.CANCEL``, in the
snapshot) until the run ends. Then:

* parked on a signal, an approval or a timer: ``RunCancelled`` is recorded at that slot and
  raised at the agent's ``await``; an open approval task is withdrawn (``CloseTask``) and the
  timer dropped;
* busy with something that must first get its disposition — a live call (announced or not),
  the probe of a call in doubt, an operator's verdict on one, a case command — the cancel
  waits for it: the call's outcome is recorded as usual (or its declared recovery runs), and
  ``RunCancelled`` is recorded at the next effect the agent issues, in place of performing it.
  So a cancel never leaves an announced call without a disposition.

Raised in the agent, ``RunCancelled`` unwinds it: effect groups reverse what they left
standing (their undo calls are ordinary journaled calls), ``finally`` blocks run, and the agent
may catch it and clean up with more effects. However the agent then ends, the run ends
RUN_CANCELLED (status FAILED, error type ``RunCancelled``; ``ends.cancelled``). A replay
serves the recorded ``RunCancelled`` at the same slot, so the clean-up replays identically.
"""

from __future__ import annotations

import json
from typing import Final

from runplane.core.engine.decode import serve
from runplane.core.engine.operated import CANCEL, CancelRequest
from runplane.core.engine.state import Run
from runplane.core.engine.table import CANCEL_HOOKS, INTERRUPTIBLE
from runplane.core.engine.tasks import withdraw_open
from runplane.core.engine.vocab import SUSPEND, Rejected, Resolution, Slot
from runplane.core.keys import child_root, parent_of
from runplane.wire import ErrorInfo, JournalKind, Signal

__all__ = ["CANCEL_SIGNAL", "CASCADE_ID", "at_slot", "on_request", "untold"]

# The reserved signal name of a cancel request (names under ``runplane.`` are the platform's).
CANCEL_SIGNAL: Final = "runplane.cancel"


def on_request(run: Run, signal: Signal) -> Resolution | Rejected:
    by = signal.sent_by
    if by is None or not by.strip():
        return Rejected("a cancel must name who asked for it (sent_by)", "unauthenticated")
    cascaded = _cascaded_from(signal)
    if cascaded is not None and not _from_parent(run, cascaded):
        # A parent's cancel names the parent and the key it commissioned this run under: a
        # forged child-started signal cannot turn a parent's cancel against another run.
        return Rejected(f"a cascaded cancel from {cascaded[0]}, which is not this run's parent")
    if CANCEL.of(run) is not None:
        return SUSPEND  # already cancelling: a repeated request changes nothing
    request = CancelRequest(_reason(signal.payload_json), by, run.now)
    CANCEL.put(run, request)
    attrs = {"reason": request.reason, "requested_by": by}
    if signal.signal_id is not None:
        attrs["signal_id"] = signal.signal_id
    for hook in CANCEL_HOOKS:  # e.g. the commission family cancels the run's children
        attrs.update(hook(run))
    run.rec.seal(JournalKind.CANCEL_REQUESTED, attrs=attrs)
    wait = run.waiting
    # Waits the cancel interrupts at once (each family's row says which of its own); any
    # other wait must first reach its disposition.
    if wait is not None and wait.kind in INTERRUPTIBLE:
        return at_slot(run, wait.slot)
    return SUSPEND


# The signal id a parent's cascaded cancel carries: ``cascade:<parent>:<child key>``.
CASCADE_ID: Final = "cascade:"


def _cascaded_from(signal: Signal) -> tuple[str, str] | None:
    """(parent session, child key) of a cascaded cancel, None for an operator's."""
    sid = signal.signal_id or ""
    if not sid.startswith(CASCADE_ID):
        return None
    parent, _, key = sid[len(CASCADE_ID) :].partition(":")
    return parent, key


def _from_parent(run: Run, cascaded: tuple[str, str]) -> bool:
    mine = parent_of(run.admission_key)
    return (
        mine is not None
        and mine[0] == cascaded[0]
        and child_root(run.admission_key) == (cascaded[1])
    )


def untold(run: Run) -> bool:
    """Whether the run accepted a cancel the agent has yet to be told of (at its next
    effect)."""
    request = CANCEL.of(run)
    return request is not None and request.pending()


def _reason(payload_json: str) -> str:
    try:
        payload = json.loads(payload_json)
    except ValueError:
        payload = payload_json
    reason = payload.get("reason") if isinstance(payload, dict) else payload
    text = str(reason).strip() if reason is not None else ""
    return text[:500] or "cancelled by an operator"


def at_slot(run: Run, slot: Slot) -> Resolution:
    """Record ``RunCancelled`` at ``slot`` (the wait it interrupts, or a fresh effect) and
    raise it in the agent."""
    request = CANCEL.of(run)
    assert request is not None
    CANCEL.put(run, request.told(run.era))
    parked = run.parked
    withdraw_open(run, "run cancelled", carried=False)  # a panel: each seat still open
    run.waiting = None
    if parked is not None:
        run.unpark()  # drops a timer too
    error = ErrorInfo(type="RunCancelled", message=request.reason, retryable=False)
    entry = run.rec.result(
        slot, JournalKind.EFFECT_RECORDED, error=error, attrs={"cancelled_by": request.by}
    )
    return serve(run.rec, slot.effect, entry)
