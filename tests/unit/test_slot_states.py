"""One start per slot (``runplane.core.chain.SlotStates``): what the chain verifier refuses.

A slot (era, call_seq) is recorded at most once and its call started at most once, except the
two second starts the protocol makes itself (a call in doubt announced again; a repeat that is
harmless by its announce). ``tests/unit/test_forgery_readers.py`` holds every reader to the
verdict; here the rule itself, and the compact form the fold keeps, against a plain model.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.core.chain import NO_SLOTS, ChainFault, Draft, SlotStates, seal
from runplane.core.verify import verify_chain
from runplane.wire import ZERO_HASH, JournalKind, JournalRecord

pytestmark = pytest.mark.unit

SID = "r-slots"
DIGEST = "d" * 64
WITNESS = "a" * 64


def _rec(
    kind: JournalKind,
    call_seq: int | None,
    *,
    era: int = 0,
    family: str = "tool",
    digest: str | None = None,
    attrs: Mapping[str, str] | None = None,
    witness: str = WITNESS,
) -> JournalRecord:
    draft = Draft(
        SID,
        0,
        era,
        kind,
        1,
        call_seq=call_seq,
        family=family,
        name="tool://x",
        request_witness=witness,
        body_digest=digest,
        attrs=dict(attrs or {}),
    )
    return seal(draft, ZERO_HASH)


def announce(call_seq: int, **kw: object) -> JournalRecord:
    return _rec(JournalKind.EFFECT_ANNOUNCED, call_seq, **kw)  # type: ignore[arg-type]


def record(call_seq: int, **kw: object) -> JournalRecord:
    return _rec(JournalKind.EFFECT_RECORDED, call_seq, digest=DIGEST, **kw)  # type: ignore[arg-type]


def doubt(call_seq: int, **kw: object) -> JournalRecord:
    return _rec(JournalKind.EFFECT_IN_DOUBT, call_seq, **kw)  # type: ignore[arg-type]


def _fold(records: list[JournalRecord]) -> list[str | None]:
    """The fault (or None) at each record, the states advanced past every one."""
    states, faults = NO_SLOTS, []
    for r in records:
        fault = states.check(r)
        faults.append(None if fault is None else fault[1])
        states = states.after(r)
    return faults


def test_an_announce_and_its_record_are_one_start() -> None:
    assert _fold([announce(0), record(0), announce(1), record(1)]) == [None] * 4


@pytest.mark.parametrize(
    ("records", "at", "why"),
    [
        ([announce(0), announce(0)], 1, "a second announce of call 0/0"),
        ([announce(0), record(0), announce(0)], 2, "an announce of call 0/0, already recorded"),
        ([announce(0), record(0), record(0)], 2, "a record of call 0/0, already recorded"),
        ([record(3), record(3)], 1, "a record of call 0/3, already recorded"),
        # Harmless repeats must be the same call: another witness is another call.
        (
            [
                announce(0, attrs={"mutating": "false"}),
                announce(0, attrs={"mutating": "false"}, witness="b" * 64),
            ],
            1,
            "a second announce",
        ),
        # A mutating call announced as non-mutating the second time starts twice.
        ([announce(0), announce(0, attrs={"mutating": "false"})], 1, "a second announce"),
        (
            [announce(0, attrs={"child_key": "k1"}), announce(0, attrs={"child_key": "k2"})],
            1,
            "a second announce",
        ),
        # A doubt lets one more announce through, not two.
        ([announce(0), doubt(0), announce(0), announce(0)], 3, "a second announce"),
        # A doubt after the record reopens nothing.
        ([announce(0), record(0), doubt(0), announce(0)], 3, "already recorded"),
    ],
)
def test_a_second_start_or_record_of_one_slot_is_a_duplicate(
    records: list[JournalRecord], at: int, why: str
) -> None:
    faults = _fold(records)
    assert faults[:at] == [None] * at and faults[at] is not None and why in faults[at]
    assert all(f is None for f in faults[at + 1 :])


@pytest.mark.parametrize(
    "records",
    [
        # A call in doubt, announced again by its recovery (an operator's RETRY), twice over.
        [announce(0), doubt(0), announce(0), doubt(0), announce(0), record(0)],
        # A probe of the call in doubt is announced at the call's slot: it starts no call.
        [
            announce(0),
            doubt(0),
            announce(0, family="probe"),
            _rec(JournalKind.EFFECT_RECORDED, 0, family="probe"),
            announce(0),
            record(0),
        ],
        # Fan-out branches re-dispatched after a crash (non-mutating), a commission's child
        # asked again (admission starts it once), a case command sent again (applied once).
        [announce(0, attrs={"mutating": "false"})] * 2 + [record(0)],
        [announce(1, attrs={"child_key": "runplane.child/r/0/1"})] * 2 + [record(1)],
        [announce(2, attrs={"request_id": "r/0/2"})] * 2 + [record(2)],
        # Decisions before the result carry no body: the slot's result comes once.
        [
            _rec(JournalKind.TASK_OPENED, 0, family="approval"),
            _rec(JournalKind.TASK_DECIDED, 0, family="approval"),
            _rec(JournalKind.TASK_DECIDED, 0, family="approval", digest=DIGEST),
        ],
        # The same call_seq in two eras is two slots.
        [announce(0), record(0), announce(0, era=1), record(0, era=1)],
        # Records out of call order (fan-out outcomes applied in ready order, early answers).
        [announce(0), announce(1), announce(2), record(2), record(0), record(1)],
    ],
)
def test_the_protocols_own_second_starts_are_no_fault(records: list[JournalRecord]) -> None:
    assert _fold(records) == [None] * len(records)


def test_the_verifier_reports_a_duplicate_at_the_record_that_repeats() -> None:
    drafts = [
        Draft(SID, 0, 0, JournalKind.RUN_ADMITTED, 1),
        Draft(SID, 1, 0, JournalKind.EFFECT_ANNOUNCED, 1, call_seq=0, family="tool"),
        Draft(SID, 2, 0, JournalKind.EFFECT_ANNOUNCED, 1, call_seq=0, family="tool"),
    ]
    chain, prev = [], ZERO_HASH
    for d in drafts:
        chain.append(seal(d, prev))
        prev = chain[-1].hash
    check = verify_chain(chain)
    assert (check.ok, check.bad_seq, check.fault) == (False, 2, ChainFault.DUPLICATE_SLOT)


# -- the compact form against a plain model --------------------------------------------------

EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["announce", "repeatable", "doubt", "record"]),
        st.integers(0, 1),  # era
        st.integers(0, 6),  # call_seq
    ),
    max_size=60,
)


def _model(events: list[tuple[str, int, int]]) -> list[bool]:
    """The rule stated plainly, over an unbounded dict: which event is a duplicate."""
    state: dict[tuple[int, int], str] = {}
    faults = []
    for kind, era, c in events:
        now = state.get((era, c))
        if kind == "doubt":
            faults.append(False)
            if now != "recorded":
                state[(era, c)] = "doubted"
            continue
        if kind == "record":
            faults.append(now == "recorded")
            state[(era, c)] = "recorded"
            continue
        first = state.get((era, c))
        dup = first == "recorded" or (
            first is not None
            and first.startswith("announced")
            and not (kind == "repeatable" and first == "announced:repeatable")
        )
        faults.append(dup)
        if first is None or first == "doubted":
            state[(era, c)] = "announced:repeatable" if kind == "repeatable" else "announced"
    return faults


def _as_record(kind: str, era: int, c: int) -> JournalRecord:
    if kind == "announce":
        return announce(c, era=era)
    if kind == "repeatable":
        return announce(c, era=era, attrs={"mutating": "false"})
    if kind == "doubt":
        return doubt(c, era=era)
    return record(c, era=era)


@given(EVENTS)
def test_the_compact_states_judge_as_the_plain_rule(events: list[tuple[str, int, int]]) -> None:
    states: SlotStates = NO_SLOTS
    judged = []
    for e in events:
        rec = _as_record(*e)
        judged.append(states.check(rec) is not None)
        states = states.after(rec)
    assert judged == _model(events)
    # Compact: every recorded slot below an era's floor is out of the open map.
    for (era, c), (state, _) in states.open.items():
        assert c >= states.floors.get(era, 0), (era, c, state)
