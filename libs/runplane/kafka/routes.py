"""Where each command a run's step emits goes: its logical topic, its key, how it is written.

One table, read by the executor's outbox (which produces the command there) and by the test
``Driver`` (which hands it to the in-memory stand-in of the service reading that topic), so
the two cannot disagree about where a command lands. Every member of the engine's
``Command`` union has exactly one row; a union that grows without a row here fails at
import, not by a command lost at run time (a lost command strands a run).

It lives in ``runplane.kafka`` because it is Kafka topology (topic and key), which the engine
below it does not know, and both the executor and ``runplane.testing`` sit above it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from types import MappingProxyType
from typing import Any, get_args

from runplane.core.engine import Command
from runplane.errors import TerminalError
from runplane.wire import (
    TOPIC_RECORDS,
    AdmissionRequest,
    CancelDeadline,
    CloseCase,
    CloseTask,
    GetCaseState,
    JournalRecord,
    MeetDeadline,
    OpenTask,
    PutCaseState,
    Record,
    RegisterDeadline,
    RunStatusUpdate,
    Signal,
    StartRun,
    UpdateAnswer,
)

__all__ = ["ROUTES", "Route", "route"]


@dataclass(frozen=True, slots=True)
class Route:
    """One command type's destination.

    ``last_wins``: only the newest record per key in one transaction matters to the reader
    (admission keeps a run's latest status), so a newer one replaces the older in the batch.
    ``signed``: the reader checks the emitter's signature (admission, for a child run)."""

    topic: str
    key: Callable[[Any], str]
    last_wins: bool = False
    signed: bool = False


_BY_TASK = attrgetter("task_id")
_BY_CASE = attrgetter("case_id")
_BY_SESSION = attrgetter("session_id")
_BY_ADMISSION = attrgetter("admission_key")

ROUTES: Mapping[type[Record], Route] = MappingProxyType(
    {
        OpenTask: Route("tasks.commands", _BY_TASK),
        CloseTask: Route("tasks.commands", _BY_TASK),  # a task withdrawn (an era, an end)
        GetCaseState: Route("cases.commands", _BY_CASE),
        PutCaseState: Route("cases.commands", _BY_CASE),
        RegisterDeadline: Route("cases.commands", _BY_CASE),
        MeetDeadline: Route("cases.commands", _BY_CASE),
        CancelDeadline: Route("cases.commands", _BY_CASE),
        CloseCase: Route("cases.commands", _BY_CASE),
        # Nobody can read the RUNNING of a run whose COMPLETED commits with it: a run that
        # starts and ends in one batch costs admission one record instead of two.
        RunStatusUpdate: Route("admission", _BY_ADMISSION, last_wins=True),
        AdmissionRequest: Route("admission", _BY_ADMISSION, signed=True),  # a child run
        JournalRecord: Route("journal", _BY_SESSION),  # a successor's seq 0 (continue-as-new)
        StartRun: Route("runs.inbox", _BY_SESSION),  # a successor's start, on its partition
        Signal: Route("runs.inbox", _BY_SESSION),  # a child's result, to its parent
        UpdateAnswer: Route("runs.updates", attrgetter("update_id")),  # to the caller waiting
    }
)


def route(command: Record) -> Route:
    """The row of ``command``'s type; ``TerminalError`` for a record that is no command."""
    found = ROUTES.get(type(command))
    if found is None:
        # Losing a command silently would strand a run: stop, and let the supervisor show it.
        raise TerminalError(f"no route for command {type(command).__name__}")
    return found


def _check() -> None:
    commands = set(get_args(Command))
    if commands != set(ROUTES):
        missing = sorted(c.__name__ for c in commands - set(ROUTES))
        extra = sorted(c.__name__ for c in set(ROUTES) - commands)
        raise TypeError(
            f"command routes out of step with Command: missing {missing}, extra {extra}"
        )
    for kind, row in ROUTES.items():
        if kind not in TOPIC_RECORDS[row.topic]:
            raise TypeError(f"{kind.__name__} is routed to {row.topic}, which does not carry it")


_check()
