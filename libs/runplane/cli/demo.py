"""CLI: ``runplane demo`` — the platform end to end on this machine (``make demo``).

Thin: the steps live in :mod:`runplane.demo`; this module renders them with rich (a status
line for the long steps, a line per run status change, a table per journal).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from runplane.config import SERVICE_PORTS, Settings, env_int
from runplane.demo import (
    DemoConfig,
    DemoError,
    DemoOutcome,
    DemoPorts,
    default_calendars_file,
    default_principals_file,
    demo_instance_id,
    run_demo,
)
from runplane.runs.read import RunHistory
from runplane.stack import StackConfig

_STATUS_STYLE = {
    "ADMITTED": "cyan",
    "RUNNING": "blue",
    "AWAITING_HUMAN": "yellow",
    "PARKED": "yellow",
    "COMPLETED": "green",
    "FAILED": "red",
    "QUARANTINED": "red",
}


def _styled(status: str | None) -> str:
    if status is None:
        return "[dim]unknown[/dim]"
    style = _STATUS_STYLE.get(status, "")
    return f"[{style}]{status}[/{style}]" if style else status


def _ts(ms: int | None) -> str:
    if ms is None:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%H:%M:%S")


class RichReporter:
    """Prints the demo as it goes."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._started = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def _clock(self) -> str:
        return f"[dim]{self.elapsed:6.1f}s[/dim]"

    @contextlib.contextmanager
    def progress(self, title: str) -> Iterator[Any]:
        with self.console.status(title) as line:
            yield lambda msg: line.update(f"{title}: {msg}")

    def note(self, text: str) -> None:
        self.console.print(f"{self._clock()} {text}", highlight=False)

    def run_status(self, capability: str, run_id: str, old: str | None, new: str | None) -> None:
        arrow = f"{_styled(old)} → " if old is not None else ""
        self.console.print(
            f"{self._clock()} [bold]{capability}[/bold] {run_id}: {arrow}{_styled(new)}",
            highlight=False,
        )

    def journal(
        self, capability: str, history: RunHistory, verdict: Mapping[str, Any], code: int
    ) -> None:
        table = Table(title=f"{capability} — journal of {history.run_id}", title_justify="left")
        table.add_column("seq", justify="right", no_wrap=True)
        table.add_column("era", justify="right", no_wrap=True)
        table.add_column("call", justify="right", no_wrap=True)
        table.add_column("kind", no_wrap=True)
        # The effect name is what a reader looks for: it keeps a readable width and folds,
        # while the cost column gives way first on a narrow terminal.
        table.add_column("effect", overflow="fold", min_width=22)
        table.add_column("cost", overflow="fold")
        table.add_column("stamp", no_wrap=True)
        table.add_column("hash", no_wrap=True)
        for r in history.records:
            cost = "" if r.cost is None else f"{r.cost.tokens_in}+{r.cost.tokens_out} tok"
            table.add_row(
                str(r.seq),
                str(r.era),
                "" if r.call_seq is None else str(r.call_seq),
                str(r.kind),
                r.name or r.family or "",
                cost,
                _ts(r.stamp_ms),
                r.hash[:8],
            )
        self.console.print(table)
        if code == 0:
            self.console.print(
                f"journal verify {history.run_id}: [green]verified[/green] {verdict['records']} records",
                highlight=False,
            )
        else:
            self.console.print(
                f"journal verify {history.run_id}: [red]NOT verified[/red] "
                f"(seq {verdict.get('broken_at_seq')}: {verdict.get('reason') or verdict.get('body_absent')})",
                highlight=False,
            )


def _tokens(config: DemoConfig) -> str:
    try:
        tokens = json.loads(config.tokens_file.read_text())
    except (OSError, ValueError):
        return f"see {config.tokens_file}"
    return "  ".join(f"{name} {token}" for name, token in tokens.items())


def _footer(console: Console, config: DemoConfig, outcome: DemoOutcome) -> None:
    ports = config.ports
    lines = [
        "[bold]Look around[/bold] (the services keep running):",
        "  runplane runs list                      every run, its status and cost",
    ]
    for r in outcome.runs:
        if r.run_id is not None:
            lines.append(f"  runplane journal show {r.run_id}   ({r.capability})")
    lines += [
        f"  worklist page   {config.worklist_page}   sign in with a token: {_tokens(config)}",
        f"  runs UI         {ports.url('journal', '/ui')}   (the same tokens)",
        f"  run queries     {ports.url('journal', '/runs')}   API docs {ports.url('journal', '/docs')}",
        "  metrics         " + "  ".join(ports.url(n, "/metrics") for n in SERVICE_PORTS),
        f"  logs            {config.stack.logs_dir}",
        "  dashboard       docs/grafana/runplane.json   (Grafana: Dashboards > New > Import)",
        "[bold]Prometheus[/bold]: scrape the six ports with this (prometheus.yml):",
    ]
    for line in lines:
        console.print(line, highlight=False)
    console.print(Text(ports.scrape_config().rstrip()), highlight=False)
    console.print("[bold]Stop[/bold] everything: runplane down   (or make down)", highlight=False)


