"""Schedules: when a schedule's ticks fall, which are due after downtime, and their keys. Pure.

A schedule starts a run of a capability on a timetable: a five-field cron expression read in
an IANA time zone, or a plain interval. Everything here is a function of its arguments (no
clock, no Kafka): the sweeper (``services.sweeper.schedules``) asks it what to fire.

**Ticks are UTC instants (ms).** A cron expression names local wall times; each becomes the
instant that wall time has in the zone (``zoneinfo``), with two rules for the hours a change
of offset makes ambiguous:

- *a skipped local time* (the hour clocks jump over, spring forward) fires once, at the
  instant of the jump (``30 2 * * *`` in Europe/Amsterdam on the last Sunday of March fires
  at 03:00 CEST); several skipped times collapse into that one tick;
- *a repeated local time* (the hour clocks go through twice, fall back) fires once, at its
  first occurrence (``30 2 * * *`` on the last Sunday of October fires at 02:30 CEST, not
  again at 02:30 CET). A schedule that must tick through that hour in elapsed time is an
  interval (``every_ms``) or a cron expression in ``UTC``.

So the ticks are strictly increasing in every zone, and never repeat. Cron parsing is
``croniter``'s (the library Faust's own crontab timers use), always on naive local wall times
— the zone arithmetic above is ours, because croniter's own DST handling differs between
versions.

**An interval** ticks at ``anchor_ms + k * every_ms`` for every whole ``k``: elapsed time,
indifferent to zones.

**Catch-up after downtime** (:func:`due_ticks`): the ticks after ``after_ms`` (the last fired
tick, or the instant the schedule was created or resumed) and at or before ``now_ms``:

- ``skip``: only those at most ``grace_ms`` old; older ones are skipped;
- ``once``: only the latest one, however old;
- ``each``: every one, but at most the latest ``catch_up_max``.

**A tick's admission key** (:func:`tick_admission_key`) is derived from (tenant, schedule
name, tick instant) alone: whichever sweeper, restart or replica fires a tick sends the same
key, and admission starts at most one run per key, ever.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from runplane.errors import RunplaneError
from runplane.wire import (
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    CatchUp,
    Schedule,
    ScheduleFired,
)

__all__ = [
    "MAX_CATCH_UP",
    "SCHEDULE_KEY_PREFIX",
    "Due",
    "Firing",
    "ScheduleError",
    "Timetable",
    "answered",
    "due_ticks",
    "name_problem",
    "newest",
    "parse_every",
    "parse_tick_key",
    "plan",
    "schedule_key",
    "tick_admission_key",
    "tick_request",
    "timetable_of",
]

SCHEDULE_KEY_PREFIX: Final = "runplane.schedule/"
MAX_CATCH_UP: Final = 1_000  # ``each`` fires at most this many missed ticks at once
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
_EVERY = re.compile(r"(\d+)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MIN_EVERY_MS: Final = 1_000
_UTC = dt.UTC


class ScheduleError(RunplaneError):
    """A schedule that cannot be: a bad cron expression, zone, interval or name."""


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a schedule, or None (lower case, digits, ``.``, ``_``, ``-``)."""
    if _NAME.fullmatch(name) is None:
        return f"schedule name {name!r}: 1 to 63 of a-z 0-9 . _ -, starting with a letter or digit"
    return None


def schedule_key(tenant: str, name: str) -> str:
    """The schedule's key on ``schedules`` and ``schedules.fired``: ``tenant/name``."""
    return f"{tenant}/{name}"


def tick_admission_key(tenant: str, name: str, tick_ms: int) -> str:
    """The admission key of one tick: (tenant, schedule, instant), nothing else.

    Readable on purpose (``runplane.schedule/acme/nightly/1767225600000``): an operator finds
    a tick's run by it, and the sweeper reads a reply back to its schedule from it."""
    return f"{SCHEDULE_KEY_PREFIX}{tenant}/{name}/{tick_ms}"


