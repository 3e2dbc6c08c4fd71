"""CLI: ``runplane principals new`` — mint a bearer token and the principals-file entry for it.

A deployment stores only the SHA-256 of each token (``runplane.auth``), so a token has to be
made somewhere: this prints a fresh ``secrets.token_urlsafe(32)`` (256 random bits) once, and
the YAML entry to paste under ``principals:`` in the principals file (or its Kubernetes
secret). Nothing is written anywhere: the token exists on this terminal only; hand it to its
owner over a channel you trust, who keeps it in ``RUNPLANE_WORKLIST_TOKEN`` rather than on
command lines (where shell history would keep it).

    runplane principals new --name ada --roles finance,auditor
"""

from __future__ import annotations

import secrets
from typing import Annotated

import typer
import yaml

from runplane.auth import Principal, token_digest
from runplane.errors import ConfigError

principals_app = typer.Typer(
    help="Principals of the worklist and journal APIs: mint tokens.", no_args_is_help=True
)


def new_entry(name: str, roles: list[str], token: str) -> str:
    """The principals-file entry (YAML, a one-item list) for ``name`` holding ``token``;
    ConfigError when the name or a role would be refused by the services."""
    if any(not r or r != r.strip() for r in roles):
        raise ConfigError("roles must be non-empty names without surrounding spaces")
    digest = token_digest(token)
    Principal(name, digest, frozenset(roles))  # the services' own validation
    entry = [{"name": name, "token_sha256": digest, "roles": roles}]
    return yaml.safe_dump(entry, sort_keys=False, default_flow_style=None)


@principals_app.command("new")
def new(
    name: Annotated[str, typer.Option("--name", help="The principal's name (no spaces).")],
    roles: Annotated[
        str, typer.Option("--roles", help="Comma-separated roles, e.g. finance,auditor.")
    ] = "",
) -> None:
    """Print a fresh token (once) and the principals-file entry holding its SHA-256."""
    role_list = [r.strip() for r in roles.split(",") if r.strip()]
    token = secrets.token_urlsafe(32)
    try:
        entry = new_entry(name, role_list, token)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    typer.echo(f"token (shown once; give it to {name}, store it nowhere else):")
    typer.echo(f"  {token}")
    typer.echo("")
    typer.echo("principals file entry (under `principals:`):")
    typer.echo(entry.rstrip("\n"))
    typer.echo("")
    typer.echo(f"{name} then signs in with:  export RUNPLANE_WORKLIST_TOKEN=<the token>")


def register(app: typer.Typer) -> None:
    """Attach the principals commands to the root app."""
    app.add_typer(principals_app, name="principals")
