"""CLI: ``runplane cases show CASE [--json]`` — a case's state, version and obligations —
and ``runplane cases close CASE --as NAME`` (refused while an obligation is open).

Reads the compacted ``cases`` topic directly (the cases service's own table): only the
case's partition, to its end under ``read_committed``, last record for the key wins. No
service needs to be running to show a case; closing one is a command the cases service answers.
Closing names who asks (``--as`` or ``RUNPLANE_INITIATOR``, as ``signal`` does; on Kafka the
topic's ACLs authenticate it), and a case nobody knows is refused before anything is sent
("no case", exit 2): a close must never create the case it closes.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from typing import Any

import typer
from confluent_kafka import Producer
from rich.console import Console
from rich.table import Table

from runplane.cli.operate import _sender as sender
from runplane.config import Settings
from runplane.errors import RetryableError, WireError
from runplane.kafka.clients import producer_config
from runplane.runs.read import read_case as read_committed_case
from runplane.wire import CaseRecord, CloseCase, serde_for, to_dict

cases_app = typer.Typer(
    help="Inspect cases: versioned state and obligations.", no_args_is_help=True
)


def read_case(settings: Settings, case_id: str, *, timeout_s: float = 30.0) -> CaseRecord | None:
    """The latest committed CaseRecord of ``case_id`` (``runplane.runs.read.read_case``), or None if
    the case does not exist; exit 1 with the reason when it cannot be read."""
    try:
        return read_committed_case(settings, case_id, timeout_s=timeout_s)
    except (RetryableError, WireError) as exc:
        raise typer.Exit(_fail(str(exc))) from exc


def _fail(message: str) -> int:
    Console(stderr=True).print(f"[red]{message}[/red]")
    return 1


def _instant(ms: int | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


def as_json(case: CaseRecord) -> dict[str, Any]:
    """The case for ``--json``: the wire fields, state parsed, instants also in ISO 8601."""
    out = to_dict(case)
    out["state"] = json.loads(case.state_json)
    del out["state_json"]
    out["updated"] = _instant(case.updated_ms)
    for ob in out["obligations"]:
        ob["due"] = _instant(ob["due_ms"])
        ob["warn"] = _instant(ob["warn_ms"])
        ob["rule"] = json.loads(ob.pop("rule_json"))
    out.pop("applied")  # idempotency bookkeeping, not the case
    return out


def render(case: CaseRecord) -> Table:
    status = "closed" if case.closed else "open"
    table = Table(
        title=f"case {case.case_id} · version {case.version} · {status} · updated {_instant(case.updated_ms)}",
        title_justify="left",
    )
    for column in (
        "obligation",
        "status",
        "due (UTC)",
        "warn (UTC)",
        "calendar",
        "rule",
        "on breach",
        "sweep run",
    ):
        table.add_column(column)
    for ob in case.obligations:
        table.add_row(
            ob.name,
            ob.status.value,
            _instant(ob.due_ms) or "",
            _instant(ob.warn_ms) or "",
            f"{ob.calendar} {ob.calendar_digest[:12]}",
            ob.rule_json,
            ob.on_breach or "",
            ob.sweep_run_id or "",
        )
    return table


@cases_app.command("show")
def show(
    case_id: str = typer.Argument(..., help="The case id, e.g. c-1a2b3c…"),
    as_json_flag: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Show a case's state, version and obligations (status and due instants)."""
    settings = Settings.from_env()
    case = read_case(settings, case_id)
    if case is None:
        raise typer.Exit(_fail(f"no case {case_id!r} in {settings.topic('cases')}"))
    if as_json_flag:
        typer.echo(json.dumps(as_json(case), indent=2, sort_keys=True))
        return
    console = Console()
    console.print(render(case))
    console.print("state:", json.dumps(json.loads(case.state_json), indent=2, sort_keys=True))


def close_case(
    settings: Settings, case_id: str, by: str, *, timeout_s: float = 60.0
) -> tuple[bool, str | None]:
    """Ask the cases service to close ``case_id`` for ``by``; (accepted, reason) once it has
    answered.

    The command carries no ``reply_to``: the answer is the entry the service remembers under
    the command's request id in the case record (``applied``), read back from ``cases``. The
    request id names who asked, so the case's record keeps it."""
    request_id = f"cli/close/{by}/{uuid.uuid4().hex}"
    command = CloseCase(case_id=case_id, request_id=request_id)
    producer = Producer(producer_config(settings))
    producer.produce(
        settings.topic("cases.commands"),
        key=case_id.encode("utf-8"),
        value=serde_for(settings).encode("cases.commands", command),
    )
    if producer.flush(30) != 0:
        raise typer.Exit(_fail("Kafka did not acknowledge the close command"))
    prefix = "[" + json.dumps(request_id) + ","
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        case = read_case(settings, case_id)
        for entry in () if case is None else case.applied:
            if entry.startswith(prefix):
                _, _, accepted, _, reason = json.loads(entry)
                return bool(accepted), reason
        time.sleep(0.5)
    raise typer.Exit(
        _fail(f"the cases service did not answer within {timeout_s:g}s: is it running?")
    )


@cases_app.command("close")
def close(
    case_id: str = typer.Argument(..., help="The case id, e.g. c-1a2b3c…"),
    sent_by: str | None = typer.Option(
        None, "--as", help="who closes it (default RUNPLANE_INITIATOR)"
    ),
) -> None:
    """Close a case; refused (exit 1, with the reason) while an obligation is open or warned,
    and (exit 2) when there is no such case."""
    settings = Settings.from_env()
    who = sender(sent_by, settings)
    if read_case(settings, case_id) is None:
        typer.echo(f"no case {case_id!r} in {settings.topic('cases')}: nothing closed", err=True)
        raise typer.Exit(2)
    accepted, reason = close_case(settings, case_id, who)
    if not accepted:
        raise typer.Exit(_fail(f"{case_id}: refused: {reason}"))
    typer.echo(f"{case_id}: closed" + (f" ({reason})" if reason else ""))


def register(app: typer.Typer) -> None:
    """Attach the cases commands to the root app."""
    app.add_typer(cases_app, name="cases")
