"""CLI: ``runplane schedules create|list|pause|resume|delete`` — runs on a timetable.

A schedule is a record on the compacted ``schedules`` topic (key ``tenant/name``), written
here and nowhere else; the sweeper reads it and fires its ticks to admission
(``services.sweeper.schedules``), recording how far it got on ``schedules.fired``, which
``list`` shows next to each schedule with its next fire times. ``delete`` writes a tombstone.

Timetables (``runplane.core.schedules``): ``--cron "0 2 * * *" --tz Europe/Amsterdam`` (five
fields, an IANA zone; a skipped local time fires at the jump, a repeated one once) or
``--every 30s``. After downtime ``--catch-up skip`` (the default: ticks older than the
sweeper's grace are skipped), ``once`` (the latest only) or ``each`` (every missed tick, at
most ``--catch-up-max``). Pausing skips the ticks meanwhile: a resumed schedule fires only
ticks after its resumption.

The runs act for ``--initiator`` (or ``RUNPLANE_INITIATOR``), never the OS user. Bad
arguments are one line on stderr and exit 2; an unknown schedule exit 1.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import replace
from typing import Any
from zoneinfo import ZoneInfo

import typer
from confluent_kafka import Producer
from rich.console import Console
from rich.table import Table

# typer vendors click (typer._click): its UsageError, of which typer exports only the subclass
# BadParameter, is what a missing or unknown option raises.
from typer._click.exceptions import UsageError
from typer.core import TyperGroup

from runplane.cli.reach import require_kafka
from runplane.config import Settings
from runplane.core.schedules import (
    MAX_CATCH_UP,
    ScheduleError,
    Timetable,
    name_problem,
    parse_every,
    schedule_key,
    tick_admission_key,
    timetable_of,
)
from runplane.errors import RetryableError, WireError
from runplane.kafka.clients import producer_config
from runplane.kafka.partition import partition_for
from runplane.kafka.restore import restore_table
from runplane.wire import (
    CatchUp,
    Record,
    Schedule,
    ScheduleFired,
    TenantId,
    admission_key_problem,
    serde_for,
    tenant_problem,
    to_dict,
)


class _OneLineUsage(TyperGroup):
    """A usage mistake (a missing or unknown option) in any ``schedules`` command is one line
    on stderr and exit 2, like every other bad argument here."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            raise _bad(exc.format_message()) from None


schedules_app = typer.Typer(
    help="Start runs on a timetable: cron in a time zone, or an interval.",
    no_args_is_help=True,
    cls=_OneLineUsage,
)

TOPIC = "schedules"
FIRED = "schedules.fired"


