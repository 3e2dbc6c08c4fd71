"""Panel and batch outcomes as types that cannot say the unsafe thing. Pure.

- A ``Quorum`` of N reviewers (people on the worklist, or agents) decides when ``approve_at``
  approvals or ``reject_at`` rejections are in; ``approve_at + reject_at > N``, so both cannot
  happen. Its outcome is ``Approved``, ``Rejected``, ``Pending`` (votes can still decide it)
  or ``Split`` — every vote is in and neither threshold was reached. ``Split`` carries who
  voted which way and has **no** majority accessor: "pick the side with more votes" is not
  something a caller can do by accident.
- A batch of commissions ends ``AllSucceeded``, ``AllFailed`` or ``PartiallyFailed``; there
  is no ``Succeeded`` for partial success, so "mostly worked" cannot be reported as success.

Both deserialize through their constructors (a panel needing nobody, a vote from outside the
panel, a partial failure with no failure are read errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runplane.errors import TerminalError

__all__ = [
    "AllFailed",
    "AllSucceeded",
    "Approved",
    "BatchStatus",
    "PartiallyFailed",
    "Pending",
    "Quorum",
    "QuorumOutcome",
    "Rejected",
    "Split",
    "Vote",
    "batch_status",
]


@dataclass(frozen=True)
class Vote:
    voter: str
    approve: bool
    comment: str = ""


@dataclass(frozen=True)
class Approved:
    approvers: tuple[str, ...]


@dataclass(frozen=True)
class Rejected:
    rejecters: tuple[str, ...]


@dataclass(frozen=True)
class Pending:
    missing: int


@dataclass(frozen=True)
class Split:
    """Every vote is in, neither threshold reached. Deliberately no ``majority``."""

    approvers: tuple[str, ...]
    rejecters: tuple[str, ...]


QuorumOutcome = Approved | Rejected | Pending | Split


@dataclass(frozen=True)
class Quorum:
    """A panel (its members, by name), its thresholds and the votes cast so far."""

    panel: frozenset[str]
    approve_at: int
    reject_at: int
    votes: tuple[Vote, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "panel", frozenset(self.panel))
        n = len(self.panel)
        if n < 1 or not 1 <= self.approve_at <= n or not 1 <= self.reject_at <= n:
            raise TerminalError(f"a quorum needs 1..{n} approvals and rejections, panel of {n}")
        if self.approve_at + self.reject_at <= n:
            raise TerminalError(
                "approve_at + reject_at must exceed the panel, or both could be reached"
            )
        voters = [v.voter for v in self.votes]
        if len(set(voters)) != len(voters):
            raise TerminalError("a panel member votes once")
        if set(voters) - self.panel:
            raise TerminalError(f"votes from outside the panel: {sorted(set(voters) - self.panel)}")

    def vote(self, vote: Vote) -> Quorum:
        return Quorum(self.panel, self.approve_at, self.reject_at, (*self.votes, vote))

    @property
    def outcome(self) -> QuorumOutcome:
        yes = tuple(sorted(v.voter for v in self.votes if v.approve))
        no = tuple(sorted(v.voter for v in self.votes if not v.approve))
        if len(yes) >= self.approve_at:
            return Approved(yes)
        if len(no) >= self.reject_at:
            return Rejected(no)
        missing = len(self.panel) - len(self.votes)
        # Can the missing votes still reach either threshold?
        if missing and (
            len(yes) + missing >= self.approve_at or len(no) + missing >= self.reject_at
        ):
            return Pending(missing)
        return Split(yes, no)

    def to_json(self) -> dict[str, Any]:
        return {
            "panel": sorted(self.panel),
            "approve_at": self.approve_at,
            "reject_at": self.reject_at,
            "votes": [
                {"voter": v.voter, "approve": v.approve, "comment": v.comment} for v in self.votes
            ],
        }

    @classmethod
    def from_json(cls, data: Any) -> Quorum:
        try:
            votes = tuple(
                Vote(str(v["voter"]), bool(v["approve"]), str(v.get("comment", "")))
                for v in data["votes"]
            )
            return cls(
                frozenset(map(str, data["panel"])),
                int(data["approve_at"]),
                int(data["reject_at"]),
                votes,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TerminalError(f"not a quorum record: {exc}") from None


@dataclass(frozen=True)
class AllSucceeded:
    results: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not self.results:
            raise TerminalError("an empty batch did not succeed")


@dataclass(frozen=True)
class AllFailed:
    failures: Mapping[str, str]

    def __post_init__(self) -> None:
        if not self.failures:
            raise TerminalError("AllFailed needs failures")


@dataclass(frozen=True)
class PartiallyFailed:
    """Some succeeded, some failed — never reported as success."""

    results: Mapping[str, Any] = field(default_factory=dict)
    failures: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.results or not self.failures:
            raise TerminalError("a partial failure has both successes and failures")


BatchStatus = AllSucceeded | AllFailed | PartiallyFailed


def batch_status(results: Mapping[str, Any], failures: Mapping[str, str]) -> BatchStatus:
    """The status of a batch whose members each either succeeded or failed (not both)."""
    if set(results) & set(failures):
        raise TerminalError(
            f"members both succeeded and failed: {sorted(set(results) & set(failures))}"
        )
    if not failures:
        return AllSucceeded(dict(results))
    if not results:
        return AllFailed(dict(failures))
    return PartiallyFailed(dict(results), dict(failures))
