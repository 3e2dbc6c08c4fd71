"""Durable timer requests: how ``ctx.sleep`` and a wait's ``timeout`` spell their instant.

Pure. A timer request is part of the effect's request (its witness), in one of three forms:

    {"ms": n}                          elapsed milliseconds after the logical clock
    {"rule": {...}, "calendar": name}  a calendar rule (``{"minutes": 5}``, ``{"working_days": 2}``)
    {"until": ms}                      an absolute instant

The engine resolves it once, against the run's logical clock and the deployment's calendars
(``runplane.core.engine.timers.resolve``), and journals the instant; nothing here reads a
clock.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

__all__ = ["Duration", "timer_request"]

# Seconds (int or float), a timedelta, or a calendar rule mapping.
Duration = int | float | dt.timedelta | Mapping[str, Any]


def timer_request(duration: Duration | None, until: int | None, calendar: str) -> dict[str, Any]:
    """The canonical request for a timer given by ``duration`` or ``until`` (exactly one)."""
    if (duration is None) == (until is None):
        raise ValueError("give a duration or an until instant (exactly one)")
    if until is not None:
        if isinstance(until, bool) or not isinstance(until, int) or until < 0:
            raise ValueError(f"until must be an instant in ms since the epoch, got {until!r}")
        return {"until": until}
    if isinstance(duration, Mapping):
        if not calendar.strip():
            raise ValueError("calendar must name a calendar")
        return {"rule": dict(duration), "calendar": calendar}
    if isinstance(duration, dt.timedelta):
        ms = round(duration.total_seconds() * 1000)
    elif isinstance(duration, int | float) and not isinstance(duration, bool):
        ms = round(duration * 1000)
    else:
        raise ValueError(f"a duration is seconds, a timedelta or a calendar rule, got {duration!r}")
    if ms < 0:
        raise ValueError(f"a duration cannot be negative, got {duration!r}")
    return {"ms": ms}