def _bad(message: str) -> typer.Exit:
    """A bad argument: one line, exit 2 (as the root group does for runplane's errors)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def read_tables(
    settings: Settings, keys: list[str] | None = None
) -> tuple[dict[str, Schedule], dict[str, ScheduleFired]]:
    """Both tables (every partition, or only those of ``keys``), last record per key."""
    serde = serde_for(settings)
    n = settings.partitions
    parts = range(n) if keys is None else sorted({partition_for(k, n) for k in keys})

    def table(logical: str, kind: type[Record]) -> dict[str, Any]:
        def decode(data: bytes) -> Record:
            record = serde.decode(logical, data)
            if not isinstance(record, kind):  # pragma: no cover - Serde checks the topic
                raise WireError(f"not a {kind.__name__}")
            return record

        return restore_table(settings, settings.topic(logical), parts, decode, timeout_s=30)

    try:
        return table(TOPIC, Schedule), table(FIRED, ScheduleFired)
    except RetryableError as exc:
        raise typer.Exit(_fail(f"cannot read the schedules: {exc}")) from exc


def _fail(message: str) -> int:
    Console(stderr=True).print(f"[red]{message}[/red]")
    return 1


def write(settings: Settings, key: str, schedule: Schedule | None) -> None:
    """Write ``schedule`` under ``key`` (None: a tombstone) and wait for the broker."""
    producer = Producer(producer_config(settings))
    value = None if schedule is None else serde_for(settings).encode(TOPIC, schedule)
    producer.produce(settings.topic(TOPIC), key=key.encode("utf-8"), value=value)
    if producer.flush(30) != 0:
        raise typer.Exit(_fail("Kafka did not acknowledge the schedule"))


def _catch_up(text: str) -> CatchUp:
    try:
        return CatchUp(text.strip().upper())
    except ValueError:
        raise _bad(f"--catch-up {text!r}: one of skip, once, each") from None


@schedules_app.command("create")
def create(
    name: str = typer.Argument(..., help="unique within the tenant: a-z 0-9 . _ -"),
    capability: str = typer.Option(..., "--capability", help="the agent each tick runs"),
    input_json: str = typer.Option("{}", "--input", help="each run's input as JSON"),
    cron: str | None = typer.Option(None, "--cron", help='five fields, e.g. "0 2 * * *"'),
    tz: str = typer.Option("UTC", "--tz", help="IANA time zone of --cron"),
    every: str | None = typer.Option(None, "--every", help="a plain interval: 30s, 5m, 2h, 1d"),
    catch_up: str = typer.Option("skip", "--catch-up", help="after downtime: skip, once, each"),
    catch_up_max: int = typer.Option(10, "--catch-up-max", help="each: at most this many"),
    tenant: str = typer.Option("default", "--tenant"),
    initiator: str | None = typer.Option(
        None,
        "--initiator",
        envvar="RUNPLANE_INITIATOR",
        help="the principal the runs act for (default: RUNPLANE_INITIATOR; required)",
    ),
    paused: bool = typer.Option(False, "--paused", help="create it paused"),
) -> None:
    """Create a schedule (refused if the name exists in the tenant: delete it first)."""
    problem = name_problem(name) or tenant_problem(tenant)
    if problem:
        raise _bad(problem)
    try:
        value = json.loads(input_json)
    except ValueError as exc:
        raise _bad(f"--input is not JSON: {exc}") from None
    rule = _catch_up(catch_up)
    if not 1 <= catch_up_max <= MAX_CATCH_UP:
        raise _bad(f"--catch-up-max {catch_up_max}: between 1 and {MAX_CATCH_UP}")
    if (cron is None) == (every is None):
        raise _bad("give --cron (with --tz) or --every, not both")
    if not capability.strip():
        raise _bad("--capability must not be empty")
    now = _now_ms()
    try:
        every_ms = None if every is None else parse_every(every)
        timetable = Timetable(cron=cron, tz=tz if cron else "UTC", every_ms=every_ms, anchor_ms=now)
    except ScheduleError as exc:
        raise _bad(str(exc)) from None
    settings = Settings.from_env()
    who = initiator if initiator is not None else settings.initiator
    if who is None or not who.strip():
        raise _bad("no initiator: pass --initiator NAME or set RUNPLANE_INITIATOR")
    key_problem = admission_key_problem(tick_admission_key(tenant, name, 10**13))
    if key_problem:
        raise _bad(f"tenant and name too long for a tick's admission key: {key_problem}")
    require_kafka(settings)  # after the arguments: a malformed one is named as such first
    key = schedule_key(tenant, name)
    existing, _ = read_tables(settings, [key])
    if key in existing:
        raise typer.Exit(_fail(f"schedule {key} exists; delete it first"))
    schedule = Schedule(
        tenant=TenantId(tenant),
        name=name,
        capability=capability,
        input_json=json.dumps(value, separators=(",", ":"), sort_keys=True),
        initiator=who,
        cron=timetable.cron,
        tz=timetable.tz,
        every_ms=timetable.every_ms,
        anchor_ms=now,
        catch_up=rule,
        catch_up_max=catch_up_max,
        paused=paused,
        since_ms=now,
        created_ms=now,
        updated_ms=now,
        updated_by=who,
    )
    write(settings, key, schedule)
    typer.echo(f"{key}: created; next fire {_instant(timetable.next_after(now), timetable.tz)}")


def _get(settings: Settings, tenant: str, name: str) -> tuple[str, Schedule]:
    problem = name_problem(name) or tenant_problem(tenant)
    if problem:
        raise _bad(problem)
    key = schedule_key(tenant, name)
    defs, _ = read_tables(settings, [key])
    if key not in defs:
        raise typer.Exit(_fail(f"no schedule {key}"))
    return key, defs[key]


def _change(name: str, tenant: str, *, paused: bool) -> None:
    settings = Settings.from_env()
    key, current = _get(settings, tenant, name)
    if current.paused == paused:
        typer.echo(f"{key}: already {'paused' if paused else 'active'}")
        return
    now = _now_ms()
    # Resuming moves since_ms: the ticks of the paused stretch are never caught up.
    changed = replace(
        current,
        paused=paused,
        since_ms=current.since_ms if paused else now,
        updated_ms=now,
        updated_by=settings.initiator,
    )
    write(settings, key, changed)
    typer.echo(f"{key}: {'paused' if paused else 'resumed'}")


@schedules_app.command("pause")
def pause(
    name: str = typer.Argument(...), tenant: str = typer.Option("default", "--tenant")
) -> None:
    """Pause a schedule: nothing fires until it is resumed."""
    _change(name, tenant, paused=True)


@schedules_app.command("resume")
def resume(
    name: str = typer.Argument(...), tenant: str = typer.Option("default", "--tenant")
) -> None:
    """Resume a paused schedule (the ticks it missed while paused are not fired)."""
    _change(name, tenant, paused=False)


@schedules_app.command("delete")
def delete(
    name: str = typer.Argument(...), tenant: str = typer.Option("default", "--tenant")
) -> None:
    """Delete a schedule (a tombstone; the sweeper then drops its progress)."""
    settings = Settings.from_env()
    key, _ = _get(settings, tenant, name)
    write(settings, key, None)
    typer.echo(f"{key}: deleted")


def _instant(ms: int | None, tz: str = "UTC") -> str:
    if ms is None:
        return ""
    at = dt.datetime.fromtimestamp(ms / 1000, tz=ZoneInfo(tz))
    return at.isoformat(timespec="seconds")


def describe(
    schedule: Schedule, fired: ScheduleFired | None, now_ms: int, upcoming: int
) -> dict[str, Any]:
    """One schedule for ``list --json``: its record, its progress and its next fire times."""
    timetable = timetable_of(schedule)
    nexts: list[int] = []
    if not schedule.paused:
        t = now_ms
        for _ in range(upcoming):
            t = timetable.next_after(t)
            nexts.append(t)
    out = to_dict(schedule)
    out["input"] = json.loads(out.pop("input_json"))
    out["next"] = [_instant(t, schedule.tz) for t in nexts]
    out["next_ms"] = nexts
    out["fired"] = None if fired is None else to_dict(fired)
    return out


@schedules_app.command("list")
def list_schedules(
    tenant: str | None = typer.Option(None, "--tenant", help="only this tenant's"),
    upcoming: int = typer.Option(
        1, "--next", min=1, max=100, help="how many next fire times to show (1-100)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
) -> None:
    """List schedules with their next fire times and how their ticks were answered."""
    settings = Settings.from_env()
    defs, fired = read_tables(settings)
    now = _now_ms()
    rows = [
        describe(s, fired.get(k), now, upcoming)
        for k, s in sorted(defs.items())
        if tenant is None or s.tenant == tenant
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    table = Table(title=f"schedules · {len(rows)}", title_justify="left")
    for column in ("schedule", "when", "capability", "catch-up", "state", "next", "fired", "last"):
        table.add_column(column)
    for row in rows:
        when = f"{row['cron']} {row['tz']}" if row["cron"] else f"every {row['every_ms'] // 1000}s"
        rule = row["catch_up"].lower()
        if row["catch_up"] == CatchUp.EACH.value:
            rule += f" ≤{row['catch_up_max']}"
        f = row["fired"] or {}
        last = f.get("last_outcome") or ""
        if f.get("refused"):
            last += f" · {f['refused']} refused: {f.get('last_refusal')}"
        table.add_row(
            f"{row['tenant']}/{row['name']}",
            when,
            row["capability"],
            rule,
            "paused" if row["paused"] else "active",
            "\n".join(row["next"]),
            str(f.get("fired", 0)),
            last,
        )
    Console().print(table)


def register(app: typer.Typer) -> None:
    """Attach the schedules commands to the root app."""
    app.add_typer(schedules_app, name="schedules")
