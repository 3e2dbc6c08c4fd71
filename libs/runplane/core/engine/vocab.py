"""The engine's operation vocabulary: what a handler answers (a closed ``Resolution``), what
a suspended run waits for (``WaitKind``, ``Wait``), the slot an effect takes (``Slot``) and
the calendar lookup deadlines need (``Calendars``)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final, NamedTuple, Protocol

from runplane.core.agents import EffectDecl, Recovery
from runplane.core.effect import Effect
from runplane.core.limits import DEFAULT_LIMITS
from runplane.errors import TerminalError

__all__ = [
    "GENERATION_DECL",
    "MAX_BUFFERED_SIGNALS",
    "SUSPEND",
    "Calendars",
    "Diverged",
    "Rejected",
    "Resolution",
    "Slot",
    "Suspend",
    "Throw",
    "Value",
    "Wait",
    "WaitKind",
]

# Signals sent before the run waits for them, kept in its snapshot; more are refused.
MAX_BUFFERED_SIGNALS: Final = DEFAULT_LIMITS.max_buffered_signals
GENERATION_DECL: Final = EffectDecl(
    "generation", mutating=False, recovery=Recovery.RETRY, timeout_s=120.0
)


class Value(NamedTuple):
    """Resume the agent with this value."""

    value: Any


class Throw(NamedTuple):
    """Resume the agent by raising this error at its ``await``."""

    error: BaseException


class Suspend:
    """Keep the agent suspended: the answer comes later (a live call, a park)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SUSPEND"


SUSPEND: Final = Suspend()
Resolution = Value | Throw | Suspend


class Rejected(NamedTuple):
    """An inbox event that does not apply to the run (nothing else happens in its step).
    ``kind``: a typed code for metrics when it is more than "does not apply"."""

    reason: str
    kind: str | None = None


class WaitKind(StrEnum):
    """What a suspended run waits for."""

    LIVE = "live"  # the outcome of a live call
    PROBE = "probe"  # the probe of a call in doubt
    DOUBT = "doubt"  # a call in doubt's deadline, before its probe may ask (doubt.in_doubt)
    SIGNAL = "signal"
    APPROVAL = "approval"
    OPERATOR = "operator"  # an operator's verdict on a call in doubt
    CASE = "case"  # a case command's reply
    TIMER = "timer"  # a durable timer's instant (ctx.sleep)
    FANOUT = "fanout"  # every branch of a fan-out (fanout.join)


class Slot(NamedTuple):
    """One effect at its place in the era: what was issued, where, and its request witness."""

    effect: Effect
    call_seq: int
    witness: str


class Wait(NamedTuple):
    """What the suspended coroutine waits for. ``value``: a case wait's OpenRequest value (a
    deadline's resolved instant)."""

    kind: WaitKind
    slot: Slot
    decl: EffectDecl | None = None
    value: Any = None


class Calendars(Protocol):
    """The calendar lookup ``ctx.deadline`` needs (``CalendarRegistry`` is one)."""

    def resolve(self, name: str, rule: Mapping[str, Any], start_ms: int) -> tuple[int, str]: ...


class Diverged(TerminalError):
    """Internal: a divergence was found; carries the positioned diagnostic."""
