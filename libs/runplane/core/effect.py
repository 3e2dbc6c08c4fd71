"""What agent code gets back from ``StepCtx`` besides plain values: the errors it may catch
(``EffectError`` and its kinds), a human ``Decision``, a ``CaseState``, and the duration
helpers its waits and deadlines take. Re-exported by ``runplane.core.ctx`` and
``runplane.core``; kept apart so the door itself (``ctx``) stays about the door.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runplane.errors import RunplaneError

__all__ = [
    "ApprovalExpired",
    "CaseConflict",
    "CaseRefused",
    "CaseState",
    "Decision",
    "EffectError",
    "RunCancelled",
    "WaitTimedOut",
    "days",
    "hours",
    "minutes",
    "working_days",
]


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
