"""CLI: operate a live run — ``runplane signal RUN NAME --payload JSON`` and
``runplane runs cancel RUN --reason TEXT``.

RUN is a run id or the admission key it was admitted under. Both check the run first (an
unknown or ended run is refused, exit 2, nothing sent) and produce to the run's inbox through
``runplane.Client`` (``runplane.runs.operate``). ``--id`` makes a retry idempotent: the run accepts
one signal (or cancel) per id. The sender is ``--as`` or ``RUNPLANE_INITIATOR``, journaled
with the request; on Kafka the topic's ACLs authenticate it (over HTTP the bearer token does).
"""

from __future__ import annotations

import json

import typer
from rich.console import Console

from runplane.config import Settings
from runplane.runs.client import Client
from runplane.runs.operate import RunRefused, Sent

__all__ = ["register"]


def _done(sent: Sent, what: str) -> None:
    Console().print(f"{what} sent to run [bold]{sent.run_id}[/bold] (id {sent.signal_id})")


def _sender(sent_by: str | None, settings: Settings) -> str:
    """Who sends it: ``--as``, else RUNPLANE_INITIATOR — asked before anything connects."""
    who = sent_by if sent_by is not None else settings.initiator
    if who is None or not who.strip():
        typer.echo("error: no sender: pass --as NAME or set RUNPLANE_INITIATOR", err=True)
        raise typer.Exit(2)
    return who


def _refused(exc: RunRefused) -> typer.Exit:
    Console(stderr=True).print(f"[red]refused ({exc.code}): {exc.reason}[/red]")
    return typer.Exit(2)


def signal_cmd(
    run: str = typer.Argument(..., help="run id or admission key"),
    name: str = typer.Argument(..., help="the signal name the run waits for"),
    payload: str = typer.Option("null", "--payload", help="the signal's payload, as JSON"),
    signal_id: str | None = typer.Option(None, "--id", help="idempotency id (default: minted)"),
    sent_by: str | None = typer.Option(None, "--as", help="sender (default RUNPLANE_INITIATOR)"),
    tenant: str | None = typer.Option(None, help="refuse unless the run is this tenant's"),
) -> None:
    """Send a signal to a live run (``ctx.wait_signal``)."""
    try:
        value = json.loads(payload)
    except ValueError as exc:
        raise typer.BadParameter(f"--payload is not JSON: {exc}") from None
    settings = Settings.from_env()
    who = _sender(sent_by, settings)
    with Client(settings) as client:
        try:
            sent = client.signal(run, name, value, signal_id=signal_id, sent_by=who, tenant=tenant)
        except RunRefused as exc:
            raise _refused(exc) from None
    _done(sent, f"signal {name!r}")


def cancel_cmd(
    run: str = typer.Argument(..., help="run id or admission key"),
    reason: str = typer.Option(..., "--reason", help="why (journaled)"),
    request_id: str | None = typer.Option(None, "--id", help="idempotency id (default: minted)"),
    sent_by: str | None = typer.Option(None, "--as", help="requester (default RUNPLANE_INITIATOR)"),
    tenant: str | None = typer.Option(None, help="refuse unless the run is this tenant's"),
) -> None:
    """Cancel a live run: RUN_CANCELLED after its clean-up (docs/operations.md, "Cancel")."""
    settings = Settings.from_env()
    who = _sender(sent_by, settings)
    with Client(settings) as client:
        try:
            sent = client.cancel(
                run, reason=reason, sent_by=who, request_id=request_id, tenant=tenant
            )
        except RunRefused as exc:
            raise _refused(exc) from None
    _done(sent, "cancel")


def register(app: typer.Typer) -> None:
    """``signal`` on the root app; ``cancel`` in the ``runs`` group, found by its name on the
    app (whichever module registered it: register this module after it)."""
    app.command("signal")(signal_cmd)
    runs = next(
        (g.typer_instance for g in app.registered_groups if g.name == "runs"),
        None,
    )
    if runs is None:
        raise RuntimeError("the runs command group must be registered before runplane.cli.operate")
    runs.command("cancel")(cancel_cmd)
