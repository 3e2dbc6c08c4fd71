"""CLI: ``runplane principals new`` — mint a bearer token and the principals-file entry for it;
``runplane emitters new-key`` — an emitter's Ed25519 signing key and its emitters-file entry.

A deployment stores only the SHA-256 of each token (``runplane.serving.auth``), so a token has to be
made somewhere: this prints a fresh ``secrets.token_urlsafe(32)`` (256 random bits) once, and
the YAML entry to paste under ``principals:`` in the principals file (or its Kubernetes
secret). Nothing is written anywhere: the token exists on this terminal only; hand it to its
owner over a channel you trust, who keeps it in ``RUNPLANE_WORKLIST_TOKEN`` rather than on
command lines (where shell history would keep it).

    runplane principals new --name ada --roles finance,auditor --tenant acme
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Annotated

import typer
import yaml

from runplane.errors import ConfigError
from runplane.serving.auth import DEFAULT_TENANT, Principal, token_digest
from runplane.signing.admission import Emitters, SigningKey

principals_app = typer.Typer(
    help="Principals of the worklist and journal APIs: mint tokens.", no_args_is_help=True
)


def new_entry(name: str, roles: list[str], token: str, tenant: str = DEFAULT_TENANT) -> str:
    """The principals-file entry (YAML, a one-item list) for ``name`` holding ``token``;
    ConfigError when the name or a role would be refused by the services."""
    if any(not r or r != r.strip() for r in roles):
        raise ConfigError("roles must be non-empty names without surrounding spaces")
    digest = token_digest(token)
    Principal(name, digest, frozenset(roles), tenant)  # the services' own validation
    entry = [{"name": name, "token_sha256": digest, "roles": roles, "tenant": tenant}]
    return yaml.safe_dump(entry, sort_keys=False, default_flow_style=None)


@principals_app.command("new")
def new(
    name: Annotated[str, typer.Option("--name", help="The principal's name (no spaces).")],
    roles: Annotated[
        str, typer.Option("--roles", help="Comma-separated roles, e.g. finance,auditor.")
    ] = "",
    tenant: Annotated[
        str, typer.Option("--tenant", help="The tenant whose tasks and runs they see.")
    ] = DEFAULT_TENANT,
) -> None:
    """Print a fresh token (once) and the principals-file entry holding its SHA-256."""
    role_list = [r.strip() for r in roles.split(",") if r.strip()]
    token = secrets.token_urlsafe(32)
    try:
        entry = new_entry(name, role_list, token, tenant)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    typer.echo(f"token (shown once; give it to {name}, store it nowhere else):")
    typer.echo(f"  {token}")
    typer.echo("")
    typer.echo("principals file entry (under `principals:`):")
    typer.echo(entry.rstrip("\n"))
    typer.echo("")
    typer.echo(f"{name} then signs in with:  export RUNPLANE_WORKLIST_TOKEN=<the token>")


# --- emitters: signing keys for admission ----------------------------------------------------

emitters_app = typer.Typer(
    help="Emitters of admission requests: make signing keys.", no_args_is_help=True
)


def emitter_entry(name: str, tenant: str, key: SigningKey, initiators: list[str] | None) -> str:
    """The emitters-file entry (YAML, a one-item list) registering ``key``'s public half;
    ConfigError when admission would refuse the entry."""
    entry: dict[str, object] = {"name": name, "tenant": tenant}
    if initiators:
        entry["initiators"] = initiators
    entry["keys"] = [{"id": key.key_id, "public_key": key.public_b64()}]
    Emitters.from_data([entry])  # admission's own validation
    return yaml.safe_dump([entry], sort_keys=False, default_flow_style=None)


@emitters_app.command("new-key")
def new_key(
    name: Annotated[str, typer.Option("--name", help="The emitter (a system), e.g. billing-gw.")],
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant it speaks for.")],
    out: Annotated[Path, typer.Option("--out", help="Where to write the private key (0600).")],
    key_id: Annotated[
        str | None, typer.Option("--key-id", help="Default: NAME-<UTC date>-<4 hex>.")
    ] = None,
    initiators: Annotated[
        str,
        typer.Option("--initiators", help="Comma-separated initiators it may name; default any."),
    ] = "",
) -> None:
    """Write a fresh Ed25519 private key to OUT and print its emitters-file entry.

    Rotation: make a new key with another id, add its entry's key under the same emitter
    (both are active), switch the emitter over, then mark the old key ``revoked: true``.
    """
    kid = key_id or f"{name}-{time.strftime('%Y%m%d', time.gmtime())}-{secrets.token_hex(2)}"
    try:
        key = SigningKey.generate(kid)
        entry = emitter_entry(name, tenant, key, [i for i in initiators.split(",") if i.strip()])
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if out.exists():
        raise typer.BadParameter(f"{out} exists: a key is never overwritten")
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(key.to_text() + "\n")
    typer.echo(f"private key {kid} written to {out} (mode 0600; keep it with the emitter only)")
    typer.echo("")
    typer.echo(
        "emitters file entry (under `emitters:`, admission's RUNPLANE_ADMISSION_EMITTERS_FILE):"
    )
    typer.echo(entry.rstrip("\n"))
    typer.echo("")
    typer.echo(f"the emitter then signs with:  export RUNPLANE_EMITTER_KEY_FILE={out}")


def register(app: typer.Typer) -> None:
    """Attach the principals and emitters commands to the root app."""
    app.add_typer(principals_app, name="principals")
    app.add_typer(emitters_app, name="emitters")
