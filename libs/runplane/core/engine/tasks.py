"""The worklist tasks a run has open, and withdrawing them: one place for cancel, timers, eras
and every end.

A run has a task open when it is parked on one (an approval, an operator's verdict on a call
in doubt, a panel of people) or when it carries an unanswered task request from an earlier
era that its new era has not asked again (``OpenRequest``, see "Asked once"). A panel is
parked on under its own ref, which is no task: its tasks are its seats still open, kept in the
open request's value (``core.panels.task_ids``). Withdrawing closes each (``CloseTask``), so
nothing is left on the worklist that nobody waits for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runplane.core.engine.values import OpenRequest, RequestKind
from runplane.core.panels import task_ids
from runplane.wire import CloseTask, ParkedOn, ParkKind

if TYPE_CHECKING:  # a type only: ``Run`` reaches this module through its timeouts
    from runplane.core.engine.state import Run

__all__ = ["TASK_PARKS", "carried_tasks", "waited_tasks", "withdraw_open"]

# Parks that wait on a worklist task.
TASK_PARKS = (ParkKind.TASK, ParkKind.OPERATOR)


def waited_tasks(parked: ParkedOn | None, open_: OpenRequest | None) -> list[str]:
    """The tasks behind the park: a panel's open seats when the open request is that panel,
    else the task parked on itself; none when the run is not parked on a task."""
    if parked is None or parked.kind not in TASK_PARKS:
        return []
    if open_ is None or open_.kind is not RequestKind.TASK:
        return [parked.ref]
    return task_ids(parked.ref, open_.ref, open_.value)


def carried_tasks(parked: ParkedOn | None, open_: OpenRequest | None) -> list[str]:
    """The tasks of an open request the run does not wait on (carried from an earlier era)."""
    if open_ is None or open_.kind is not RequestKind.TASK:
        return []
    if parked is not None and parked.ref == open_.ref:
        return []
    return task_ids(open_.ref, open_.ref, open_.value)


def withdraw_open(run: Run, reason: str, *, waited: bool = True, carried: bool = True) -> None:
    """Close the run's open tasks in this step: the one(s) it waits on (``waited``), a carried
    request's (``carried``). The open request withdrawn is forgotten."""
    parked, open_ = run.parked, run.open
    closing = (waited_tasks(parked, open_) if waited else []) + (
        carried_tasks(parked, open_) if carried else []
    )
    commands = run.rec.out.commands
    for task_id in closing:
        commands.append(CloseTask(task_id=task_id, reason=reason[:200], at_ms=run.now))
    if open_ is None:
        return
    is_waited = parked is not None and parked.kind in TASK_PARKS and parked.ref == open_.ref
    if (waited and is_waited) or (carried and not is_waited):
        run.open = None
