"""CLI: ``runplane emit CAPABILITY --key KEY --input JSON`` — ask admission for a run.

``--input`` takes the JSON itself, ``@FILE`` (read from a file) or ``-`` (read from stdin); an
input over admission's size limit is refused before anything is sent (one line, exit 2).

Prints the run id and whether it was admitted, a duplicate (of which run, in which status)
or refused (and why). Exit status: 0 admitted or duplicate, 1 refused, 2 bad arguments
(including no initiator), 3 no answer in time (retrying with the same key is safe).

The initiator is never guessed from the OS user: ``--initiator`` or ``RUNPLANE_INITIATOR``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from runplane.cli.reach import require_kafka
from runplane.config import Settings
from runplane.errors import RetryableError
from runplane.runs.client import Client, RunResult, final_status
from runplane.signing.admission import EMITTER_KEY_FILE_ENV, SigningKey
from runplane.wire import AdmissionOutcome, AdmissionReply, RunStatus, SessionSnapshot, to_dict


def parse_case(pairs: list[str]) -> dict[str, str]:
    """Business keys from ``--case KEY=VALUE`` options (``emit``, ``runs list``)."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"--case expects KEY=VALUE, got {pair!r}")
        out[name] = value
    return out


def _input(given: str) -> Any:
    """The run's input: JSON text, ``@FILE`` (a file's JSON) or ``-`` (stdin's) — a large input
    does not fit on a command line. Bad JSON or an unreadable file is a one-line error."""
    where = "--input"
    text = given
    if given == "-":
        where, text = "stdin", sys.stdin.read()
    elif given.startswith("@"):
        where = given[1:]
        try:
            text = Path(where).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise typer.BadParameter(f"--input {given}: cannot read it: {exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"{where} is not JSON: {exc}") from None


def _render(reply: AdmissionReply) -> str:
    match reply.outcome:
        case AdmissionOutcome.ADMITTED:
            return f"admitted {reply.run_id}" + (
                f" (case {reply.case_id})" if reply.case_id else ""
            )
        case AdmissionOutcome.DUPLICATE:
            status = reply.status.value.lower() if reply.status else "unknown"
            line = f"duplicate of {reply.run_id} ({status})"
            if reply.status is not None and reply.status.value == "AWAITING_HUMAN":
                line += f": already waiting for you on task {reply.task_id}"
            return line
        case _:
            return f"refused: {reply.reason}"


def emit_command(
    capability: str = typer.Argument(..., help="the agent to run, e.g. refund"),
    key: str = typer.Option(..., "--key", help="admission key: one key, at most one run, ever"),
    input_json: str = typer.Option(
        "{}",
        "--input",
        help="the run's input as JSON, @FILE to read it from a file, or - for stdin",
    ),
    case: list[str] = typer.Option([], "--case", help="business key KEY=VALUE (repeatable)"),
    tenant: str = typer.Option("default", "--tenant"),
    initiator: str | None = typer.Option(
        None,
        "--initiator",
        envvar="RUNPLANE_INITIATOR",
        help=(
            "the worklist principal on whose behalf the run acts (default: RUNPLANE_INITIATOR;"
            " required). Four-eyes refuses that principal on the run's tasks, so name the"
            " person who asked for the run, not an approver."
        ),
    ),
    wait: bool = typer.Option(False, "--wait", help="wait until the run ends"),
    timeout: float = typer.Option(30.0, "--timeout", help="seconds to wait for each answer"),
    as_json: bool = typer.Option(False, "--json", help="print the reply as JSON"),
    key_file: str | None = typer.Option(
        None,
        "--signing-key-file",
        envvar="RUNPLANE_EMITTER_KEY_FILE",
        help="sign the request with this emitter key (runplane emitters new-key); default "
        "RUNPLANE_EMITTER_KEY_FILE or RUNPLANE_EMITTER_KEY; none = unsigned (dev mode only)",
    ),
) -> None:
    """Ask admission for a run of CAPABILITY."""
    value = _input(input_json)
    correlation = parse_case(case)
    settings = Settings.from_env()
    who = initiator if initiator is not None else settings.initiator
    if who is None or not who.strip():
        # Checked before connecting: a run must act for a named principal, never the OS user.
        typer.echo("error: no initiator: pass --initiator NAME or set RUNPLANE_INITIATOR", err=True)
        raise typer.Exit(code=2)
    try:
        # An explicit file wins over RUNPLANE_EMITTER_KEY; without one, the environment's key.
        signing = SigningKey.from_env({EMITTER_KEY_FILE_ENV: key_file} if key_file else None)
        require_kafka(settings)
        with Client(settings, signing_key=signing) as client:
            # With --wait, admission's answer and how the run ended (Client.admit's RunResult).
            result = (
                client.admit(
                    capability,
                    key,
                    value,
                    correlation=correlation,
                    tenant=tenant,
                    initiator=who,
                    timeout=timeout,
                    wait=True,
                    wait_timeout=max(timeout, 300.0),
                )
                if wait
                else RunResult(
                    client.admit(
                        capability,
                        key,
                        value,
                        correlation=correlation,
                        tenant=tenant,
                        initiator=who,
                        timeout=timeout,
                    )
                )
            )
            reply, final = result.reply, result.snapshot
    # A WireError or ConfigError (a bad value, no key) is the root group's one line, exit 2.
    except RetryableError as exc:
        typer.echo(f"error: {exc} (retrying with the same key is safe)", err=True)
        raise typer.Exit(code=3) from None
    if as_json:
        out: dict[str, Any] = {"reply": to_dict(reply)}
        if final is not None:
            out["session"] = to_dict(final)
        typer.echo(json.dumps(out, default=str))
    else:
        typer.echo(_render(reply))
        if final is not None:
            typer.echo(ended_line(final))
    refused = reply.outcome == AdmissionOutcome.REFUSED
    raise typer.Exit(code=1 if refused or (final is not None and not completed(final)) else 0)


# How much of a run's output an ended line shows; `runs show` and `--json` give all of it.
_OUTPUT_CHARS = 2_000


def completed(snapshot: SessionSnapshot) -> bool:
    return final_status(snapshot) is RunStatus.COMPLETED


def ended_line(snapshot: SessionSnapshot) -> str:
    """How a waited-for run ended, for a person: its output, or what it failed with (a
    cancel named as one, with its reason) — never a bare status that hides the result."""
    head = f"run {snapshot.session_id} ended: "
    status = final_status(snapshot)
    if status is RunStatus.COMPLETED:
        output = snapshot.output_json or "null"
        if len(output) > _OUTPUT_CHARS:
            output = output[:_OUTPUT_CHARS] + f"… ({len(output)} characters; runs show has all)"
        return head + f"completed, output {output}"
    error = snapshot.error
    if status is RunStatus.CANCELLED:
        return (
            head + f"cancelled: {error.message if error and error.message else 'no reason given'}"
        )
    what = status.value.lower()
    if error is None:
        return head + what
    return head + f"{what}: {error.type}: {error.message}"


def register(app: typer.Typer) -> None:
    """Attach the emit command to the root app."""
    app.command("emit")(emit_command)
