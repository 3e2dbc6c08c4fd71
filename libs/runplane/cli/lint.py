"""CLI: ``runplane lint PATH…`` — the determinism lint over agent code.

Prints one line per finding (``file:line:col: CODE what — use instead``) and exits 1 when
there is any, 0 when the code stays behind its StepCtx, 2 when a path does not exist or a
file does not parse.
"""

from __future__ import annotations

from pathlib import Path

import typer

from runplane.core.manifest import lint_paths

EXIT_FINDINGS = 1
EXIT_USAGE = 2


def lint(
    paths: list[Path] = typer.Argument(..., help="Python files or directories with agent code."),
) -> None:
    """Reject agent code that reads the wall clock, random, uuid1/4, the environment,
    secrets, or opens sockets/HTTP clients outside the context."""
    missing = [p for p in paths if not p.exists()]
    if missing:
        typer.echo(f"no such path: {', '.join(map(str, missing))}", err=True)
        raise typer.Exit(EXIT_USAGE)
    try:
        findings = lint_paths(paths)
    except SyntaxError as exc:
        typer.echo(f"{exc.filename}:{exc.lineno}: cannot parse: {exc.msg}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    for finding in findings:
        typer.echo(str(finding))
    if findings:
        typer.echo(f"{len(findings)} finding(s)", err=True)
        raise typer.Exit(EXIT_FINDINGS)
    typer.echo("no findings")


def register(app: typer.Typer) -> None:
    """Attach ``runplane lint`` to the root app."""
    app.command("lint")(lint)
