"""CLI: ``runplane agents list`` — each capability's versions, code digests and runs in flight.

"Deployed" is the agent code importable here (``RUNPLANE_AGENT_MODULES``, the setting the
executor imports); "in flight" is read from the ``sessions`` table (runs not ended, by the
version serving them). A version is safe to remove when its runs in flight are 0 or served by
a newer version of its line; a STRANDED row names runs no deployed version can serve (they
stay parked until one is).
"""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from runplane.config import Settings
from runplane.core.agents import import_agent_modules
from runplane.core.versions import inventory

agents_app = typer.Typer(help="Agents: versions, digests, runs in flight.", no_args_is_help=True)


@agents_app.command("list")
def agents_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Each capability's versions (deployed here or in flight), digests and runs in flight."""
    from runplane.journal.export import in_flight, read_snapshots

    settings = Settings.from_env()
    registry = import_agent_modules(settings.agent_modules)
    deployed = {
        cap: {s.version: s.code_digest() for s in registry.versions(cap)} for cap in registry
    }
    running = [(s.capability, s.agent_version) for s in in_flight(read_snapshots(settings))]
    rows = inventory(deployed, running)
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
            "[red]STRANDED (parked)[/red]" if r.stranded else (r.served_by or r.version or "-"),
        )
    Console().print(table)


def register(app: typer.Typer) -> None:
    """Attach ``runplane agents`` to the root app."""
    app.add_typer(agents_app, name="agents")
