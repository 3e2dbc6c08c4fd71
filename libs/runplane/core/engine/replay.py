"""The replay decision: what one slot of the era holds for the effect the agent issues now.

Pure — it reads values and returns a ``SlotDecision``; the driver acts on it. The three-way
branch (replay, in doubt, live), with the cases a resident run adds:

- ``REPLAY``: the slot is recorded with the same (family, name, witness): serve the record.
- ``DIVERGED``: the slot holds another call (recorded or announced): quarantine, with a
  positioned diagnostic; the call is never answered.
- ``HISTORY_ENDS``: a verifying replay (``replay_history``) asks past the recorded history.
- ``OPERATOR``: the call is in doubt and an operator task is already open for it: wait again.
- ``IN_DOUBT``: announced with no outcome: its declared recovery runs.
- ``PARKED``: the run is parked on this slot (its command was sent): wait again.
- ``GAP``: nothing here but later slots are recorded (a derived draw moved): diverged.
- ``FRESH``: nothing recorded: the era's carried state (side-effect log, doubts, open
  request) and then the live handler of the effect's op decide.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from runplane.core.engine.values import InFlight
from runplane.wire import ParkedOn, ParkKind, ResultEntry

__all__ = ["SlotCase", "SlotDecision", "decide_slot", "describe_slot", "divergence"]


class SlotCase(StrEnum):
    REPLAY = "replay"
    DIVERGED = "diverged"
    HISTORY_ENDS = "history_ends"
    OPERATOR = "operator"
    IN_DOUBT = "in_doubt"
    PARKED = "parked"
    GAP = "gap"
    FRESH = "fresh"


class SlotDecision(NamedTuple):
    case: SlotCase
    diagnostic: str = ""  # DIVERGED, HISTORY_ENDS, GAP: why (the quarantine reason)


# The decisions without a diagnostic, built once: one is taken per effect the agent awaits.
_REPLAY = SlotDecision(SlotCase.REPLAY)
_FRESH = SlotDecision(SlotCase.FRESH)
_IN_DOUBT = SlotDecision(SlotCase.IN_DOUBT)
_OPERATOR = SlotDecision(SlotCase.OPERATOR)
_PARKED = SlotDecision(SlotCase.PARKED)


def decide_slot(
    era: int,
    call_seq: int,
    issued: tuple[str, str, str],
    entry: ResultEntry | None,
    in_flight: InFlight | None,
    parked: ParkedOn | None,
    later_recorded: bool,
    verify_only: bool,
) -> SlotDecision:
    """Decide slot (``era``, ``call_seq``) for the call ``issued`` = (family, name, witness).
    Positional: it runs once per effect the agent awaits.

    ``entry``: the result recorded there; ``in_flight``/``parked``: the run's announced call
    and park; ``later_recorded``: the era has a result past this slot; ``verify_only``:
    replaying a history to check it, never extending it.
    """
    family, name, _ = issued
    if entry is not None:
        if (entry.family, entry.name, entry.request_witness) == issued:
            return _REPLAY
        return _diverged(era, call_seq, issued, describe_slot(entry, in_flight, call_seq))
    if verify_only:
        return SlotDecision(
            SlotCase.HISTORY_ENDS,
            f"history ends at era {era} call_seq {call_seq}: agent issued {family}:{name}, which was never recorded",
        )
    if in_flight is not None and in_flight.era == era and in_flight.call_seq == call_seq:
        if in_flight.key() != issued:
            return _diverged(era, call_seq, issued, describe_slot(None, in_flight, call_seq))
        if parked is not None and parked.kind is ParkKind.OPERATOR and parked.call_seq == call_seq:
            return _OPERATOR
        return _IN_DOUBT
    if parked is not None and parked.era == era and parked.call_seq == call_seq:
        return _PARKED
    if later_recorded:
        return SlotDecision(
            SlotCase.GAP,
            divergence(
                era,
                call_seq,
                f"{family}:{name}",
                "no journaled call (a derived draw) but later calls",
            ),
        )
    return _FRESH


def _diverged(era: int, call_seq: int, issued: tuple[str, str, str], recorded: str) -> SlotDecision:
    family, name, witness = issued
    return SlotDecision(
        SlotCase.DIVERGED,
        divergence(era, call_seq, f"{family}:{name} (witness {witness[:12]})", recorded),
    )


def divergence(era: int, call_seq: int, issued: str, recorded: str) -> str:
    """The positioned diagnostic of a divergence (the quarantine reason)."""
    return f"non-determinism at era {era} call_seq {call_seq}: history has {recorded}, agent issued {issued}"


def describe_slot(entry: ResultEntry | None, in_flight: InFlight | None, call_seq: int) -> str:
    """What history holds at a slot, for a diagnostic."""
    if entry is not None:
        return f"{entry.family}:{entry.name} (witness {entry.request_witness[:12]})"
    if in_flight is not None and in_flight.call_seq == call_seq:
        return f"{in_flight.family}:{in_flight.name} (announced, witness {in_flight.witness[:12]})"
    return "a parked call"
