"""The pure schedule core: tick instants (cron in a zone, DST; intervals), catch-up, keys."""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import replace
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.core.schedules import (
    MAX_CATCH_UP,
    Firing,
    ScheduleError,
    Timetable,
    answered,
    due_ticks,
    name_problem,
    newest,
    parse_every,
    parse_tick_key,
    plan,
    tick_admission_key,
)
from runplane.wire import AdmissionOutcome, AdmissionReply, CatchUp, Schedule

AMS = ZoneInfo("Europe/Amsterdam")
HOUR = 3_600_000
DAY = 24 * HOUR


def ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def local(tick: int, zone: ZoneInfo = AMS) -> str:
    return dt.datetime.fromtimestamp(tick / 1000, tz=zone).isoformat()


# --- cron in a zone --------------------------------------------------------------------------


def test_nightly_cron_follows_the_zone_across_both_dst_changes() -> None:
    nightly = Timetable(cron="0 2 * * *", tz="Europe/Amsterdam")
    start = ms("2026-03-27T12:00:00+00:00")
    ticks = [local(t) for t in nightly.ticks(start, start + 3 * DAY)]
    # 02:00 does not exist on 2026-03-29 (01:59:59 CET → 03:00 CEST): it fires at the jump.
    assert ticks == [
        "2026-03-28T02:00:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:00:00+02:00",
    ]
    start = ms("2026-10-24T12:00:00+00:00")
    ticks = [local(t) for t in nightly.ticks(start, start + 3 * DAY)]
    # 02:00 happens twice on 2026-10-25: only its first occurrence (CEST) fires.
    assert ticks == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-26T02:00:00+01:00",
        "2026-10-27T02:00:00+01:00",
    ]


def test_skipped_times_collapse_into_one_tick_at_the_jump() -> None:
    quarterly = Timetable(cron="*/15 * * * *", tz="Europe/Amsterdam")
    start = ms("2026-03-29T00:50:00+00:00")  # 01:50 CET
    ticks = [local(t) for t in quarterly.ticks(start, start + HOUR)]
    assert ticks == [
        "2026-03-29T03:00:00+02:00",  # 02:00, 02:15, 02:30, 02:45 and 03:00: one instant
        "2026-03-29T03:15:00+02:00",
        "2026-03-29T03:30:00+02:00",
        "2026-03-29T03:45:00+02:00",
    ]


def test_utc_cron_and_weekday() -> None:
    weekly = Timetable(cron="30 6 * * mon", tz="UTC")
    assert local(weekly.next_after(ms("2026-12-02T00:00:00+00:00")), ZoneInfo("UTC")) == (
        "2026-12-07T06:30:00+00:00"
    )


@pytest.mark.parametrize(
    ("cron", "tz", "needle"),
    [
        ("0 2 * *", "UTC", "five fields"),
        ("0 2 * * * *", "UTC", "five fields"),
        ("@daily", "UTC", "five fields"),
        ("61 * * * *", "UTC", "cron"),
        ("0 0 30 2 *", "UTC", "never matches"),
        ("0 2 * * *", "Mars/Olympus", "IANA"),
    ],
)
def test_bad_timetables_are_named_errors(cron: str, tz: str, needle: str) -> None:
    with pytest.raises(ScheduleError, match=needle):
        Timetable(cron=cron, tz=tz)


def test_a_timetable_is_cron_or_interval_not_both() -> None:
    with pytest.raises(ScheduleError):
        Timetable()
    with pytest.raises(ScheduleError):
        Timetable(cron="* * * * *", every_ms=60_000)
    with pytest.raises(ScheduleError):
        Timetable(every_ms=10)


# --- intervals and parsing --------------------------------------------------------------------


def test_interval_ticks_from_its_anchor() -> None:
    every = Timetable(every_ms=2_000, anchor_ms=1_000)
    assert list(every.ticks(1_000, 9_000)) == [3_000, 5_000, 7_000, 9_000]
    assert every.last_at_or_before(8_999) == 7_000


@pytest.mark.parametrize(
    ("text", "expected"), [("30s", 30_000), ("5m", 300_000), ("2h", 7_200_000), ("1d", DAY)]
)
def test_parse_every(text: str, expected: int) -> None:
    assert parse_every(text) == expected


@pytest.mark.parametrize("text", ["", "30", "s", "1.5s", "500ms", "-1s", "3w"])
def test_parse_every_refuses(text: str) -> None:
    with pytest.raises(ScheduleError):
        parse_every(text)


def test_names_and_keys() -> None:
    assert name_problem("nightly-report.v2") is None
    for bad in ("", "Nightly", "a/b", "-x", "x" * 64, "a b"):
        assert name_problem(bad) is not None
    key = tick_admission_key("acme", "nightly", 1_767_225_600_000)
    assert key == "runplane.schedule/acme/nightly/1767225600000"
    assert parse_tick_key(key) == ("acme", "nightly", 1_767_225_600_000)
    assert parse_tick_key("runplane.child/s/0/1") is None
    assert parse_tick_key("runplane.schedule/acme/nightly/x") is None


