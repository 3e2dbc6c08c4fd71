"""The sweeper's pure core: what is indexed, what a tick decides, and that decisions are
named from the obligation (so repeats are duplicates to the cases service)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.core.keys import followup_admission_key, sweep_run_id
from runplane.wire import (
    BreachDeadline,
    CaseRecord,
    Obligation,
    ObligationStatus,
    WarnDeadline,
)
from services.cases.decide import evaluate
from services.sweeper.decide import Entry, decide_tick, entries_for

pytestmark = pytest.mark.unit

HOUR = 3_600_000
DUE = 10 * 86_400_000


def obligation(name: str, status: ObligationStatus, warn: int | None = DUE - HOUR) -> Obligation:
    return Obligation(
        name=name,
        due_ms=DUE,
        warn_ms=warn,
        calendar="wall",
        calendar_digest="00" * 32,
        rule_json='{"days": 1}',
        on_breach="escalate",
        status=status,
        registered_by="s-1",
        updated_ms=0,
    )


def case(*obs: Obligation, closed: bool = False) -> CaseRecord:
    return CaseRecord(
        case_id="c-1", version=0, state_json="{}", obligations=obs, closed=closed, updated_ms=0
    )


def test_entries_follow_the_status() -> None:
    entries = entries_for(
        case(
            obligation("open", ObligationStatus.OPEN),
            obligation("open-nowarn", ObligationStatus.OPEN, warn=None),
            obligation("warned", ObligationStatus.WARNED),
            obligation("met", ObligationStatus.MET),
            obligation("cancelled", ObligationStatus.CANCELLED),
            obligation("breached", ObligationStatus.BREACHED),
        )
    )
    assert sorted((e.name, e.action, e.at_ms) for e in entries) == [
        ("open", "breach", DUE),
        ("open", "warn", DUE - HOUR),
        ("open-nowarn", "breach", DUE),
        ("warned", "breach", DUE),
    ]
    assert entries_for(None) == []


def test_member_round_trips() -> None:
    e = Entry(5, "c/1:x", 'na"me', 9, "warn")
    assert Entry.from_member(e.member, 5) == e


def test_tick_before_warn_does_nothing_then_warns_then_breaches() -> None:
    entries = entries_for(case(obligation("a", ObligationStatus.OPEN)))
    assert decide_tick(entries, DUE - HOUR - 1) == []
    ((entry, warn),) = decide_tick(entries, DUE - 1)
    assert entry.action == "warn" and isinstance(warn, WarnDeadline) and warn.due_ms == DUE
    decisions = decide_tick(entries, DUE)
    # At due time the warning is moot: dropped (None), and the breach is decided.
    assert [(e.action, type(c).__name__) for e, c in decisions] == [
        ("warn", "NoneType"),
        ("breach", "BreachDeadline"),
    ]
    breach = decisions[1][1]
    assert isinstance(breach, BreachDeadline)
    assert breach.sweep_run_id == sweep_run_id("c-1", "a", DUE)


@given(now=st.integers(DUE - 2 * HOUR, DUE + 2 * HOUR))
def test_two_sweepers_decide_byte_identical_commands(now: int) -> None:
    entries = entries_for(case(obligation("a", ObligationStatus.OPEN)))
    assert decide_tick(entries, now) == decide_tick(list(reversed(entries)), now)


def test_a_repeated_breach_is_a_duplicate_to_the_cases_service() -> None:
    record = case(obligation("a", ObligationStatus.WARNED))
    ((_, cmd),) = decide_tick(entries_for(record), DUE + 5)
    assert isinstance(cmd, BreachDeadline)
    first = evaluate(record, cmd, DUE + 6)
    assert first.transition == "breached" and first.case is not None
    assert entries_for(first.case) == []  # nothing left to sweep
    second = evaluate(first.case, cmd, DUE + 7)
    assert second.outcome == "duplicate" and second.case is None


def test_names_depend_on_the_due_instant() -> None:
    assert sweep_run_id("c", "a", 1) != sweep_run_id("c", "a", 2)
    assert followup_admission_key("c", "a", 1) != followup_admission_key("c", "b", 1)
    assert len(followup_admission_key("c", "a", 1).encode()) <= 256
