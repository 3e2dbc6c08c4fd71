"""CLI: ``runplane topics create|describe|delete`` — the topic catalogue on the broker.

Thin: the catalogue and the admin calls live in :mod:`runplane.kafka.topics`.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from runplane.config import Settings
from runplane.kafka.clients import admin
from runplane.kafka.topics import (
    DAY_MS,
    TOPICS,
    TopicReport,
    create_topics,
    delete_topics,
    describe_topics,
)

topics_app = typer.Typer(
    help="Create and inspect the platform's Kafka topics.", no_args_is_help=True
)


def _retention(report: TopicReport) -> str:
    if report.cleanup_policy == "compact":
        return "—"
    raw = report.retention_ms
    if raw is None:
        return ""
    ms = int(raw)
    if ms < 0:
        return "forever"
    return f"{ms / DAY_MS:g} days" if ms % DAY_MS == 0 else f"{ms} ms"


def render(reports: list[TopicReport], *, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("topic", no_wrap=True)
    table.add_column("key")
    table.add_column("parts", justify="right")
    table.add_column("cleanup")
    table.add_column("retention", no_wrap=True)
    table.add_column("status")
    for r in reports:
        if not r.exists:
            status = "[red]missing[/red]"
        elif r.drift:
            status = "[yellow]drift: " + "; ".join(r.drift) + "[/yellow]"
        else:
            status = "[green]ok[/green]"
        table.add_row(
            r.name,
            TOPICS[r.logical].key,
            "" if r.partitions is None else str(r.partitions),
            r.cleanup_policy or "",
            _retention(r),
            status,
        )
    return table


@topics_app.command("create")
def create_command() -> None:
    """Create every catalogue topic that does not exist yet (idempotent)."""
    settings = Settings.from_env()
    console = Console()
    client = admin(settings)
    created = create_topics(settings, client)
    reports = describe_topics(settings, client)
    console.print(render(reports, title=f"created {len(created)} of {len(reports)} topics"))
    if not all(r.ok for r in reports):
        raise typer.Exit(code=1)


@topics_app.command("describe")
def describe_command() -> None:
    """Show each catalogue topic as the broker has it; exit 1 if one is missing or drifted."""
    settings = Settings.from_env()
    reports = describe_topics(settings, admin(settings))
    Console().print(render(reports, title=f"topics on {settings.bootstrap_servers}"))
    if not all(r.ok for r in reports):
        raise typer.Exit(code=1)


@topics_app.command("delete")
def delete_command(
    yes: bool = typer.Option(False, "--yes", help="Really delete (all data in them is lost)."),
) -> None:
    """Delete the catalogue's topics under the configured prefix."""
    settings = Settings.from_env()
    if not yes:
        typer.echo(f"refusing without --yes: this deletes every {settings.topic_prefix}* topic")
        raise typer.Exit(code=2)
    deleted = delete_topics(settings, admin(settings))
    typer.echo(f"deleted {len(deleted)} topics")


def register(app: typer.Typer) -> None:
    """Attach the topics commands to the root app."""
    app.add_typer(topics_app, name="topics")
