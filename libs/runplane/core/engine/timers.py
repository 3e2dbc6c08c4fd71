"""Effect family: durable timers — ``ctx.sleep`` and the timeouts of waits; the Wake event.

A timer is resolved **once**, when its effect is first issued: against the run's logical
clock (``ctx.now()``) and, for a calendar rule, the deployment's calendars (working days,
holidays), like a deadline. The instant is journaled (RUN_PARKED ``wake_at``) and kept in the
snapshot (``wake_at_ms``); the executor owning the run's partition delivers a Wake at or
after it — after a crash, a restart or a rebalance too, since it reads the instant from the
restored snapshot. The wake records the sleep's result (the instant itself, never the clock),
so a replay serves the same value and never asks a clock. A timer is dropped when the run
leaves the park another way (``Run.unpark``: the signal or decision came first, a cancel).

A Wake is also the carrier of a ``quarantine:`` request (handled by the runtime). Any other
Wake only stamps the run unless its timer is due.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane.core.engine.cases import _calendars  # the run's calendars, built once
from runplane.core.engine.decode import serve
from runplane.core.engine.state import Run
from runplane.core.engine.tasks import withdraw_open
from runplane.core.engine.vocab import SUSPEND, Rejected, Resolution, Slot, Wait, WaitKind
from runplane.wire import ErrorInfo, JournalKind, ParkKind, RunStatus, Wake

__all__ = ["arm", "instant", "on_wake", "resolve", "sleep", "timed_out"]


def resolve(run: Run, timer: Mapping[str, Any]) -> int:
    """The instant (ms) a timer request (``runplane.core.waits``) names, from the logical
    clock; a calendar that does not implement the rule raises ``CalendarError``."""
    if "until" in timer:
        return int(timer["until"])
    if "ms" in timer:
        return run.clock_ms + int(timer["ms"])
    due, _digest = _calendars(run).resolve(str(timer["calendar"]), timer["rule"], run.clock_ms)
    return due


def instant(run: Run, timer: Mapping[str, Any]) -> int:
    """The instant a fresh timed wait waits for: the run's timer if one is still set — a
    checkpointed restore re-executes from the checkpoint in a new era while the timer of the
    wait it was parked on stays armed (only leaving a park drops one), so the re-issued wait
    keeps its journaled instant instead of starting its duration again — else ``resolve``."""
    return run.wake_at if run.wake_at is not None else resolve(run, timer)


def sleep(run: Run, slot: Slot) -> Resolution:
    due = instant(run, slot.effect.request)
    if due <= run.now:
        return _woke(run, slot, due)  # already past: nothing to wait for
    run.park(ParkKind.WAKE, str(due), slot.call_seq, RunStatus.PARKED)
    arm(run, slot, due, "timer")
    run.waiting = Wait(WaitKind.TIMER, slot)
    return SUSPEND


def arm(run: Run, slot: Slot, due: int, parked_on: str) -> None:
    """Set the run's timer to ``due`` and journal the instant with the park."""
    run.wake_at = due
    run.rec.at(JournalKind.RUN_PARKED, slot, {"parked_on": parked_on, "wake_at": str(due)})


def on_wake(run: Run, wake: Wake) -> Resolution | Rejected:
    """A Wake on the inbox (or from the executor's timer scan): a due timer, or nothing but
    a stamp."""
    due, wait = run.wake_at, run.waiting
    if due is None or run.now < due or wait is None:
        return SUSPEND  # early, or no timer: the step only stamps the run
    if wait.kind is WaitKind.TIMER:
        return _woke(run, wait.slot, due)
    if wait.kind in (WaitKind.SIGNAL, WaitKind.APPROVAL) and "timeout" in wait.slot.effect.request:
        # (A wait without a timeout of its own never times out, even under a timer carried
        # from an earlier era whose path the new era did not take.)
        return timed_out(run, wait.slot, due)
    return SUSPEND


def timed_out(run: Run, slot: Slot, due: int) -> Resolution:
    """A wait's timeout came first: ``WaitTimedOut`` at its slot; an approval's task is
    withdrawn (nobody waits for its decision any more)."""
    withdraw_open(run, "the run's wait timed out", carried=False)  # a panel: each open seat
    _settle(run)
    error = ErrorInfo(type="WaitTimedOut", message=f"no answer by {due}", retryable=False)
    entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, error=error, attrs=_at(due))
    return serve(run.rec, slot.effect, entry)


def _woke(run: Run, slot: Slot, due: int) -> Resolution:
    _settle(run)
    entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, value=due, attrs=_at(due))
    return serve(run.rec, slot.effect, entry)


def _settle(run: Run) -> None:
    run.waiting = None
    if run.parked is not None:
        run.unpark()
    run.wake_at = None


def _at(due: int) -> dict[str, str]:
    return {"wake_at": str(due)}
