"""CLI: operate a live run — ``runplane signal RUN NAME --payload JSON``,
``runplane runs update RUN NAME --payload JSON`` (prints the run's answer),
``runplane runs query RUN NAME --args JSON`` and ``runplane runs cancel RUN --reason TEXT``.

RUN is a run id or the admission key it was admitted under. Both check the run first (an
unknown or ended run is refused, exit 2, nothing sent). ``--id`` makes a retry idempotent: the
run accepts one signal (or cancel) per id.

Identity: by default both go through admission's authenticated endpoints
(``POST /runs/{run}/signals|cancel`` at ``RUNPLANE_ADMISSION_URL``, default
http://127.0.0.1:8301) with your bearer token — ``RUNPLANE_WORKLIST_TOKEN``, or the file named by
``RUNPLANE_WORKLIST_TOKEN_FILE`` (the principals file is the worklist's) — and the journaled
sender and the tenant are the token's principal (cancel needs the role ``operator``). Without a
token, or with one admission does not know, the command is refused: one line, exit 2. The direct
Kafka path (``runplane.runs.operate`` through ``runplane.Client``, the sender ``--as`` or
``RUNPLANE_INITIATOR``, only the topic's ACLs to authenticate it) exists in dev mode only —
``RUNPLANE_ADMISSION_ALLOW_UNSIGNED=true``, as unsigned admission. Admission unreachable, or
Kafka slow to take the request: exit 3 (retry with the same ``--id``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console

from runplane.config import SERVICE_PORTS, Settings, env_bool
from runplane.core.agents import import_agent_modules
from runplane.errors import RetryableError
from runplane.runs import operate
from runplane.runs.client import Client
from runplane.runs.operate import (
    RunRefused,
    Sent,
    over_http,
    query_over_http,
    update_over_http,
)

__all__ = ["register"]

T = TypeVar("T")

DEFAULT_ADMISSION_URL = f"http://127.0.0.1:{SERVICE_PORTS['admission']}"
DEV_MODE_ENV = "RUNPLANE_ADMISSION_ALLOW_UNSIGNED"
TOKEN_ENV = "RUNPLANE_WORKLIST_TOKEN"
TOKEN_FILE_ENV = "RUNPLANE_WORKLIST_TOKEN_FILE"

_URL = typer.Option(
    DEFAULT_ADMISSION_URL, "--url", envvar="RUNPLANE_ADMISSION_URL", help="admission's base URL"
)
_AS_HELP = "sender, dev mode only (default RUNPLANE_INITIATOR); with a token, the token's principal"
_TENANT_HELP = "dev mode only: refuse unless the run is this tenant's (a token names its tenant)"


def _done(sent: Sent, what: str) -> None:
    Console().print(f"{what} sent to run [bold]{sent.run_id}[/bold] (id {sent.signal_id})")


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _token() -> str | None:
    """The bearer token: ``RUNPLANE_WORKLIST_TOKEN``, else the file ``..._TOKEN_FILE`` names."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        return token
    path = os.environ.get(TOKEN_FILE_ENV, "").strip()
    if not path:
        return None
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(f"cannot read {TOKEN_FILE_ENV} ({path}): {exc}") from None
    if not token:
        raise _fail(f"{TOKEN_FILE_ENV} ({path}) is empty")
    return token


def _sender(sent_by: str | None, settings: Settings) -> str:
    """Who sends it on Kafka (dev mode): ``--as``, else RUNPLANE_INITIATOR — asked before
    anything connects."""
    who = sent_by if sent_by is not None else settings.initiator
    if who is None or not who.strip():
        raise _fail("no sender: pass --as NAME or set RUNPLANE_INITIATOR")
    return who


def _refused(exc: RunRefused) -> typer.Exit:
    Console(stderr=True).print(f"[red]refused ({exc.code}): {exc.reason}[/red]", highlight=False)
    return typer.Exit(2)


def _operate(
    over: Callable[[str], T],
    sent_by: str | None,
    tenant: str | None,
    on_kafka: Callable[[Client, str], T],
    *,
    sends: bool = True,
) -> T:
    """``over(token)`` over HTTP with the token; on Kafka in dev mode (with a sender, unless
    it ``sends`` nothing to the run); refused (exit 2) otherwise."""
    token = _token()
    try:
        if token is not None:
            if sent_by is not None or tenant is not None:
                raise _fail("--as and --tenant are for dev mode: with a token, it names you")
            return over(token)
        if not env_bool(os.environ, DEV_MODE_ENV, False):
            raise _fail(
                f"no identity: set {TOKEN_ENV} (or {TOKEN_FILE_ENV}); the direct Kafka path "
                f"without one is dev mode only ({DEV_MODE_ENV}=true)"
            )
        settings = Settings.from_env()
        who = _sender(sent_by, settings) if sends else ""
        with Client(settings) as client:
            return on_kafka(client, who)
    except RunRefused as exc:
        raise _refused(exc) from None
    except RetryableError as exc:
        raise _fail(f"{exc} (retry with the same --id)", 3) from None


