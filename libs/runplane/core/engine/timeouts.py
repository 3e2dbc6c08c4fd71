"""A wait's durable timer: resolved once, journaled, and what a wait that timed out records.

``ctx.sleep`` is the timers family's; the timeouts of other waits (a signal, an approval, a
panel) are asked for through ``Run`` (``timeout_at``, ``bound_by``, ``time_out``,
``drop_timeout``), which answers from this module: a family names a wait's timeout and no
more, never the timer or the Wake that delivers it.
A timer is resolved **once**, when its effect is first issued: against the run's logical
clock (``ctx.now()``) and, for a calendar rule, the deployment's calendars (working days,
holidays), like a deadline. The instant is journaled (RUN_PARKED ``wake_at``) and is the
timer family's part of the run (``TIMER``: ``parts["timer"]`` in the snapshot, and the older
``wake_at_ms``). A timer is dropped when the run leaves the park another way (``Run.unpark``:
the signal or decision came first, a cancel).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from runplane.core.engine.decode import serve
from runplane.core.engine.table import Part
from runplane.core.engine.tasks import withdraw_open
from runplane.core.engine.vocab import Resolution, Slot
from runplane.wire import ErrorInfo, JournalKind, SessionSnapshot

if TYPE_CHECKING:  # a type only: ``Run`` asks this module for a wait's timeout
    from runplane.core.engine.state import Run

__all__ = ["TIMER", "arm", "at", "hold", "instant", "resolve", "settle", "timed_out", "timer_due"]

# The timer family's part: the journaled instant the run's timer is due, None without one.
TIMER: Final[Part[int | None]] = Part(
    "timer",
    None,
    encode=str,
    decode=int,
    read_old=lambda snapshot: snapshot.wake_at_ms,
    write_old=lambda due: {"wake_at_ms": due},
)


def timer_due(snapshot: SessionSnapshot) -> int | None:
    """The instant ``snapshot``'s timer is due (what the executor's timer scan reads)."""
    return TIMER.read(snapshot)


def resolve(run: Run, timer: Mapping[str, Any]) -> int:
    """The instant (ms) a timer request (``runplane.core.waits``) names, from the logical
    clock; a calendar that does not implement the rule raises ``CalendarError``."""
    if "until" in timer:
        return int(timer["until"])
    if "ms" in timer:
        return run.clock_ms + int(timer["ms"])
    due, _digest = run.calendars_or_wall().resolve(
        str(timer["calendar"]), timer["rule"], run.clock_ms
    )
    return due


def instant(run: Run, timer: Mapping[str, Any]) -> int:
    """The instant a fresh timed wait waits for: the run's timer if one is still set — a
    checkpointed restore re-executes from the checkpoint in a new era while the timer of the
    wait it was parked on stays armed (only leaving a park drops one), so the re-issued wait
    keeps its journaled instant instead of starting its duration again — else ``resolve``."""
    armed = TIMER.of(run)
    return armed if armed is not None else resolve(run, timer)


def hold(run: Run, due: int) -> dict[str, str]:
    """Set the run's timer to ``due``: the attrs that journal the instant with the park."""
    TIMER.put(run, due)
    return at(due)


def arm(run: Run, slot: Slot, due: int, parked_on: str) -> None:
    """Set the run's timer to ``due`` and journal the instant with the park."""
    run.rec.at(JournalKind.RUN_PARKED, slot, {"parked_on": parked_on, **hold(run, due)})


def timed_out(run: Run, slot: Slot, due: int) -> Resolution:
    """A wait's timeout came first: ``WaitTimedOut`` at its slot; an approval's task is
    withdrawn (nobody waits for its decision any more)."""
    withdraw_open(run, "the run's wait timed out", carried=False)  # a panel: each open seat
    settle(run)
    error = ErrorInfo(type="WaitTimedOut", message=f"no answer by {due}", retryable=False)
    entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, error=error, attrs=at(due))
    return serve(run.rec, slot.effect, entry)


def settle(run: Run) -> None:
    """The run leaves its wait and its timer."""
    run.waiting = None
    if run.parked is not None:
        run.unpark()
    TIMER.put(run, None)


def at(due: int) -> dict[str, str]:
    return {"wake_at": str(due)}
