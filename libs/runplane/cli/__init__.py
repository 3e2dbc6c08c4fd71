"""The ``runplane`` console script.

Each command group lives in its own module and registers itself on the root app, so the
groups stay small and independent: stack (up/down/status), topics, serve, lint, emit, runs
and journal, cases, tasks, demo.
"""

from __future__ import annotations

import typer

from runplane.cli import cases, demo, emit, journal, lint, principals, serve, stack, tasks, topics

app = typer.Typer(
    name="runplane",
    help="Durable AI agents and business workflows on Apache Kafka.",
    no_args_is_help=True,
    add_completion=False,
)

for _module in (stack, topics, serve, lint, emit, journal, cases, tasks, principals, demo):
    _module.register(app)


def main() -> None:
    app()