def signal_cmd(
    run: str = typer.Argument(..., help="run id or admission key"),
    name: str = typer.Argument(..., help="the signal name the run waits for"),
    payload: str = typer.Option("null", "--payload", help="the signal's payload, as JSON"),
    signal_id: str | None = typer.Option(None, "--id", help="idempotency id (default: minted)"),
    sent_by: str | None = typer.Option(None, "--as", help=_AS_HELP),
    tenant: str | None = typer.Option(None, help=_TENANT_HELP),
    url: str = _URL,
) -> None:
    """Send a signal to a live run (``ctx.wait_signal``)."""
    value = _json_option(payload, "--payload")
    body: dict[str, Any] = {"name": name, "payload": value}
    if signal_id is not None:
        body["signal_id"] = signal_id
    sent = _operate(
        lambda token: over_http(url, token, run, "signals", body),
        sent_by,
        tenant,
        lambda client, who: client.signal(
            run, name, value, signal_id=signal_id, sent_by=who, tenant=tenant
        ),
    )
    _done(sent, f"signal {name!r}")


def cancel_cmd(
    run: str = typer.Argument(..., help="run id or admission key"),
    reason: str = typer.Option(..., "--reason", help="why (journaled)"),
    request_id: str | None = typer.Option(None, "--id", help="idempotency id (default: minted)"),
    sent_by: str | None = typer.Option(None, "--as", help=_AS_HELP),
    tenant: str | None = typer.Option(None, help=_TENANT_HELP),
    url: str = _URL,
) -> None:
    """Cancel a live run: RUN_CANCELLED after its clean-up (docs/operations.md, "Cancel")."""
    body: dict[str, Any] = {"reason": reason}
    if request_id is not None:
        body["request_id"] = request_id
    sent = _operate(
        lambda token: over_http(url, token, run, "cancel", body),
        sent_by,
        tenant,
        lambda client, who: client.cancel(
            run, reason=reason, sent_by=who, request_id=request_id, tenant=tenant
        ),
    )
    _done(sent, "cancel")


def update_cmd(
    run: str = typer.Argument(..., help="run id or admission key"),
    name: str = typer.Argument(..., help="the update the agent declares (UpdateDecl)"),
    payload: str = typer.Option("null", "--payload", help="the update's payload, as JSON"),
    update_id: str | None = typer.Option(None, "--id", help="idempotency id (default: minted)"),
    wait_s: float = typer.Option(10.0, "--wait", help="seconds to wait for the answer (max 30)"),
    sent_by: str | None = typer.Option(None, "--as", help=_AS_HELP),
    tenant: str | None = typer.Option(None, help=_TENANT_HELP),
    url: str = _URL,
) -> None:
    """Send an update to a live run and print its answer (``ctx.wait_update``/``ctx.answer``):
    refused by the agent's validator, exit 2 with its reason (nothing journaled); no answer
    within --wait, exit 3 (ask again with the same --id: it is answered once)."""
    value = _json_option(payload, "--payload")
    if not 0 < wait_s <= 30:
        raise typer.BadParameter("--wait is between 0 and 30 seconds")
    body: dict[str, Any] = {"name": name, "payload": value, "wait_s": wait_s}
    if update_id is not None:
        body["update_id"] = update_id

    def on_kafka(client: Client, who: str) -> operate.Answered:
        return operate.update(
            client,
            run,
            name,
            value,
            sent_by=who,
            update_id=update_id,
            tenant=tenant,
            timeout=wait_s,
        )

    answered = _operate(
        lambda token: update_over_http(url, token, run, body, timeout=wait_s),
        sent_by,
        tenant,
        on_kafka,
    )
    typer.echo(json.dumps(answered.answer, ensure_ascii=False))


def query_cmd(
    run: str = typer.Argument(..., help="run id or admission key"),
    name: str = typer.Argument(..., help="the query the agent declares (QueryDecl)"),
    args: str = typer.Option("null", "--args", help="the query's arguments, as JSON"),
    tenant: str | None = typer.Option(None, help=_TENANT_HELP),
    url: str = _URL,
) -> None:
    """Ask a run's declared query (over its last checkpoint) and print the answer: nothing
    is sent to the run, nothing journaled."""
    value = _json_option(args, "--args")

    def on_kafka(client: Client, _who: str) -> Any:
        settings = Settings.from_env()
        registry = import_agent_modules(settings.agent_modules)
        return client.query(run, name, value, registry=registry, tenant=tenant)

    answer = _operate(
        lambda token: query_over_http(url, token, run, name, value),
        None,
        tenant,
        on_kafka,
        sends=False,
    )
    typer.echo(json.dumps(answer, ensure_ascii=False))


def _json_option(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"{option} is not JSON: {exc}") from None


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
    runs.command("update")(update_cmd)
    runs.command("query")(query_cmd)
