"""Effect family: durable timers — ``ctx.sleep`` and the Wake event.

A sleep resolves its instant once (``timeouts.instant``), parks the run (``ParkKind.WAKE``)
and journals the instant; the executor owning the run's partition delivers a Wake at or after
it — after a crash, a restart or a rebalance too, since it reads the instant from the
restored snapshot. The wake records the sleep's result (the instant itself, never the clock),
so a replay serves the same value and never asks a clock. A due Wake also ends a wait of
another family that armed a timeout of its own (``timeouts.timed_out``), and a family's wait
for an instant (``Run.wait_until``: its row's ``on_due`` says what follows).

A Wake is also the carrier of a ``quarantine:`` request (handled by the runtime). Any other
Wake only stamps the run unless its timer is due.
"""

from __future__ import annotations

from typing import Any

from runplane.core.effect import Effect
from runplane.core.engine import timeouts
from runplane.core.engine.decode import serve
from runplane.core.engine.state import Run
from runplane.core.engine.table import BOUNDED, DUE
from runplane.core.engine.vocab import SUSPEND, Rejected, Resolution, Slot, Wait, WaitKind
from runplane.wire import JournalKind, ParkKind, RunStatus, Wake

__all__ = ["decode", "on_wake", "sleep"]


def sleep(run: Run, slot: Slot) -> Resolution:
    due = timeouts.instant(run, slot.effect.request)
    if due <= run.now:
        return _woke(run, slot, due)  # already past: nothing to wait for
    run.park(ParkKind.WAKE, str(due), slot.call_seq, RunStatus.PARKED)
    timeouts.arm(run, slot, due, "timer")
    run.waiting = Wait(WaitKind.TIMER, slot)
    return SUSPEND


def on_wake(run: Run, wake: Wake) -> Resolution | Rejected:
    """A Wake on the inbox (or from the executor's timer scan): a due timer, or nothing but
    a stamp."""
    due, wait = timeouts.TIMER.of(run), run.waiting
    if due is None or run.now < due or wait is None:
        return SUSPEND  # early, or no timer: the step only stamps the run
    if wait.kind is WaitKind.TIMER:
        return _woke(run, wait.slot, due)
    if wait.kind in DUE:  # a family's wait for an instant (``Run.wait_until``)
        return DUE[wait.kind](run, wait)  # type: ignore[no-any-return]
    if wait.kind in BOUNDED and "timeout" in wait.slot.effect.request:
        # (A wait without a timeout of its own never times out, even under a timer carried
        # from an earlier era whose path the new era did not take.)
        return timeouts.timed_out(run, wait.slot, due)
    return SUSPEND


def decode(_effect: Effect, raw: Any) -> int:
    """A sleep's recorded value: the instant it woke at."""
    return int(raw)


def _woke(run: Run, slot: Slot, due: int) -> Resolution:
    timeouts.settle(run)
    entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, value=due, attrs=timeouts.at(due))
    return serve(run.rec, slot.effect, entry)