def _summary(console: Console, outcome: DemoOutcome) -> None:
    table = Table(title="demo runs", title_justify="left")
    for col in ("capability", "admission", "run", "status", "journal"):
        table.add_column(col, overflow="fold")
    for r in outcome.runs:
        journal = (
            "[green]verified[/green]" if r.verified else f"[red]{r.detail or 'not verified'}[/red]"
        )
        table.add_row(
            r.capability,
            r.admission,
            r.run_id or "",
            _styled(r.status),
            journal if r.run_id else "",
        )
    console.print(table)


def demo_command(
    manual: bool = typer.Option(
        False, "--manual", help="Wait for a person to approve the refund on the worklist page."
    ),
    timeout: float = typer.Option(150.0, help="Seconds to wait for the services and for each run."),
    agents: str = typer.Option(
        "",
        "--agents",
        help="Your agent modules, comma-separated (e.g. examples.quote), served beside the "
        "examples; importable from the current directory.",
    ),
    tools: str = typer.Option(
        "",
        "--tools",
        help="Your tools config files, comma-separated (e.g. examples/tools/quote.yaml), "
        "beside the examples' billing tools.",
    ),
) -> None:
    """Bring the platform up locally and run the example agents end to end (with your own
    agents and tools beside them: --agents, --tools)."""
    # Output to a pipe or a CI log has no width of its own; rich's 80 columns would crush
    # the journal table, so give it room there while a real terminal keeps its own width.
    console = Console() if sys.stdout.isatty() else Console(width=120)
    settings = Settings.from_env()
    stack = StackConfig.from_settings(settings)
    settings = dataclasses.replace(
        settings,
        state_dir=stack.state_dir,
        instance_id=demo_instance_id(os.environ, settings.instance_id),
    )
    config = DemoConfig(
        settings=settings,
        ports=DemoPorts(
            services={name: settings.http_port(name) for name in SERVICE_PORTS},
            # The fakes' ports: RUNPLANE_DEMO_BILLING_PORT / _OPENAI_PORT, when 8398/8399 are
            # taken (or a test runs a demo of its own).
            billing=env_int(os.environ, "RUNPLANE_DEMO_BILLING_PORT", DemoPorts().billing),
            openai=env_int(os.environ, "RUNPLANE_DEMO_OPENAI_PORT", DemoPorts().openai),
        ),
        manual=manual,
        agent_modules=_listed(agents),
        tools_configs=tuple(str(Path(t).resolve()) for t in _listed(tools)),
        health_timeout_s=timeout,
        run_timeout_s=timeout,
        calendars_file=default_calendars_file(),
        examples_principals=default_principals_file(),
    )
    reporter = RichReporter(console)
    console.print(
        f"[bold]runplane demo[/bold] — state and logs under {stack.state_dir}", highlight=False
    )
    try:
        outcome = run_demo(config, reporter)
    except DemoError as exc:
        console.print(Text.assemble(("demo failed at ", "bold red"), str(exc)), highlight=False)
        if exc.log_tail:
            console.print(f"[dim]last lines of {exc.log_path}:[/dim]", highlight=False)
            console.print(Text(exc.log_tail), highlight=False)
        console.print("Stop what was started: runplane down", highlight=False)
        raise typer.Exit(code=1) from None
    _summary(console, outcome)
    if not outcome.ok:
        for problem in outcome.problems():
            console.print(Text.assemble(("problem: ", "bold red"), problem), highlight=False)
        console.print(
            f"[dim]services log: {config.stack.logs_dir / 'services.log'}[/dim]", highlight=False
        )
        raise typer.Exit(code=1)
    console.print(
        f"[green]every example run completed and its journal verifies[/green] "
        f"({reporter.elapsed:.0f}s in all)",
        highlight=False,
    )
    _footer(console, config, outcome)


def _listed(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def register(app: typer.Typer) -> None:
    """Attach the demo command to the root app."""
    app.command("demo")(demo_command)
