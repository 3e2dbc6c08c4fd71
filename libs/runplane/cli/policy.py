"""CLI: ``runplane policy check FILE`` — validate a deployment policy and print its digest.

The digest is what the executor journals with every gate and release decision
(docs/security.md, "The label model"), so an operator can tell which policy decided a run.
Exit 0 with a summary when the file parses, 2 with the reason when it does not.
"""

from __future__ import annotations

from pathlib import Path

import typer

from runplane.core.policy import parse_policy
from runplane.errors import ConfigError

EXIT_INVALID = 2

policy_app = typer.Typer(help="The deployment policy (RUNPLANE_POLICY): sinks, grants, budgets.")


@policy_app.command("check")
def check(path: Path = typer.Argument(..., help="The policy YAML file.")) -> None:
    """Parse the policy as the executor would; print its digest and what it declares."""
    try:
        policy = parse_policy(path.read_text(encoding="utf-8"))
    except (OSError, ConfigError) as exc:
        typer.echo(f"{path}: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from exc
    typer.echo(f"digest {policy.digest}")
    typer.echo(f"sinks: {', '.join(sorted(policy.sinks)) or '-'}")
    for capability, granted in sorted(policy.agents.items()):
        reach = "any sink" if granted.sinks is None else ", ".join(sorted(granted.sinks))
        releases = ", ".join(f"{g.destination} {list(g.fields) or '*'}" for g in granted.releases)
        typer.echo(
            f"agent {capability}: {reach}; releases by policy: {releases or '-'}; "
            f"others decided by {granted.release_role or 'the role each release names'}; "
            f"budget {granted.budget}"
        )
        if granted.trusted_signals:  # only when some: the lines above stay as they were
            trusted = ", ".join(
                f"{rule.name or '*'} from {rule.sender or 'any authenticated sender'}"
                for rule in granted.trusted_signals
            )
            typer.echo(f"agent {capability}: trusted signals: {trusted}")


def register(app: typer.Typer) -> None:
    app.add_typer(policy_app, name="policy")
