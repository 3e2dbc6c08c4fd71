"""Calendars: wall-clock rules, working days (weekends, holidays, cut-off, zones), digests."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.core.calendars import (
    Calendar,
    CalendarRegistry,
    WallClock,
    WorkingDays,
)
from runplane.errors import CalendarError, ConfigError

pytestmark = pytest.mark.unit

BERLIN = ZoneInfo("Europe/Berlin")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "calendars"


def ms(y: int, mo: int, d: int, h: int = 0, mi: int = 0, tz: dt.tzinfo = dt.UTC) -> int:
    return int(dt.datetime(y, mo, d, h, mi, tzinfo=tz).timestamp() * 1000)


def local(ms_: int, tz: dt.tzinfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms_ / 1000, tz=tz)


# --- wall clock -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "delta"),
    [({"minutes": 5}, 300_000), ({"hours": 2}, 7_200_000), ({"days": 1}, 86_400_000)],
)
def test_wall_units(rule: dict[str, int], delta: int) -> None:
    assert WallClock().resolve(rule, 1_000) == 1_000 + delta


@pytest.mark.parametrize(
    "rule",
    [
        {"working_days": 1},
        {"weeks": 1},
        {"days": 1, "hours": 1},
        {},
        {"days": -1},
        {"days": 1.5},
        {"days": True},
        {"days": "1"},
    ],
)
def test_wall_refuses_what_it_does_not_implement(rule: dict[str, Any]) -> None:
    with pytest.raises(CalendarError):
        WallClock().resolve(rule, 0)


def test_wall_days_are_elapsed_time_across_dst() -> None:
    # 2025-03-30 Europe/Berlin springs forward: a wall day is still 24 hours, not "same time".
    start = ms(2025, 3, 29, 12, tz=BERLIN)
    assert WallClock().resolve({"days": 1}, start) - start == 86_400_000


@given(
    unit=st.sampled_from(["minutes", "hours", "days"]),
    n=st.integers(min_value=0, max_value=10_000),
    start=st.integers(min_value=0, max_value=4_000_000_000_000),
)
def test_wall_is_monotone_and_exact(unit: str, n: int, start: int) -> None:
    due = WallClock().resolve({unit: n}, start)
    assert due >= start
    assert WallClock().resolve({unit: n + 1}, start) > due


def test_wall_is_a_calendar_with_a_stable_digest() -> None:
    assert isinstance(WallClock(), Calendar)
    assert WallClock().digest == WallClock().digest
    assert len(WallClock().digest) == 64


# --- working days -----------------------------------------------------------------------

PLAIN = WorkingDays(name="wd")  # UTC, Sat/Sun weekend, no holidays, no cut-off


def test_working_days_skip_the_weekend() -> None:
    friday = ms(2025, 6, 6, 10)  # a Friday
    due = PLAIN.resolve({"working_days": 1}, friday)
    # Next working day after Friday is Monday; no cut-off → the end of Monday.
    assert due == ms(2025, 6, 10)


def test_weekend_start_counts_from_monday() -> None:
    saturday = ms(2025, 6, 7, 10)
    assert PLAIN.resolve({"working_days": 0}, saturday) == ms(2025, 6, 10)  # end of Monday
    assert PLAIN.resolve({"working_days": 1}, saturday) == ms(2025, 6, 11)  # end of Tuesday


def test_holidays_are_skipped() -> None:
    cal = WorkingDays(name="wd", holidays=frozenset({dt.date(2025, 6, 9)}))  # Whit Monday
    friday = ms(2025, 6, 6, 10)
    assert cal.resolve({"working_days": 1}, friday) == ms(2025, 6, 11)  # end of Tuesday


def test_cutoff_moves_the_receipt_day() -> None:
    cal = WorkingDays(name="wd", time_zone="Europe/Berlin", cutoff=dt.time(17, 0))
    before = ms(2025, 6, 3, 16, 59, tz=BERLIN)  # Tuesday
    after = ms(2025, 6, 3, 17, 0, tz=BERLIN)
    due_before = local(cal.resolve({"working_days": 1}, before), BERLIN)
    due_after = local(cal.resolve({"working_days": 1}, after), BERLIN)
    assert (due_before.date(), due_before.time()) == (dt.date(2025, 6, 4), dt.time(17, 0))
    assert (due_after.date(), due_after.time()) == (dt.date(2025, 6, 5), dt.time(17, 0))


def test_time_zone_decides_the_local_day() -> None:
    # 23:30 UTC on Friday is already Saturday in Tokyo and still Friday in New York.
    start = ms(2025, 6, 6, 23, 30)
    tokyo = WorkingDays(name="tk", time_zone="Asia/Tokyo", cutoff=dt.time(20, 0))
    new_york = WorkingDays(name="ny", time_zone="America/New_York", cutoff=dt.time(20, 0))
    due_tk = local(tokyo.resolve({"working_days": 0}, start), ZoneInfo("Asia/Tokyo"))
    due_ny = local(new_york.resolve({"working_days": 0}, start), ZoneInfo("America/New_York"))
    assert due_tk.date() == dt.date(2025, 6, 9)  # Monday in Tokyo
    assert due_ny.date() == dt.date(2025, 6, 6)  # Friday, 19:30, before the New York cut-off
    assert due_tk.time() == due_ny.time() == dt.time(20, 0)


def test_cutoff_across_dst_change_is_local_time() -> None:
    cal = WorkingDays(name="wd", time_zone="Europe/Berlin", cutoff=dt.time(17, 0))
    friday = ms(2025, 3, 28, 12, tz=BERLIN)  # CET; Monday 31 March is CEST
    due = cal.resolve({"working_days": 1}, friday)
    assert due == ms(2025, 3, 31, 15)  # 17:00 CEST = 15:00 UTC


@pytest.mark.parametrize("rule", [{"days": 1}, {"hours": 1}, {"n": 5}, {"working_days": -1}])
def test_working_days_refuse_other_rules(rule: dict[str, Any]) -> None:
    with pytest.raises(CalendarError):
        PLAIN.resolve(rule, 0)


@given(
    n=st.integers(min_value=0, max_value=60),
    start=st.integers(min_value=ms(2020, 1, 1), max_value=ms(2030, 1, 1)),
    holidays=st.frozensets(st.dates(dt.date(2020, 1, 1), dt.date(2030, 6, 1)), max_size=30),
    zone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"]),
    cutoff=st.none() | st.times(),
)
def test_working_day_properties(
    n: int, start: int, holidays: frozenset[dt.date], zone: str, cutoff: dt.time | None
) -> None:
    cal = WorkingDays(name="p", time_zone=zone, holidays=holidays, cutoff=cutoff)
    due = cal.resolve({"working_days": n}, start)
    tz = ZoneInfo(zone)
    due_local = local(due, tz)
    due_day = due_local.date() if cutoff is not None else local(due - 1, tz).date()
    assert due > start
    assert cal.is_working_day(due_day)
    # Monotone in n; and exactly n working days lie strictly between receipt and due day.
    assert cal.resolve({"working_days": n + 1}, start) > due
    receipt = cal.resolve({"working_days": 0}, start)
    receipt_day = local(receipt, tz).date() if cutoff is not None else local(receipt - 1, tz).date()
    between = sum(
        cal.is_working_day(receipt_day + dt.timedelta(days=i))
        for i in range(1, (due_day - receipt_day).days + 1)
    )
    assert between == n


# --- digests, files, registry -----------------------------------------------------------


def test_digest_follows_rules_and_data_not_name() -> None:
    a = WorkingDays(name="a", holidays=frozenset({dt.date(2025, 1, 1)}))
    b = WorkingDays(name="b", holidays=frozenset({dt.date(2025, 1, 1)}))
    c = WorkingDays(name="a", holidays=frozenset({dt.date(2025, 1, 1), dt.date(2025, 1, 2)}))
    d = WorkingDays(name="a", holidays=a.holidays, cutoff=dt.time(17, 0))
    assert a.digest == b.digest
    assert len({a.digest, c.digest, d.digest, WallClock().digest}) == 4


def test_changed_holiday_file_changes_the_digest(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text("time_zone: Europe/Berlin\ncutoff: '17:00'\nholidays: [2025-12-25]\n")
    before = WorkingDays.from_file("wd", path)
    path.write_text(
        "time_zone: Europe/Berlin\ncutoff: '17:00'\nholidays: [2025-12-25, 2025-12-26]\n"
    )
    after = WorkingDays.from_file("wd", path)
    assert before.digest != after.digest
    # The instant itself moves too, which is why the run journals it instead of recomputing.
    start = ms(2025, 12, 24, 12, tz=BERLIN)
    assert before.resolve({"working_days": 1}, start) < after.resolve({"working_days": 1}, start)


def test_registry_from_example_file() -> None:
    reg = CalendarRegistry.from_file(EXAMPLES / "calendars.yaml")
    assert set(reg) == {"wall", "working-days-de"}
    due, digest = reg.resolve("working-days-de", {"working_days": 1}, ms(2025, 4, 17, 10))
    # Maundy Thursday → Good Friday, weekend and Easter Monday skipped → Tuesday 17:00 CEST.
    assert due == ms(2025, 4, 22, 15)
    assert digest == reg["working-days-de"].digest


def test_registry_from_env(tmp_path: Path) -> None:
    assert list(CalendarRegistry.from_env({})) == ["wall"]
    f = tmp_path / "c.yaml"
    f.write_text("calendars:\n  office:\n    time_zone: Europe/Paris\n    cutoff: '09:30'\n")
    reg = CalendarRegistry.from_env({"RUNPLANE_CALENDARS_FILE": str(f)})
    assert sorted(reg) == ["office", "wall"]
    office = reg.calendar("office")
    assert isinstance(office, WorkingDays)
    assert office.cutoff == dt.time(9, 30)


def test_registry_refuses_unknown_calendar() -> None:
    with pytest.raises(CalendarError, match="no calendar named"):
        CalendarRegistry().resolve("lunar", {"days": 1}, 0)


@pytest.mark.parametrize(
    "text",
    [
        "calendars:\n  wall:\n    time_zone: UTC\n",  # shadows the built-in
        "calendars:\n  x:\n    time_zone: Mars/Olympus\n",
        "calendars:\n  x:\n    holidays: [2025-13-01]\n",
        "calendars:\n  x:\n    weekend: [mon, tue, wed, thu, fri, sat, sun]\n",
        "calendars:\n  x:\n    cutoff: 'noon'\n",
        "calendars:\n  x:\n    colour: blue\n",
        "calendars: [1, 2]\n",
        "calendars:\n  x: [\n",
    ],
)
def test_bad_calendar_files_are_config_errors(tmp_path: Path, text: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError):
        CalendarRegistry.from_file(f)


def test_unquoted_yaml_cutoff_is_understood(tmp_path: Path) -> None:
    f = tmp_path / "h.yaml"
    f.write_text("cutoff: 17:00\n")  # YAML 1.1 sexagesimal → 1020
    assert WorkingDays.from_file("wd", f).cutoff == dt.time(17, 0)
