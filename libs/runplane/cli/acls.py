"""CLI: ``runplane acls print|apply ROLE`` — the Kafka ACLs a principal of the platform needs.

Thin: the table lives in :mod:`runplane.kafka.acls` (docs/security.md's tables, as data).
"""

from __future__ import annotations

import typer
from confluent_kafka import KafkaError, KafkaException

from runplane.config import Settings
from runplane.errors import ConfigError
from runplane.kafka.acls import ACCESS, bindings, grants, kafka_acls_lines
from runplane.kafka.clients import admin

acls_app = typer.Typer(
    help="The Kafka ACLs each service, emitter, operator and admin principal needs.",
    no_args_is_help=True,
)

_ROLE = typer.Argument(..., help=f"one of: {', '.join(ACCESS)}")


def _principal(role: str, principal: str | None) -> str:
    return principal or f"User:runplane-{role}"


@acls_app.command("print")
def print_acls(
    role: str = _ROLE,
    principal: str | None = typer.Option(None, help="default User:runplane-<role>"),
) -> None:
    """Print ``kafka-acls.sh --add`` arguments for ROLE (for deployments that apply by hand)."""
    settings = Settings.from_env()
    try:
        rules = grants(role, settings.topic_prefix)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    for line in kafka_acls_lines(_principal(role, principal), rules):
        typer.echo(line)


@acls_app.command("apply")
def apply_acls(
    role: str = _ROLE,
    principal: str | None = typer.Option(None, help="default User:runplane-<role>"),
) -> None:
    """Create ROLE's ACLs for PRINCIPAL on the cluster (as an admin principal; idempotent)."""
    settings = Settings.from_env()
    try:
        rules = bindings(_principal(role, principal), grants(role, settings.topic_prefix))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    client = admin(settings)  # held until the futures resolve: a collected client cancels them
    for binding, future in client.create_acls(rules).items():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            if (
                exc.args
                and getattr(exc.args[0], "code", lambda: None)() == KafkaError.SECURITY_DISABLED
            ):
                # The local stack (`runplane up`) runs without an authorizer: nothing to apply.
                raise ConfigError(
                    "the broker has no authorizer (SECURITY_DISABLED), so it enforces no ACLs "
                    "— the local stack runs so; `runplane acls print ROLE` shows what a "
                    "secured cluster needs"
                ) from None
            raise
        typer.echo(f"granted {binding}")


def register(app: typer.Typer) -> None:
    app.add_typer(acls_app, name="acls")