def parse_tick_key(admission_key: str) -> tuple[str, str, int] | None:
    """(tenant, name, tick) of a tick's admission key; None for any other key."""
    if not admission_key.startswith(SCHEDULE_KEY_PREFIX):
        return None
    tenant, sep, rest = admission_key[len(SCHEDULE_KEY_PREFIX) :].partition("/")
    name, sep2, tick = rest.rpartition("/")
    if not sep or not sep2 or not tick.isdigit():
        return None
    return tenant, name, int(tick)


def parse_every(text: str) -> int:
    """``30s``, ``5m``, ``2h``, ``1d``, ``1500ms`` → milliseconds (at least one second)."""
    m = _EVERY.fullmatch(text.strip())
    if m is None:
        raise ScheduleError(f"interval {text!r}: a whole number and ms, s, m, h or d (e.g. 30s)")
    every = int(m.group(1)) * _UNIT_MS[m.group(2)]
    if every < MIN_EVERY_MS:
        raise ScheduleError(f"interval {text!r}: at least 1s")
    return every


@dataclass(frozen=True)
class Timetable:
    """When a schedule ticks: ``cron`` in ``tz``, or every ``every_ms`` from ``anchor_ms``."""

    cron: str | None = None
    tz: str = "UTC"
    every_ms: int | None = None
    anchor_ms: int = 0

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every_ms is None):
            raise ScheduleError("a schedule has either a cron expression or an interval")
        if self.every_ms is not None and self.every_ms < MIN_EVERY_MS:
            raise ScheduleError(f"interval of {self.every_ms} ms: at least 1000")
        if self.cron is not None:
            fields = self.cron.split()
            if len(fields) != 5:
                raise ScheduleError(
                    f"cron {self.cron!r}: five fields (minute hour day month weekday)"
                )
            try:
                croniter(self.cron)
            except (ValueError, KeyError, TypeError) as exc:  # croniter's errors are ValueErrors
                raise ScheduleError(f"cron {self.cron!r}: {exc}") from None
            self.zone()  # an unknown zone is refused now, not at the first tick
            self.next_after(0)  # so is an expression no date matches (``0 0 30 2 *``)

    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ScheduleError(f"time zone {self.tz!r}: not an IANA zone ({exc})") from None

    def next_after(self, after_ms: int) -> int:
        """The first tick strictly after ``after_ms``."""
        if self.every_ms is not None:
            k = (after_ms - self.anchor_ms) // self.every_ms + 1
            return self.anchor_ms + k * self.every_ms
        zone = self.zone()
        assert self.cron is not None
        wall = _wall(after_ms, zone)
        it = croniter(self.cron, wall)
        try:
            # f (wall → instant) is non-decreasing, and every wall time before ``wall`` maps at
            # or before ``after_ms``: the first candidate past it is the next tick.
            while True:
                tick = _instant(it.get_next(dt.datetime), zone)
                if tick > after_ms:
                    return tick
        except CroniterBadDateError:
            raise ScheduleError(f"cron {self.cron!r} never matches a date") from None

    def last_at_or_before(self, at_ms: int) -> int | None:
        """The latest tick at or before ``at_ms`` (None: none within a year before, for cron)."""
        if self.every_ms is not None:
            return self.anchor_ms + ((at_ms - self.anchor_ms) // self.every_ms) * self.every_ms
        zone = self.zone()
        assert self.cron is not None
        # Start past every wall time that could map at or before ``at_ms`` (a repeated hour
        # puts ``at_ms``'s own wall time up to an offset change behind them), walk back.
        start = _wall(at_ms, zone) + dt.timedelta(hours=3)
        floor = at_ms - 366 * 86_400_000
        it = croniter(self.cron, start)
        try:
            while True:
                tick = _instant(it.get_prev(dt.datetime), zone)
                if tick <= at_ms:
                    return tick
                if tick < floor:  # pragma: no cover - unreachable: tick > at_ms here
                    return None
        except CroniterBadDateError:
            return None

    def ticks(self, after_ms: int, until_ms: int) -> Iterator[int]:
        """Every tick in ``(after_ms, until_ms]``, in order."""
        t = self.next_after(after_ms)
        while t <= until_ms:
            yield t
            t = self.next_after(t)


def _wall(ms: int, zone: ZoneInfo) -> dt.datetime:
    """The naive local wall time of an instant (to the second: cron has minutes)."""
    at = dt.datetime.fromtimestamp(ms // 1000, tz=_UTC).astimezone(zone)
    return at.replace(tzinfo=None, fold=0)


def _instant(wall: dt.datetime, zone: ZoneInfo) -> int:
    """A wall time's tick instant (ms): its first occurrence; a skipped one, the jump's."""
    first = wall.replace(tzinfo=zone, fold=0)
    utc = first.astimezone(_UTC)
    if utc.astimezone(zone).replace(tzinfo=None) == wall:
        return int(utc.timestamp()) * 1000
    # Skipped: fold=0 reads it with the offset before the jump (past the jump), fold=1 with the
    # offset after it (before the jump); the jump lies between. Seconds, by bisection.
    hi = int(utc.timestamp())
    lo = int(wall.replace(tzinfo=zone, fold=1).astimezone(_UTC).timestamp())
    lo, hi = min(lo, hi), max(lo, hi)
    before = _offset(lo, zone)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset(mid, zone) == before:
            lo = mid
        else:
            hi = mid
    return hi * 1000


def _offset(seconds: int, zone: ZoneInfo) -> dt.timedelta | None:
    return dt.datetime.fromtimestamp(seconds, tz=_UTC).astimezone(zone).utcoffset()


@dataclass(frozen=True)
class Due:
    """What to do now: fire ``fire`` (in order), having passed over ``skipped`` older ticks;
    ``through_ms`` is the latest tick now behind the schedule (fired or skipped), the new
    "last fired" once ``fire`` is sent — unchanged when nothing was due."""

    fire: tuple[int, ...]
    skipped: int
    through_ms: int


def due_ticks(
    timetable: Timetable,
    after_ms: int,
    now_ms: int,
    catch_up: CatchUp,
    *,
    catch_up_max: int = 1,
    grace_ms: int = 60_000,
) -> Due:
    """The ticks in ``(after_ms, now_ms]`` to fire under ``catch_up`` (module docstring)."""
    if catch_up_max < 1 or catch_up_max > MAX_CATCH_UP:
        raise ScheduleError(f"catch-up max {catch_up_max}: between 1 and {MAX_CATCH_UP}")
    if now_ms <= after_ms or timetable.next_after(after_ms) > now_ms:
        return Due((), 0, after_ms)
    latest = timetable.last_at_or_before(now_ms)
    assert latest is not None and latest > after_ms  # a tick lies in (after_ms, now_ms]
    if catch_up is CatchUp.ONCE:
        fire: list[int] = [latest]
    else:
        keep = catch_up_max if catch_up is CatchUp.EACH else MAX_CATCH_UP
        # The oldest tick that may fire: after the last one, and (skip) at most grace_ms old.
        floor = max(after_ms + 1, now_ms - grace_ms) if catch_up is CatchUp.SKIP else after_ms + 1
        # Walk back from the latest: never through more ticks than can be kept.
        fire = []
        t: int | None = latest
        while t is not None and t >= floor and len(fire) < keep:
            fire.append(t)
            t = timetable.last_at_or_before(t - 1)
        fire.reverse()
    skipped = _count(timetable, after_ms, fire[0] if fire else latest + 1)
    return Due(tuple(fire), skipped, latest)


def _count(timetable: Timetable, after_ms: int, before_ms: int, limit: int = 10_000) -> int:
    """How many ticks lie in ``(after_ms, before_ms)`` (a cron's counted up to ``limit``)."""
    if timetable.every_ms is not None:
        first = timetable.next_after(after_ms)
        return max(0, (before_ms - 1 - first) // timetable.every_ms + 1) if first < before_ms else 0
    n = 0
    for _ in timetable.ticks(after_ms, before_ms - 1):
        n += 1
        if n >= limit:
            break
    return n


# --- a stored schedule: what its sweeper sends, and what it then records ----------------------


def timetable_of(schedule: Schedule) -> Timetable:
    return Timetable(
        cron=schedule.cron, tz=schedule.tz, every_ms=schedule.every_ms, anchor_ms=schedule.anchor_ms
    )


def tick_request(schedule: Schedule, tick_ms: int) -> AdmissionRequest:
    """The admission request of one tick. A function of (schedule, tick) only — the tick, not
    the clock, is its ``requested_ms`` — so a repeat is byte for byte the same request."""
    return AdmissionRequest(
        admission_key=tick_admission_key(schedule.tenant, schedule.name, tick_ms),
        capability=schedule.capability,
        input_json=schedule.input_json,
        tenant=schedule.tenant,
        initiator=schedule.initiator,
        requested_ms=tick_ms,
    )


@dataclass(frozen=True)
class Firing:
    """A sweep's decision for one schedule: send ``requests`` (in order), then record
    ``fired`` (None: nothing changed, write nothing)."""

    requests: tuple[AdmissionRequest, ...]
    fired: ScheduleFired | None


def plan(schedule: Schedule, fired: ScheduleFired | None, now_ms: int, *, grace_ms: int) -> Firing:
    """What a sweep at ``now_ms`` sends for ``schedule``, given how far it has ``fired``.

    Ticks after ``max(fired.through_ms, schedule.since_ms)`` count: creation and resume set
    ``since_ms``, so a paused stretch is never caught up. A paused schedule sends nothing."""
    if schedule.paused:
        return Firing((), None)
    after = schedule.since_ms if fired is None else max(fired.through_ms, schedule.since_ms)
    due = due_ticks(
        timetable_of(schedule),
        after,
        now_ms,
        schedule.catch_up,
        catch_up_max=schedule.catch_up_max,
        grace_ms=grace_ms,
    )
    if due.through_ms == after:
        return Firing((), None)
    base = fired or ScheduleFired(
        tenant=schedule.tenant, name=schedule.name, through_ms=after, updated_ms=now_ms
    )
    return Firing(
        tuple(tick_request(schedule, t) for t in due.fire),
        replace(
            base,
            through_ms=due.through_ms,
            fired=base.fired + len(due.fire),
            skipped=base.skipped + due.skipped,
            last_tick_ms=due.fire[-1] if due.fire else base.last_tick_ms,
            updated_ms=now_ms,
        ),
    )


def answered(
    fired: ScheduleFired, tick_ms: int, reply: AdmissionReply, now_ms: int
) -> ScheduleFired | None:
    """``fired`` once admission's ``reply`` to tick ``tick_ms`` is known; None when it says
    nothing new (an older tick's answer, or a refusal already counted)."""
    out = fired
    if fired.last_outcome_tick_ms is None or tick_ms >= fired.last_outcome_tick_ms:
        out = replace(
            out,
            last_outcome=reply.outcome.value,
            last_outcome_tick_ms=tick_ms,
            last_run_id=reply.run_id if reply.run_id is not None else out.last_run_id,
        )
    if reply.outcome is AdmissionOutcome.REFUSED and (
        fired.last_refused_tick_ms is None or tick_ms > fired.last_refused_tick_ms
    ):
        out = replace(
            out,
            refused=out.refused + 1,
            last_refusal=reply.reason or "refused",
            last_refused_tick_ms=tick_ms,
        )
    return None if out == fired else replace(out, updated_ms=now_ms)


def newest(a: ScheduleFired | None, b: ScheduleFired | None) -> ScheduleFired | None:
    """Of two records of one schedule's progress, the one further along (``through_ms``, then
    ``updated_ms``): a stale write by a sweeper that just lost the partition never moves a
    schedule back — and if it did, the ticks it re-sends carry the keys admission has seen."""
    if a is None or b is None:
        return a or b
    return max(a, b, key=lambda f: (f.through_ms, f.updated_ms))
