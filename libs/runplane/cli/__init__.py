"""The ``runplane`` console script.

Each command group lives in its own module and registers itself on the root app, so the
groups stay small and independent: stack (up/down/status), topics, serve, lint, emit, runs
and journal, cases, tasks, demo.
"""

from __future__ import annotations

# First, before the imports below (seconds on a busy machine): when this is the console
# script, a SIGTERM sent while they run is remembered and honoured once `serve` starts,
# instead of killing the service with -15 (every other command gets it back in main()).
from runplane.serving.shutdown import catch_early, release_early

catch_early()

import sys  # noqa: E402
from typing import Any  # noqa: E402

import typer  # noqa: E402
from typer.core import TyperGroup  # noqa: E402

from runplane.cli import (  # noqa: E402
    acls,
    cases,
    demo,
    emit,
    journal,
    lint,
    operate,
    policy,
    principals,
    runs,
    serve,
    stack,
    tasks,
    topics,
    tree,
    watch,
)
from runplane.errors import RunplaneError  # noqa: E402


class _OneLineErrors(TyperGroup):
    """The root command group: an error runplane raises on purpose (bad configuration, a
    value the wire refuses, …) that a command did not turn into its own message becomes one
    line and exit 2 — a person at the CLI never reads a traceback for a mistake of theirs."""

    def invoke(self, ctx: Any) -> Any:  # click.Context (typer vendors its own click)
        try:
            return super().invoke(ctx)
        except RunplaneError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None


app = typer.Typer(
    name="runplane",
    help="Durable AI agents and business workflows on Apache Kafka.",
    no_args_is_help=True,
    add_completion=False,
    cls=_OneLineErrors,
)

for _module in (
    stack,
    topics,
    serve,
    lint,
    emit,
    journal,
    cases,
    tasks,
    principals,
    demo,
    acls,
    runs,
):
    _module.register(app)
operate.register(app)  # after runs: it adds `runs cancel` to the runs group
policy.register(app)  # runplane policy check
watch.register(app)  # runplane runs watch
tree.register(app)  # `runs tree` (commissions): after runs, which owns the runs group

# Versions and replay testing: `journal export`, `replay`, `agents list`.
from runplane.cli import agents as _agents  # noqa: E402
from runplane.cli import replay as _replay  # noqa: E402
from runplane.cli import schedules as _schedules  # noqa: E402

for _module in (_replay, _agents, _schedules):
    _module.register(app)


def main() -> None:
    if sys.argv[1:2] != ["serve"]:
        release_early()  # only `serve` installs handlers of its own
    app()
