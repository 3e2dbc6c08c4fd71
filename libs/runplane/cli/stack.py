"""CLI: ``runplane up`` / ``down`` / ``status`` — the local Kafka + Redis stack.

Thin: the logic lives in :mod:`runplane.stack`; this module only renders it.
"""

from __future__ import annotations

import dataclasses
import os

import typer
from confluent_kafka import KafkaException
from rich.console import Console
from rich.table import Table
from rich.text import Text

from runplane.config import Settings
from runplane.kafka.clients import admin
from runplane.kafka.topics import TOPICS, create_topics
from runplane.stack import (
    StackConfig,
    StackError,
    StackReport,
    cluster_bootstrap,
    cluster_size,
    down,
    status,
    up,
)

_STYLE = {
    "running": "green",
    "external": "cyan",
    "unhealthy": "yellow",
    "blocked": "red",
    "stopped": "dim",
}


def _config() -> StackConfig:
    return StackConfig.from_settings(Settings.from_env())


def render(report: StackReport, *, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("component", "state", "address", "pid", "detail", "action"):
        table.add_column(column)
    for c in report.components:
        style = _STYLE.get(c.state, "")
        table.add_row(
            c.name,
            f"[{style}]{c.state}[/{style}]",
            c.address,
            "" if c.pid is None else str(c.pid),
            c.detail,
            c.action,
        )
    return table


def _fail(console: Console, exc: Exception) -> typer.Exit:
    console.print(Text.assemble(("error: ", "bold red"), str(exc)), highlight=False)
    return typer.Exit(code=1)


def up_command(
    topics: bool = typer.Option(
        True, "--topics/--no-topics", help="Also create the catalogue's topics (idempotent)."
    ),
    brokers: int | None = typer.Option(
        None,
        "--brokers",
        min=1,
        help="Kafka brokers: 1 (default) or a local KRaft cluster of N combined nodes "
        "(replication factor 3, min.insync.replicas 2). Also RUNPLANE_KAFKA_BROKERS.",
    ),
) -> None:
    """Start the local Kafka (KRaft) and Redis in the background and wait until they answer."""
    console = Console()
    settings = Settings.from_env()
    config = StackConfig.from_settings(settings)
    if brokers is not None:
        config = dataclasses.replace(config, brokers=brokers)
    settings = cluster_settings(settings, config)
    try:
        with console.status("starting the local stack") as line:
            report = up(config, progress=lambda msg: line.update(msg))
            if topics:
                line.update("creating topics")
                created = create_topics(settings, admin(settings))
    except (StackError, KafkaException) as exc:
        raise _fail(console, exc) from None
    console.print(render(report, title=f"runplane stack — up in {report.elapsed:.1f}s"))
    if topics:
        console.print(
            f"topics {settings.topic_prefix}*: {len(created)} created, "
            f"{len(TOPICS) - len(created)} already there",
            highlight=False,
        )
    console.print(f"state and logs: {config.state_dir}", highlight=False)
    if cluster_size(config) > 1:
        console.print(
            f"a {cluster_size(config)}-broker cluster: export "
            f"RUNPLANE_BOOTSTRAP_SERVERS={cluster_bootstrap(config)} "
            f"RUNPLANE_REPLICATION_FACTOR={settings.replication_factor}",
            highlight=False,
        )


def cluster_settings(settings: Settings, config: StackConfig) -> Settings:
    """The settings topics are created with: on a cluster of 3 or more brokers, replication
    factor 3 (so min.insync.replicas 2, ``runplane.kafka.topics``) unless
    RUNPLANE_REPLICATION_FACTOR says otherwise."""
    n = cluster_size(config)
    if n >= 3 and not os.environ.get("RUNPLANE_REPLICATION_FACTOR"):
        return dataclasses.replace(settings, replication_factor=3)
    return settings


def down_command(
    wipe: bool = typer.Option(False, "--wipe", help="Also delete Kafka's and Redis's data."),
) -> None:
    """Stop the local stack that `runplane up` started (SIGTERM, then SIGKILL)."""
    console = Console()
    try:
        with console.status("stopping the local stack") as line:
            report = down(_config(), wipe=wipe, progress=lambda msg: line.update(msg))
    except StackError as exc:
        raise _fail(console, exc) from None
    console.print(render(report, title=f"runplane stack — down in {report.elapsed:.1f}s"))


def status_command() -> None:
    """Show whether Kafka and Redis are running and answering (exit 1 when not ready)."""
    console = Console()
    config = _config()
    report = status(config)
    console.print(render(report, title="runplane stack"))
    console.print(f"state and logs: {config.state_dir}", highlight=False)
    if not report.ready:
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    """Attach the stack commands to the root app."""
    app.command("up")(up_command)
    app.command("down")(down_command)
    app.command("status")(status_command)
