"""Effect family: local effects — observations, checkpoints and signals.

``observe`` computes a value in the agent's process once and journals it; ``checkpoint``
journals the run's position (a checkpointed run restores from the last one); ``wait_signal``
takes the next buffered signal of that name or parks until one arrives on the inbox.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from runplane.core.engine.decode import error_info, serve
from runplane.core.engine.state import Run
from runplane.core.engine.vocab import (
    MAX_BUFFERED_SIGNALS,
    SUSPEND,
    Rejected,
    Resolution,
    Slot,
    Wait,
    WaitKind,
)
from runplane.wire import JournalKind, ParkKind, ResultEntry, RunStatus, Signal

__all__ = ["checkpoint", "observe", "on_signal", "wait_signal"]


def observe(run: Run, slot: Slot) -> Resolution:
    fn: Callable[[], Any] = slot.effect.options["fn"]
    try:
        value = fn()
    except Exception as exc:
        entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, error=error_info(exc))
    else:
        entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, value=value)
    return serve(run.rec, slot.effect, entry)


def checkpoint(run: Run, slot: Slot) -> Resolution:
    state = slot.effect.request["state"]
    entry = run.rec.result(slot, JournalKind.CHECKPOINT_REPORTED, value=state)
    if entry.ok:
        run.checkpoint_json = entry.value_json
    return serve(run.rec, slot.effect, entry)


def wait_signal(run: Run, slot: Slot) -> Resolution:
    name = slot.effect.name
    for i, signal in enumerate(run.pending):
        if signal.name == name:
            del run.pending[i]
            return serve(run.rec, slot.effect, _record_signal(run, slot, signal))
    run.park(ParkKind.SIGNAL, name, slot.call_seq, RunStatus.PARKED)
    run.rec.seal(
        JournalKind.RUN_PARKED, call_seq=slot.call_seq, attrs={"parked_on": f"signal:{name}"}
    )
    run.waiting = Wait(WaitKind.SIGNAL, slot)
    return SUSPEND


def on_signal(run: Run, signal: Signal) -> Resolution | Rejected:
    """A signal on the inbox: resumes the run waiting for it, or is buffered until it asks."""
    wait = run.waiting
    if wait is not None and wait.kind is WaitKind.SIGNAL and wait.slot.effect.name == signal.name:
        run.waiting = None
        run.unpark()
        return serve(run.rec, wait.slot.effect, _record_signal(run, wait.slot, signal))
    if len(run.pending) >= MAX_BUFFERED_SIGNALS:
        # Every buffered signal rides in every snapshot of the run: unbounded, a chatty
        # sender would grow each commit (and the sessions row) without limit.
        return Rejected(
            f"{MAX_BUFFERED_SIGNALS} signals already buffered and not awaited; refused {signal.name!r}",
            "signals_full",
        )
    # Not awaited yet: keep it (in the snapshot) for the wait_signal that will consume it.
    run.pending.append(signal)
    run.rec.seal(JournalKind.SIGNAL_RECEIVED, attrs={"signal": signal.name, "buffered": "true"})
    return SUSPEND


def _record_signal(run: Run, slot: Slot, signal: Signal) -> ResultEntry:
    try:
        payload = json.loads(signal.payload_json)
    except ValueError:
        payload = signal.payload_json  # not JSON: delivered as the raw text
    return run.rec.result(
        slot, JournalKind.SIGNAL_RECEIVED, value=payload, attrs={"signal": signal.name}
    )