# --- catch-up ---------------------------------------------------------------------------------


def test_catch_up_rules_after_downtime() -> None:
    every = Timetable(every_ms=2_000, anchor_ms=0)
    # Last fired 2 000; down until 20 000: ticks 4 000 … 20 000 (9 of them) are behind.
    each = due_ticks(every, 2_000, 20_000, CatchUp.EACH, catch_up_max=3)
    assert each.fire == (16_000, 18_000, 20_000) and each.skipped == 6
    once = due_ticks(every, 2_000, 20_000, CatchUp.ONCE)
    assert once.fire == (20_000,) and once.skipped == 8
    skip = due_ticks(every, 2_000, 20_000, CatchUp.SKIP, grace_ms=3_000)
    assert skip.fire == (18_000, 20_000) and skip.skipped == 7
    old = due_ticks(every, 2_000, 21_000, CatchUp.SKIP, grace_ms=500)
    assert old.fire == () and old.skipped == 9 and old.through_ms == 20_000
    for due in (each, once, skip):
        assert due.through_ms == 20_000
    nothing = due_ticks(every, 20_000, 21_999, CatchUp.EACH, catch_up_max=5)
    assert nothing.fire == () and nothing.through_ms == 20_000


def test_catch_up_max_is_bounded() -> None:
    every = Timetable(every_ms=1_000)
    with pytest.raises(ScheduleError):
        due_ticks(every, 0, 10_000, CatchUp.EACH, catch_up_max=0)
    with pytest.raises(ScheduleError):
        due_ticks(every, 0, 10_000, CatchUp.EACH, catch_up_max=MAX_CATCH_UP + 1)


# --- properties -------------------------------------------------------------------------------

