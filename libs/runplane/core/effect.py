"""An effect, the leaf every module of the agent's door and of the engine builds on.

What an agent issues — an ``Effect`` (one journaled call) routed by its ``Op`` — and what it
gets back besides plain values: the errors it may catch (``EffectError`` and its kinds), a
human ``Decision``, a ``CaseState``, and the duration helpers its waits and deadlines take.

It imports nothing of ``runplane.core``, so ``StepCtx`` (``ctx``), the effects built beside
it (groups, panels, plans, releases) and the engine's families all import it at load time
without a cycle. Re-exported by ``runplane.core``, the front door.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from runplane.errors import RunplaneError

__all__ = [
    "ApprovalExpired",
    "CaseConflict",
    "CaseRefused",
    "CaseState",
    "Decision",
    "Effect",
    "EffectError",
    "Op",
    "RunCancelled",
    "WaitTimedOut",
    "days",
    "hours",
    "minutes",
    "working_days",
]


class Op(StrEnum):
    """Which engine handler an ``Effect`` goes to (the engine's registry maps each to one).
    Not on the wire: the family and name are; an op only routes inside the engine."""

    LIVE = "live"  # a generation or a tool: performed by the executor
    OBSERVE = "observe"
    CHECKPOINT = "checkpoint"
    SIGNAL = "signal"
    APPROVAL = "approval"
    CASE_GET = "case_get"
    CASE_PUT = "case_put"
    DEADLINE = "deadline"
    DEADLINE_MEET = "deadline_meet"
    DEADLINE_CANCEL = "deadline_cancel"
    CASE_CLOSE = "case_close"
    SLEEP = "sleep"  # a durable timer (runplane.core.engine.timers)
    CONTINUE_AS_NEW = "continue_as_new"  # end, and start a linked successor (engine.successor)
    BRANCH = "branch"  # one branch of a fan-out: dispatched, not awaited (engine/fanout.py)
    JOIN = "join"  # waits for every branch of a fan-out
    RELEASE = "release"  # runplane.core.engine.release
    PANEL = "panel"  # a panel of people on the worklist (runplane.core.engine.panels)
    UPDATE = "update"  # the next accepted update of a name (runplane.core.engine.updates)
    ANSWER = "answer"  # an update's answer, back to its caller (runplane.core.engine.updates)

    # Enum's own __hash__ is a Python function; an op is a dict key once or twice per effect,
    # and equal to its str value, so the str's hash is the right one (and a C call).
    __hash__ = str.__hash__


@dataclass(eq=False)
class Effect:
    """One journaled call, as the agent issues it.

    ``request`` is the decoded request body (its witness is what replay compares);
    ``op`` selects the engine's handler; ``options`` carries what the handler needs but is not
    part of the request identity (recovery, retry policy, the observe callback, …).
    """

    family: str
    name: str
    request: Any
    op: Op
    options: Mapping[str, Any] = field(default_factory=dict)

    def __await__(self) -> Generator[Effect, Any, Any]:
        # The driver sends back the value the agent sees (or throws the recorded error).
        return (yield self)


class EffectError(RunplaneError):
    """A recorded failure of an effect, re-raised identically on every replay.

    ``type`` is the failure's class name as recorded, ``retryable`` whether the failure was
    transient when it happened (retries were already spent live).
    """

    def __init__(self, type_: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(f"{type_}: {message}")
        self.type = type_
        self.message = message
        self.retryable = retryable


class CaseConflict(EffectError):
    """``put_case_state`` was refused: the case moved. ``version`` is its current version."""

    def __init__(self, version: int, reason: str) -> None:
        super().__init__("CaseConflict", reason)
        self.version = version


class CaseRefused(EffectError):
    """The cases service refused a case command; ``reason`` says why (e.g. a deadline on a
    closed case, meeting an obligation that does not exist, an obligation already open with
    another due instant). Recorded like any failure: a replay raises it again, never re-asks."""

    def __init__(self, reason: str) -> None:
        super().__init__("CaseRefused", reason)
        self.reason = reason


class ApprovalExpired(EffectError):
    """The approval task expired and the agent declared ``on_expiry="fail"``."""


class WaitTimedOut(EffectError):
    """A ``wait_signal`` or ``approval`` with a ``timeout`` reached its journaled instant
    first. Recorded at the wait's slot: a replay raises it again at the same place."""


class RunCancelled(EffectError):
    """An operator cancelled the run (``runplane runs cancel``). Raised at the effect the
    agent waits on (or the next one it issues): effect groups reverse what they left standing,
    ``finally`` blocks run, and the agent may catch it to clean up with more effects. However
    the agent then ends, the run ends RUN_CANCELLED."""


@dataclass(frozen=True)
class Decision:
    """A human decision on ``ctx.approval``. ``approved`` is True for APPROVED and for an
    unattended EXPIRED_PROCEEDED; ``decided_by`` is empty for the latter."""

    outcome: str
    approved: bool
    comment: str = ""
    decided_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class CaseState:
    """A case's state and the version to pass to ``put_case_state``."""

    state: Any
    version: int


def minutes(n: int) -> dict[str, int]:
    return {"minutes": n}


def hours(n: int) -> dict[str, int]:
    return {"hours": n}


def days(n: int) -> dict[str, int]:
    return {"days": n}


def working_days(n: int) -> dict[str, int]:
    return {"working_days": n}
