"""The replay decision, case by case: what one slot holds for the call the agent issues now.

``decide_slot`` is pure; each row gives the slot's facts and the case the driver must act on.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from runplane.core.agents import Recovery
from runplane.core.chain import default_label
from runplane.core.engine.replay import SlotCase, decide_slot, describe_slot, divergence
from runplane.core.engine.values import InFlight
from runplane.wire import ParkedOn, ParkKind, ResultEntry

W = "ab" * 32
OTHER = "cd" * 32
CALL = ("tool", "tool://charge", W)


def entry(family: str = "tool", name: str = "tool://charge", witness: str = W) -> ResultEntry:
    return ResultEntry(
        session_id="r-1",
        era=0,
        call_seq=3,
        family=family,
        name=name,
        request_witness=witness,
        ok=True,
        value_json="1",
        error=None,
        stamp_ms=1,
        attempts=1,
        body_digest="ef" * 32,
        label=default_label(["agent/t"]),
    )


def flight(call_seq: int = 3, witness: str = W, era: int = 0) -> InFlight:
    return InFlight(era, call_seq, "tool", "tool://charge", witness, Recovery.REQUIRES_OPERATOR)


def park(kind: ParkKind, call_seq: int = 3, era: int = 0) -> ParkedOn:
    return ParkedOn(kind=kind, ref="x", call_seq=call_seq, era=era)


@dataclass(frozen=True)
class Row:
    why: str
    expect: SlotCase
    entry: ResultEntry | None = None
    in_flight: InFlight | None = None
    parked: ParkedOn | None = None
    later: bool = False
    verify_only: bool = False


ROWS = [
    Row("recorded, same call", SlotCase.REPLAY, entry=entry()),
    Row("recorded, same call, even when verifying", SlotCase.REPLAY, entry(), verify_only=True),
    Row("recorded, other witness", SlotCase.DIVERGED, entry=entry(witness=OTHER)),
    Row("recorded, other name", SlotCase.DIVERGED, entry=entry(name="tool://refund")),
    Row("recorded, other family", SlotCase.DIVERGED, entry=entry(family="observe")),
    Row("verifying past the history", SlotCase.HISTORY_ENDS, verify_only=True),
    Row("announced, no outcome", SlotCase.IN_DOUBT, in_flight=flight()),
    Row("announced with another call", SlotCase.DIVERGED, in_flight=flight(witness=OTHER)),
    Row(
        "announced, operator task open on it",
        SlotCase.OPERATOR,
        in_flight=flight(),
        parked=park(ParkKind.OPERATOR),
    ),
    Row(
        "announced, parked on an operator task elsewhere",
        SlotCase.IN_DOUBT,
        in_flight=flight(),
        parked=park(ParkKind.OPERATOR, call_seq=1),
    ),
    Row("announced at another slot", SlotCase.FRESH, in_flight=flight(call_seq=2)),
    Row("announced in another era", SlotCase.FRESH, in_flight=flight(era=1)),
    Row("parked here on a signal", SlotCase.PARKED, parked=park(ParkKind.SIGNAL)),
    Row("parked here on a task", SlotCase.PARKED, parked=park(ParkKind.TASK)),
    Row("parked here on a case reply", SlotCase.PARKED, parked=park(ParkKind.CASE_REPLY)),
    Row("parked at another slot", SlotCase.FRESH, parked=park(ParkKind.SIGNAL, call_seq=5)),
    Row("parked in another era", SlotCase.FRESH, parked=park(ParkKind.TASK, era=1)),
    Row("empty, later slots recorded", SlotCase.GAP, later=True),
    Row("empty", SlotCase.FRESH),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.why for r in ROWS])
def test_each_slot_decides_one_case(row: Row) -> None:
    decision = decide_slot(
        0, 3, CALL, row.entry, row.in_flight, row.parked, row.later, row.verify_only
    )
    assert decision.case is row.expect
    # A case that ends the run says why; the others need no words.
    ends = {SlotCase.DIVERGED, SlotCase.HISTORY_ENDS, SlotCase.GAP}
    assert bool(decision.diagnostic) == (row.expect in ends)


def test_every_case_has_a_row() -> None:
    assert {r.expect for r in ROWS} == set(SlotCase)


def test_a_divergence_is_positioned_and_names_both_calls() -> None:
    decision = decide_slot(2, 7, CALL, entry(witness=OTHER), None, None, False, False)
    assert decision.diagnostic == (
        f"non-determinism at era 2 call_seq 7: history has tool:tool://charge (witness "
        f"{OTHER[:12]}), agent issued tool:tool://charge (witness {W[:12]})"
    )
    assert decision.diagnostic == divergence(
        2, 7, f"tool:tool://charge (witness {W[:12]})", describe_slot(entry(witness=OTHER), None, 7)
    )


def test_a_verifying_replay_says_where_the_history_ends() -> None:
    decision = decide_slot(0, 4, CALL, None, None, None, False, True)
    assert decision.diagnostic == (
        "history ends at era 0 call_seq 4: agent issued tool:tool://charge, which was never recorded"
    )


def test_describe_slot_names_an_announce_and_a_park() -> None:
    assert describe_slot(None, flight(), 3) == (f"tool:tool://charge (announced, witness {W[:12]})")
    assert describe_slot(None, None, 3) == "a parked call"