ZONES = st.sampled_from(
    ["UTC", "Europe/Amsterdam", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
)
CRONS = st.sampled_from(
    ["*/15 * * * *", "0 2 * * *", "30 1-3 * * *", "0 */6 * * *", "45 2 * * 0", "*/7 2 * * *"]
)
# 2026 and 2027, and half of them within a day of a DST change of one of the zones.
_CHANGES = [
    ms("2026-03-08T07:00:00+00:00"),  # New York springs forward
    ms("2026-03-29T01:00:00+00:00"),  # Amsterdam
    ms("2026-04-04T15:00:00+00:00"),  # Lord Howe falls back half an hour
    ms("2026-10-04T15:30:00+00:00"),  # Lord Howe springs forward
    ms("2026-10-25T01:00:00+00:00"),  # Amsterdam
    ms("2026-11-01T06:00:00+00:00"),  # New York
]
INSTANTS = st.one_of(
    st.integers(ms("2026-01-01T00:00:00+00:00"), ms("2027-12-31T00:00:00+00:00")),
    st.builds(lambda c, d: c + d, st.sampled_from(_CHANGES), st.integers(-DAY, DAY)),
)
timetables = st.one_of(
    st.builds(Timetable, cron=CRONS, tz=ZONES),
    st.builds(
        Timetable,
        every_ms=st.integers(60_000, 6 * HOUR),
        anchor_ms=INSTANTS,
    ),
)


@settings(max_examples=150, deadline=None)
@given(timetables, INSTANTS, st.integers(1, 2 * DAY))
def test_ticks_are_strictly_increasing_and_match_next_and_last(
    timetable: Timetable, after: int, span: int
) -> None:
    ticks = list(timetable.ticks(after, after + span))
    assert all(a < b for a, b in itertools.pairwise(ticks))  # monotone, none twice
    assert all(after < t <= after + span for t in ticks)
    for t in ticks:
        assert timetable.last_at_or_before(t) == t
        assert timetable.next_after(t - 1) == t
    if ticks:
        assert timetable.last_at_or_before(after + span) == ticks[-1]
    else:
        assert timetable.next_after(after) > after + span


catch_ups = st.sampled_from(list(CatchUp))


@settings(max_examples=150, deadline=None)
@given(
    timetables,
    INSTANTS,
    st.lists(st.integers(0, 12 * HOUR), min_size=1, max_size=8),
    catch_ups,
    st.integers(1, 20),
    st.integers(0, 2 * HOUR),
)
def test_a_sweeper_waking_at_any_instants_fires_no_tick_twice_and_within_its_rule(
    timetable: Timetable,
    start: int,
    gaps: list[int],
    catch_up: CatchUp,
    catch_up_max: int,
    grace: int,
) -> None:
    """A sweeper wakes at arbitrary instants (a sweep, or a restart after downtime) and fires
    what ``due_ticks`` says, carrying ``through_ms`` forward as the durable "last fired"."""
    through, now, fired = start, start, []
    for gap in gaps:
        now += gap
        due = due_ticks(
            timetable, through, now, catch_up, catch_up_max=catch_up_max, grace_ms=grace
        )
        behind = list(timetable.ticks(through, now))
        assert set(due.fire) <= set(behind)
        assert list(due.fire) == sorted(due.fire)
        assert due.skipped + len(due.fire) == len(behind)
        assert due.through_ms == (behind[-1] if behind else through)
        if behind:
            if catch_up is CatchUp.ONCE:
                assert due.fire == (behind[-1],)
            elif catch_up is CatchUp.EACH:
                assert list(due.fire) == behind[-catch_up_max:]
            else:
                assert list(due.fire) == [t for t in behind if t >= now - grace][-MAX_CATCH_UP:]
        fired.extend(due.fire)
        through = due.through_ms
    assert len(fired) == len(set(fired))  # no tick twice
    assert fired == sorted(fired)  # ticks monotone across wakes


# --- a stored schedule: plan, answered, newest ------------------------------------------------


def schedule(**kw: object) -> Schedule:
    base: dict[str, object] = {
        "tenant": "acme",
        "name": "beat",
        "capability": "report",
        "input_json": '{"n": 1}',
        "initiator": "olga",
        "every_ms": 2_000,
        "anchor_ms": 0,
        "catch_up": CatchUp.EACH,
        "catch_up_max": 10,
        "since_ms": 0,
        "created_ms": 0,
        "updated_ms": 0,
    }
    base.update(kw)
    return Schedule(**base)  # type: ignore[arg-type]


def test_plan_sends_each_due_tick_with_its_key_and_records_how_far() -> None:
    s = schedule()
    first = plan(s, None, 5_000, grace_ms=60_000)
    assert [r.admission_key for r in first.requests] == [
        "runplane.schedule/acme/beat/2000",
        "runplane.schedule/acme/beat/4000",
    ]
    assert all(r.requested_ms == int(r.admission_key.rsplit("/", 1)[1]) for r in first.requests)
    assert {(r.tenant, r.initiator, r.capability, r.input_json) for r in first.requests} == {
        ("acme", "olga", "report", '{"n": 1}')
    }
    assert first.fired is not None
    assert (first.fired.through_ms, first.fired.fired, first.fired.last_tick_ms) == (
        4_000,
        2,
        4_000,
    )
    # Repeated at the same instant from the same record: the same requests (a restart).
    assert plan(s, None, 5_000, grace_ms=60_000).requests == first.requests
    # From the recorded progress, nothing is due until the next tick.
    assert plan(s, first.fired, 5_999, grace_ms=60_000) == Firing((), None)
    later = plan(s, first.fired, 6_000, grace_ms=60_000)
    assert [r.requested_ms for r in later.requests] == [6_000]


def test_a_paused_schedule_sends_nothing_and_a_resumed_one_does_not_catch_up() -> None:
    s = schedule()
    fired = plan(s, None, 4_000, grace_ms=0).fired
    assert plan(replace(s, paused=True), fired, 60_000, grace_ms=0) == Firing((), None)
    resumed = replace(s, paused=False, since_ms=59_000)
    assert [r.requested_ms for r in plan(resumed, fired, 60_000, grace_ms=0).requests] == [60_000]


def reply(key: str, outcome: AdmissionOutcome, reason: str | None = None) -> AdmissionReply:
    run = None if outcome is AdmissionOutcome.REFUSED else "run-1"
    return AdmissionReply(
        admission_key=key, outcome=outcome, run_id=run, reason=reason, replied_ms=1
    )


def test_answered_records_outcomes_and_counts_each_refusal_once() -> None:
    fired = plan(schedule(), None, 4_000, grace_ms=0).fired
    assert fired is not None
    key = tick_admission_key("acme", "beat", 4_000)
    refused = answered(fired, 4_000, reply(key, AdmissionOutcome.REFUSED, "unknown capability"), 9)
    assert refused is not None
    assert (refused.refused, refused.last_refusal, refused.last_refused_tick_ms) == (
        1,
        "unknown capability",
        4_000,
    )
    assert refused.last_outcome == "REFUSED" and refused.updated_ms == 9
    # The same reply read again (a restart re-reads replies): nothing new.
    assert answered(refused, 4_000, reply(key, AdmissionOutcome.REFUSED, "x"), 10) is None
    admitted = answered(refused, 6_000, reply(key, AdmissionOutcome.ADMITTED), 11)
    assert admitted is not None and admitted.last_outcome == "ADMITTED"
    assert admitted.last_run_id == "run-1" and admitted.refused == 1
    # An older tick's late answer does not replace the newer outcome.
    late = answered(admitted, 2_000, reply(key, AdmissionOutcome.DUPLICATE), 12)
    assert late is None


def test_newest_keeps_the_record_further_along() -> None:
    a = plan(schedule(), None, 4_000, grace_ms=0).fired
    b = plan(schedule(), a, 8_000, grace_ms=0).fired
    assert a is not None and b is not None
    assert newest(a, b) is b and newest(b, a) is b
    assert newest(None, a) is a and newest(a, None) is a and newest(None, None) is None
