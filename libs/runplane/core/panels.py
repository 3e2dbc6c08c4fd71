"""Panels of people: N worklist seats decided by a ``Quorum`` (issue 14 item 5). Pure.

``ctx.human_panel(question, answer, seats=…, approve_at=…, reject_at=None)`` opens one APPROVAL task per seat
(a seat is a name and the role that may decide it) and parks the run until the quorum rule is
decided — not necessarily until every seat is — then returns the ``Quorum``'s outcome:
``Approved``, ``Rejected`` or ``Split`` (never ``Pending``; ``Split`` has no majority).

Four-eyes holds across the panel, not only per task: the run's initiator decides no seat (the
worklist refuses it, the engine again), and one person counts on one seat only. The worklist
sees each seat as its own task, so it cannot stop a person who decided one seat from deciding
another; the engine does not count that second decision (journaled, ``counted=no``) and asks
the seat again with a new task. ``PanelState`` is that bookkeeping: which seat each open task
is, who decided which seat, the votes so far.

The engine side (opening, parking, journaling, replay) is ``runplane.core.engine.panels``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from runplane.core.effect import Effect, Op
from runplane.core.plan import Pending, Quorum, QuorumOutcome, Vote
from runplane.core.waits import Duration, timer_request
from runplane.errors import TerminalError

__all__ = [
    "MAX_SEATS",
    "PanelState",
    "Repeat",
    "outcome_from",
    "panel_effect",
    "panel_request",
    "seat_names",
    "task_ids",
]

# Seats a panel may have: each is a task on the worklist and a record in the journal.
MAX_SEATS: Final = 25


def seat_names(seats: Mapping[str, str] | Sequence[str]) -> dict[str, str]:
    """``{seat: role}``. A list of roles names each seat after its role (``role-1``,
    ``role-2`` … when a role sits more than once). ``ValueError`` for an unusable panel."""
    if isinstance(seats, Mapping):
        named = {str(k): str(v) for k, v in seats.items()}
    else:
        roles = [str(r) for r in seats]
        count: Counter[str] = Counter()
        named = {}
        for role in roles:
            count[role] += 1
            named[role if roles.count(role) == 1 else f"{role}-{count[role]}"] = role
    if not 1 <= len(named) <= MAX_SEATS:
        raise ValueError(f"a panel has 1..{MAX_SEATS} seats, got {len(named)}")
    for seat, role in named.items():
        # A seat's name ends its task id ("…/panel/<seat>"): no separators, nothing blank.
        if not seat.strip() or "/" in seat or len(seat) > 64:
            raise ValueError(f"a seat name is 1..64 characters without '/', got {seat!r}")
        if not role.strip():
            raise ValueError(f"seat {seat!r} names no role")
    return named


def panel_request(
    question: str,
    answer: Any,
    seats: Mapping[str, str] | Sequence[str],
    approve_at: int,
    reject_at: int | None,
) -> dict[str, Any]:
    """The panel's request (its witness): validated here, so a bad panel fails at the call.
    ``reject_at`` defaults to the fewest rejections that make approval impossible."""
    named = seat_names(seats)
    reject = len(named) - approve_at + 1 if reject_at is None else reject_at
    try:
        Quorum(frozenset(named), approve_at, reject)
    except TerminalError as exc:
        raise ValueError(str(exc)) from None
    return {
        "question": question,
        "answer": answer,
        "seats": named,
        "approve_at": approve_at,
        "reject_at": reject,
    }


def panel_effect(
    question: str,
    answer: Any,
    *,
    seats: Mapping[str, str] | Sequence[str],
    approve_at: int,
    reject_at: int | None = None,
    timeout: Duration | None = None,
    calendar: str = "wall",
) -> Effect:
    """``ctx.human_panel``: the panel as an effect (family ``approval``, op ``Op.PANEL``).
    ``timeout``: a durable timeout of the run's own, as on ``ctx.approval`` (``WaitTimedOut``
    past it; the seats still open are withdrawn)."""
    request = panel_request(question, answer, seats, approve_at, reject_at)
    if timeout is not None:  # only when set: panels without one keep their witness
        request["timeout"] = timer_request(timeout, None, calendar)
    return Effect("approval", "panel", request, Op.PANEL)


def outcome_from(raw: Any) -> QuorumOutcome:
    """The agent's value for a recorded panel result: the quorum's outcome, recomputed from
    the recorded votes (so the record cannot say one thing and the votes another)."""
    outcome = Quorum.from_json(raw["quorum"]).outcome
    if isinstance(outcome, Pending):
        raise TerminalError("a recorded panel result is still pending")
    return outcome


def task_ids(ref: str, open_ref: str | None, open_value: Any) -> list[str]:
    """The worklist tasks behind a wait on ``ref``: a panel's open seats when the run's open
    request (``open_ref``, ``open_value``) is that panel, else the task ``ref`` itself."""
    if open_ref == ref and PanelState.is_panel(open_value):
        return sorted(str(t) for t in open_value["open"].values())
    return [ref]


@dataclass(frozen=True)
class Repeat:
    """A decision that does not count: its principal already decided seat ``seat_decided``."""

    principal: str
    seat_decided: str


@dataclass(frozen=True)
class PanelState:
    """The panel's bookkeeping between decisions (kept in the run's open request).

    ``open``: seat → the task id that currently asks it; ``deciders``: seat → who decided it
    (counted decisions only); ``asks``: seat → how many times it was asked again."""

    quorum: Quorum
    roles: Mapping[str, str]
    open: Mapping[str, str]
    deciders: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    asks: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if set(self.roles) != set(self.quorum.panel):
            raise TerminalError("a panel's seats and its quorum differ")
        voted = {v.voter for v in self.quorum.votes}
        if set(self.deciders) != voted or set(self.open) & voted:
            raise TerminalError("a seat is open, or decided, not both")
        counted = [p for ps in self.deciders.values() for p in ps]
        if len(set(counted)) != len(counted):
            raise TerminalError("one person counts on one seat only")

    @classmethod
    def opened(cls, request: Mapping[str, Any], task_ids: Mapping[str, str]) -> PanelState:
        roles = dict(request["seats"])
        quorum = Quorum(frozenset(roles), int(request["approve_at"]), int(request["reject_at"]))
        return cls(quorum, roles, dict(task_ids))

    def seat_of(self, task_id: str) -> str | None:
        return next((s for s, t in self.open.items() if t == task_id), None)

    def repeat(self, principals: Sequence[str]) -> Repeat | None:
        """Whether one of ``principals`` already counts on another seat."""
        for seat, who in sorted(self.deciders.items()):
            for principal in principals:
                if principal in who:
                    return Repeat(principal, seat)
        return None

    def vote(self, seat: str, principals: Sequence[str], approve: bool, comment: str) -> PanelState:
        """Count the decision of ``principals`` on the open ``seat``."""
        if seat not in self.open:
            raise TerminalError(f"seat {seat!r} is not open")
        if self.repeat(principals) is not None:
            raise TerminalError("a decider who counts on another seat does not count again")
        who = tuple(sorted({p for p in principals if p.strip()}))
        if not who:
            raise TerminalError("a seat is decided by somebody")
        return PanelState(
            self.quorum.vote(Vote(seat, approve, comment)),
            self.roles,
            {s: t for s, t in self.open.items() if s != seat},
            {**self.deciders, seat: who},
            self.asks,
        )

    def ask_again(self, seat: str, task_id: str) -> PanelState:
        """``seat`` is asked again under ``task_id`` (its last decision did not count)."""
        if seat not in self.open:
            raise TerminalError(f"seat {seat!r} is not open")
        return PanelState(
            self.quorum,
            self.roles,
            {**self.open, seat: task_id},
            self.deciders,
            {**self.asks, seat: self.asks.get(seat, 0) + 1},
        )

    @property
    def outcome(self) -> QuorumOutcome:
        return self.quorum.outcome

    def to_json(self) -> dict[str, Any]:
        return {
            "panel": True,
            "quorum": self.quorum.to_json(),
            "roles": dict(self.roles),
            "open": dict(self.open),
            "deciders": {s: list(p) for s, p in self.deciders.items()},
            "asks": dict(self.asks),
        }

    @classmethod
    def from_json(cls, data: Any) -> PanelState:
        try:
            return cls(
                Quorum.from_json(data["quorum"]),
                {str(k): str(v) for k, v in data["roles"].items()},
                {str(k): str(v) for k, v in data["open"].items()},
                {str(k): tuple(map(str, v)) for k, v in data["deciders"].items()},
                {str(k): int(v) for k, v in data["asks"].items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TerminalError(f"not a panel's state: {exc}") from None

    @staticmethod
    def is_panel(value: Any) -> bool:
        return isinstance(value, Mapping) and value.get("panel") is True
