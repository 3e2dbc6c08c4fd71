"""Calendars: turn a deadline rule and a start instant into a due instant. Pure, no I/O.

A deadline is *resolved once* by the run (``ctx.deadline``) and the resolved instant is
journaled together with the calendar's ``digest``. Replay returns the journaled instant and
never calls a calendar again, so changing a holiday table changes the digest of *new*
resolutions, never the due date of an old one.

Two kinds ship:

* :class:`WallClock` (always registered as ``"wall"``) understands exactly
  ``{"minutes": n}``, ``{"hours": n}`` and ``{"days": n}`` (n whole, ``0 <= n``), where a day
  is 24 hours of elapsed time, whatever the time zone does.
* :class:`WorkingDays` understands exactly ``{"working_days": n}``. It is built from a
  holiday file (YAML): holiday dates, the weekend days, an optional cut-off time of day and
  an IANA time zone. Semantics, all in the calendar's zone:

  - the *receipt day* is the start's local date if that is a working day and the start is
    before the cut-off; otherwise the next working day after it;
  - the due day is the n-th working day after the receipt day (n = 0: the receipt day);
  - the due instant is the cut-off time on the due day, or, with no cut-off, the end of the
    due day (local midnight that begins the following calendar date).

A calendar *refuses* a rule it does not implement (:class:`runplane.errors.CalendarError`)
instead of approximating: a wrong working-day answer is worse than no answer, because it
looks right.

The registry (:class:`CalendarRegistry`) is built from the YAML file named by
``RUNPLANE_CALENDARS_FILE``::

    calendars:
      working-days-de:
        holidays_file: holidays-de.yaml      # relative to this file
      office:
        time_zone: Europe/Paris              # or inline, same keys as a holiday file
        cutoff: "17:00"
        holidays: [2025-12-25]

A holiday file::

    time_zone: Europe/Berlin     # IANA name (zoneinfo); default UTC
    cutoff: "17:00"              # optional HH:MM[:SS]
    weekend: [sat, sun]          # optional; default sat, sun
    holidays: [2025-01-01, 2025-12-25]
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from runplane.errors import CalendarError, ConfigError

__all__ = [
    "CALENDARS_FILE_ENV",
    "WALL",
    "Calendar",
    "CalendarRegistry",
    "WallClock",
    "WorkingDays",
    "parse_rule",
]

CALENDARS_FILE_ENV = "RUNPLANE_CALENDARS_FILE"
WALL = "wall"

_MS_PER_UNIT: Mapping[str, int] = {
    "minutes": 60_000,
    "hours": 3_600_000,
    "days": 86_400_000,
}
# Bounds keep every answer inside what datetime and a signed 64-bit ms count can hold; a
# rule beyond them is a mistake, not a deadline.
_MAX_WALL_MS = 100 * 366 * 86_400_000
_MAX_WORKING_DAYS = 100 * 366
_MIN_START_MS = 0
_MAX_START_MS = 253_402_300_799_999 - _MAX_WALL_MS  # keeps start + rule below year 10000
_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


@runtime_checkable
class Calendar(Protocol):
    """What ``ctx.deadline`` needs from a calendar.

    ``digest`` is the hex SHA-256 of the calendar's rules and data (not its name): two
    calendars with the same digest resolve every rule identically.
    """

    @property
    def name(self) -> str: ...

    @property
    def digest(self) -> str: ...

    def resolve(self, rule: Mapping[str, Any], start_ms: int) -> int:
        """The due instant (ms since epoch) of ``rule`` started at ``start_ms``.

        Raises CalendarError for a rule this calendar does not implement.
        """
        ...


def parse_rule(rule: Mapping[str, Any], allowed: Iterable[str], calendar: str) -> tuple[str, int]:
    """Split a one-key rule ``{unit: n}`` into (unit, n), refusing anything else."""
    allowed_set = frozenset(allowed)
    if not isinstance(rule, Mapping) or len(rule) != 1:
        raise CalendarError(
            f"calendar {calendar!r}: a rule is exactly one of {sorted(allowed_set)} "
            f"with a whole number, got {rule!r}"
        )
    ((unit, n),) = rule.items()
    if unit not in allowed_set:
        raise CalendarError(
            f"calendar {calendar!r} does not implement rule {unit!r} "
            f"(it understands {sorted(allowed_set)})"
        )
    # bool is an int subclass; {"days": True} is a typo, not one day.
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise CalendarError(f"calendar {calendar!r}: {unit} must be a whole number >= 0, got {n!r}")
    return unit, n


def _check_start(calendar: str, start_ms: int) -> None:
    if isinstance(start_ms, bool) or not isinstance(start_ms, int):
        raise CalendarError(f"calendar {calendar!r}: start_ms must be an int, got {start_ms!r}")
    if not _MIN_START_MS <= start_ms <= _MAX_START_MS:
        raise CalendarError(f"calendar {calendar!r}: start_ms {start_ms} is out of range")


def _digest(data: Mapping[str, Any]) -> str:
    # Canonical JSON (sorted keys, no whitespace) so the digest depends on content only.
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class WallClock:
    """Elapsed time: minutes, hours, days (a day is 86,400,000 ms). Nothing else."""

    name: str = WALL

    @property
    def digest(self) -> str:
        return _digest({"kind": "wall", "version": 1, "units": _MS_PER_UNIT})

    def resolve(self, rule: Mapping[str, Any], start_ms: int) -> int:
        unit, n = parse_rule(rule, _MS_PER_UNIT, self.name)
        _check_start(self.name, start_ms)
        delta = n * _MS_PER_UNIT[unit]
        if delta > _MAX_WALL_MS:
            raise CalendarError(f"calendar {self.name!r}: {rule!r} is beyond 100 years")
        return start_ms + delta


def _parse_cutoff(raw: Any) -> dt.time | None:
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        # YAML 1.1 reads an unquoted 17:00 as the sexagesimal integer 1020 (minutes).
        if not 0 <= raw < 24 * 60:
            raise ConfigError(f"cutoff {raw!r} is not a time of day")
        return dt.time(raw // 60, raw % 60)
    if not isinstance(raw, str):
        raise ConfigError(f"cutoff must be 'HH:MM' or 'HH:MM:SS', got {raw!r}")
    try:
        return dt.time.fromisoformat(raw)
    except ValueError as exc:
        raise ConfigError(f"cutoff must be 'HH:MM' or 'HH:MM:SS', got {raw!r}") from exc


def _parse_date(raw: Any) -> dt.date:
    if isinstance(raw, dt.datetime):
        raise ConfigError(f"a holiday is a date, not a date-time: {raw!r}")
    if isinstance(raw, dt.date):
        return raw
    if isinstance(raw, str):
        try:
            return dt.date.fromisoformat(raw)
        except ValueError as exc:
            raise ConfigError(f"a holiday must be YYYY-MM-DD, got {raw!r}") from exc
    raise ConfigError(f"a holiday must be YYYY-MM-DD, got {raw!r}")


def _parse_weekend(raw: Any) -> frozenset[int]:
    if raw is None:
        return frozenset({5, 6})
    if not isinstance(raw, list | tuple):
        raise ConfigError(f"weekend must be a list of day names, got {raw!r}")
    days: set[int] = set()
    for item in raw:
        key = str(item).strip().lower()[:3]
        if key not in _WEEKDAYS:
            raise ConfigError(f"weekend: unknown day {item!r} (use mon..sun)")
        days.add(_WEEKDAYS.index(key))
    if len(days) == 7:
        raise ConfigError("weekend: at least one day of the week must be a working day")
    return frozenset(days)


def _zone(raw: Any) -> ZoneInfo:
    name = "UTC" if raw is None else raw
    if not isinstance(name, str) or not name:
        raise ConfigError(f"time_zone must be an IANA name, got {raw!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"unknown time zone {name!r}") from exc


@dataclass(frozen=True)
class WorkingDays:
    """Working days in a time zone, skipping weekends and holidays; see the module docstring."""

    name: str
    time_zone: str = "UTC"
    holidays: frozenset[dt.date] = field(default_factory=frozenset)
    weekend: frozenset[int] = frozenset({5, 6})  # Monday = 0, as date.weekday()
    cutoff: dt.time | None = None

    def __post_init__(self) -> None:
        if not self.name or self.name == WALL:
            raise ConfigError(f"a working-days calendar needs a name other than {WALL!r}")
        _zone(self.time_zone)
        if len(self.weekend) >= 7 or not all(0 <= d <= 6 for d in self.weekend):
            raise ConfigError(f"calendar {self.name!r}: bad weekend {sorted(self.weekend)}")
        if self.cutoff is not None and self.cutoff.tzinfo is not None:
            raise ConfigError(f"calendar {self.name!r}: cutoff is a local time of day, no zone")

    @classmethod
    def from_mapping(cls, name: str, data: Mapping[str, Any]) -> WorkingDays:
        """Build from a parsed holiday file (see the module docstring for the keys)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"calendar {name!r}: expected a mapping, got {type(data).__name__}")
        unknown = set(data) - {"kind", "time_zone", "cutoff", "weekend", "holidays"}
        if unknown:
            raise ConfigError(f"calendar {name!r}: unknown keys {sorted(unknown)}")
        if data.get("kind", "working_days") != "working_days":
            raise ConfigError(f"calendar {name!r}: unknown kind {data.get('kind')!r}")
        raw_holidays = data.get("holidays") or []
        if not isinstance(raw_holidays, list | tuple):
            raise ConfigError(f"calendar {name!r}: holidays must be a list of dates")
        zone = data.get("time_zone", "UTC")
        _zone(zone)
        return cls(
            name=name,
            time_zone=str(zone),
            holidays=frozenset(_parse_date(d) for d in raw_holidays),
            weekend=_parse_weekend(data.get("weekend")),
            cutoff=_parse_cutoff(data.get("cutoff")),
        )

    @classmethod
    def from_file(cls, name: str, path: Path) -> WorkingDays:
        return cls.from_mapping(name, _load_yaml(path))

    @property
    def digest(self) -> str:
        return _digest(
            {
                "kind": "working_days",
                "version": 1,
                "time_zone": self.time_zone,
                "cutoff": None if self.cutoff is None else self.cutoff.isoformat(),
                "weekend": sorted(self.weekend),
                "holidays": sorted(d.isoformat() for d in self.holidays),
            }
        )

    def is_working_day(self, day: dt.date) -> bool:
        return day.weekday() not in self.weekend and day not in self.holidays

    def resolve(self, rule: Mapping[str, Any], start_ms: int) -> int:
        _, n = parse_rule(rule, ("working_days",), self.name)
        _check_start(self.name, start_ms)
        if n > _MAX_WORKING_DAYS:
            raise CalendarError(f"calendar {self.name!r}: {rule!r} is beyond 100 years")
        zone = ZoneInfo(self.time_zone)
        local = _from_ms(start_ms).astimezone(zone)
        day = local.date()
        late = self.cutoff is not None and local.time().replace(tzinfo=None) >= self.cutoff
        try:
            if not self.is_working_day(day) or late:
                day = self._next_working_day(day)
            for _ in range(n):
                day = self._next_working_day(day)
            return self._end_of(day, zone)
        except OverflowError:
            raise CalendarError(f"calendar {self.name!r}: {rule!r} runs past year 9999") from None

    def _next_working_day(self, day: dt.date) -> dt.date:
        # Always terminates: at least one weekday is a working day and holidays are finite.
        day += dt.timedelta(days=1)
        while not self.is_working_day(day):
            day += dt.timedelta(days=1)
        return day

    def _end_of(self, day: dt.date, zone: ZoneInfo) -> int:
        if self.cutoff is None:
            end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(0), tzinfo=zone)
        else:
            # A cut-off that falls in a DST gap or overlap resolves with fold=0 (the earlier
            # offset), which zoneinfo applies the same way on every machine.
            end = dt.datetime.combine(day, self.cutoff, tzinfo=zone)
        return _to_ms(end)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _from_ms(ms: int) -> dt.datetime:
    # Integer arithmetic, not fromtimestamp(ms / 1000): a float loses the last millisecond.
    return _EPOCH + dt.timedelta(milliseconds=ms)


