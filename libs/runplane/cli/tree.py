"""CLI: ``runplane runs tree RUN_ID`` — a run, the runs it commissioned, and its parent.

Reads each run's journal straight from Kafka (``runplane.runs.read.read_run``, no bodies) and folds
the links (``runplane.journal.tree``): a commission's records name its child, a child's
RUN_ADMITTED names its parent.
"""

from __future__ import annotations

import json

import typer

from runplane.cli.journal import find_run, no_such_run
from runplane.cli.runs import runs_app
from runplane.config import Settings
from runplane.journal.tree import parent_link, tree
from runplane.runs.read import read_run
from runplane.wire import JournalRecord


def runs_tree(
    run_id: str = typer.Argument(..., metavar="RUN", help="run id or admission key"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """A run's commission tree: the children it started (recursively) and its parent."""
    settings = Settings.from_env()

    def read(rid: str) -> list[JournalRecord]:
        return list(read_run(settings, rid, bodies=False).records)

    asked = run_id
    run_id, _ = find_run(settings, asked)
    own = read(run_id)
    if not own:
        # Nothing to draw: a mistyped id or key, not a run of unknown status.
        raise no_such_run(asked)
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
