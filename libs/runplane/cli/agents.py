"""CLI: ``runplane agents list`` — each capability's versions, code digests and runs in flight.

"Deployed" is the agent code importable here (``RUNPLANE_AGENT_MODULES``, the setting the
executor imports); "in flight" is read from the ``sessions`` table (runs not ended, by the
version serving them). A version is safe to remove when its runs in flight are 0 or served by
a newer version of its line; a STRANDED row names runs no deployed version can serve (they
stay parked until one is). "parked" counts the runs an executor has already parked because it
could not serve their version (``runplane.core.engine.stranded``): their inbox records are
held, and served when an executor hosting the line takes them.
"""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from runplane.cli.reach import require_kafka
from runplane.config import Settings
from runplane.core.agents import import_agent_modules
from runplane.core.versions import VersionRow, inventory
from runplane.journal.export import in_flight, read_snapshots

agents_app = typer.Typer(help="Agents: versions, digests, runs in flight.", no_args_is_help=True)


@agents_app.command("list")
def agents_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Each capability's versions (deployed here or in flight), digests and runs in flight."""

    settings = Settings.from_env()
    registry = import_agent_modules(settings.agent_modules)  # a bad module is named first
    require_kafka(settings)
    deployed = {
        cap: {s.version: s.code_digest() for s in registry.versions(cap)} for cap in registry
    }
    snaps = list(in_flight(read_snapshots(settings)))
    running = [(s.capability, s.agent_version) for s in snaps]
    parked = [(s.capability, s.agent_version) for s in snaps if s.stranded_json is not None]
    rows = inventory(deployed, running, parked)
    if as_json:
        typer.echo(json.dumps([r.to_json() for r in rows], indent=2, sort_keys=True))
        return
    table = Table(title=f"agents ({len(rows)} versions)", title_justify="left")
    for col in ("capability", "version", "digest", "deployed", "in flight", "served by"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r.capability,
            r.version or "-",
            (r.digest or "")[:12],
            "yes" if r.deployed else "no",
            str(r.in_flight),
            _served_cell(r),
        )
    Console().print(table)


def _served_cell(r: VersionRow) -> str:
    """Who serves the row's runs, or why nobody does: "N runs parked, version 1 not deployed"."""
    parked = f"{r.parked} run{'s' if r.parked != 1 else ''} parked, " if r.parked else ""
    if r.stranded:
        return f"[red]STRANDED: {parked}version {r.version or '-'} not deployed[/red]"
    if r.parked:  # parked by an executor without the line; served here: released on next owner
        return f"{r.served_by or r.version or '-'} [yellow]({parked.removesuffix(', ')})[/yellow]"
    return r.served_by or r.version or "-"


def register(app: typer.Typer) -> None:
    """Attach ``runplane agents`` to the root app."""
    app.add_typer(agents_app, name="agents")