def _to_ms(moment: dt.datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _load_yaml(path: Path) -> Any:
    import yaml  # only the registry edge reads files; the resolving core never does

    try:
        with path.open("r", encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read calendar file {path}: {exc}") from exc
    except (yaml.YAMLError, ValueError) as exc:  # PyYAML raises ValueError for 2025-13-01
        raise ConfigError(f"calendar file {path} is not valid YAML: {exc}") from exc


class CalendarRegistry(Mapping[str, Calendar]):
    """Calendars by name; ``"wall"`` is always present and cannot be replaced."""

    def __init__(self, calendars: Iterable[Calendar] = ()) -> None:
        table: dict[str, Calendar] = {WALL: WallClock()}
        for cal in calendars:
            if cal.name in table:
                raise ConfigError(f"calendar {cal.name!r} is defined twice (or shadows 'wall')")
            table[cal.name] = cal
        self._table = table

    def __getitem__(self, name: str) -> Calendar:
        return self._table[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def calendar(self, name: str) -> Calendar:
        """The calendar called ``name``; an unknown name is refused like an unknown rule."""
        try:
            return self._table[name]
        except KeyError:
            raise CalendarError(
                f"no calendar named {name!r} (known: {sorted(self._table)})"
            ) from None

    def resolve(self, name: str, rule: Mapping[str, Any], start_ms: int) -> tuple[int, str]:
        """(due_ms, digest) of ``rule`` on calendar ``name``."""
        cal = self.calendar(name)
        return cal.resolve(rule, start_ms), cal.digest

    @classmethod
    def from_mapping(cls, data: Any, base_dir: Path | None = None) -> CalendarRegistry:
        if data is None:
            return cls()
        if not isinstance(data, Mapping) or not isinstance(data.get("calendars", {}), Mapping):
            raise ConfigError("a calendars file is a mapping with a 'calendars' mapping")
        calendars: list[Calendar] = []
        for name, spec in (data.get("calendars") or {}).items():
            if not isinstance(spec, Mapping):
                raise ConfigError(f"calendar {name!r}: expected a mapping")
            if "holidays_file" in spec:
                rest = {k: v for k, v in spec.items() if k != "holidays_file"}
                if rest:
                    raise ConfigError(
                        f"calendar {name!r}: holidays_file excludes inline keys {sorted(rest)}"
                    )
                path = Path(str(spec["holidays_file"]))
                if not path.is_absolute() and base_dir is not None:
                    path = base_dir / path
                calendars.append(WorkingDays.from_file(str(name), path))
            else:
                calendars.append(WorkingDays.from_mapping(str(name), spec))
        return cls(calendars)

    @classmethod
    def from_file(cls, path: Path) -> CalendarRegistry:
        return cls.from_mapping(_load_yaml(path), base_dir=path.parent)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CalendarRegistry:
        """From ``RUNPLANE_CALENDARS_FILE``; only ``wall`` when it is unset or empty."""
        raw = env.get(CALENDARS_FILE_ENV)
        return cls.from_file(Path(raw)) if raw else cls()
