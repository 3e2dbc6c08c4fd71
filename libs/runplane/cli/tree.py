"""CLI: ``runplane runs tree RUN_ID`` — a run, the runs it commissioned, and its parent.

Reads each run's journal straight from Kafka (``runplane.runs.read.read_run``, no bodies) and folds
the links (``runplane.journal.tree``): a commission's records name its child, a child's
RUN_ADMITTED names its parent.
"""

from __future__ import annotations

import json

import typer

from runplane.cli.runs import runs_app
from runplane.config import Settings
from runplane.journal.tree import parent_link, tree
from runplane.runs.read import read_run
from runplane.wire import JournalRecord


def runs_tree(run_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """A run's commission tree: the children it started (recursively) and its parent."""
    settings = Settings.from_env()

    def read(rid: str) -> list[JournalRecord]:
        return list(read_run(settings, rid, bodies=False).records)

    own = read(run_id)
    if not own:
        # Nothing to draw: a mistyped id, not a run of unknown status (exit 4, as journal verify).
        typer.echo(f"no journal records for run {run_id!r}", err=True)
        raise typer.Exit(4)
    root = tree(run_id, read)
    parent = parent_link(own)
    if as_json:
        typer.echo(json.dumps({"parent": parent, "tree": root.to_json()}, indent=2))
        return
    if parent is not None:
        typer.echo(f"parent: {parent}")
    for line in root.lines():
        typer.echo(line)


def register(app: typer.Typer) -> None:
    """Attach ``tree`` to the ``runs`` group (which ``cli/runs.py`` owns)."""

    runs_app.command("tree")(runs_tree)
