"""The ``runplane`` console script.

Each command group lives in its own module and registers itself on the root app, so the
groups stay small and independent: stack (up/down/status), topics, serve, lint, emit, runs
and journal, cases, tasks, demo.
"""

from __future__ import annotations

# First, before the imports below (seconds on a busy machine): when this is the console
# script, a SIGTERM sent while they run is remembered and honoured once `serve` starts,
# instead of killing the service with -15 (every other command gets it back in main()).
from runplane.serving.shutdown import catch_early, release_early

catch_early()

import sys  # noqa: E402
from typing import Any  # noqa: E402

import typer  # noqa: E402
from confluent_kafka import KafkaException  # noqa: E402
from redis.exceptions import ConnectionError as RedisConnectionError  # noqa: E402
from typer._click.exceptions import NoArgsIsHelpError, UsageError  # noqa: E402
from typer.core import TyperGroup  # noqa: E402

from runplane.cli import (  # noqa: E402
    acls,
    cases,
    demo,
    emit,
    journal,
    lint,
    operate,
    policy,
    principals,
    runs,
    serve,
    stack,
    tasks,
    topics,
    tree,
    watch,
)
from runplane.cli.reach import require_kafka  # noqa: E402
from runplane.config import Settings  # noqa: E402
from runplane.errors import RunplaneError  # noqa: E402

# The commands that read or write Kafka, by their path under `runplane` (with the parameter
# that makes them do so, where only that form does): each first checks, once its arguments
# parsed, that a bootstrap server accepts a connection, so an unreachable broker is one line
# at once instead of a client's 10–60 s metadata timeout ending in a KafkaException (`emit`,
# `schedules create` and `agents list` check their own arguments or agent modules first, then
# call require_kafka themselves).
# tests/unit/test_cli_every_command.py holds this list to what the commands do.
KAFKA_COMMANDS: dict[str, str | None] = {
    "replay": "from_kafka",
    "topics create": None,
    "topics describe": None,
    "topics delete": "yes",
    "journal show": None,
    "journal verify": None,
    "journal erase": None,
    "journal export": None,
    "cases show": None,
    "cases close": None,
    "runs resume": None,
    "runs fork": None,
    "runs show": None,
    "runs watch": None,
    "runs tree": None,
    "acls apply": None,
    "schedules list": None,
    "schedules pause": None,
    "schedules resume": None,
    "schedules delete": None,
}


def _leaf(ctx: Any) -> tuple[str, Any]:
    """The leaf command the arguments name, and its path under `runplane`."""
    path: list[str] = []
    args = list(getattr(ctx, "_protected_args", [])) + list(ctx.args)
    command: Any = ctx.command
    while args and getattr(command, "commands", None) and args[0] in command.commands:
        path.append(args[0])
        command = command.commands[args.pop(0)]
    return " ".join(path), command


def _check_kafka_first(path: str, command: Any) -> None:
    """Run :func:`require_kafka` before ``command``'s body when it reaches Kafka (after its
    arguments parsed: a malformed argument is still named as such)."""
    if path not in KAFKA_COMMANDS or getattr(command, "callback", None) is None:
        return
    body, parameter = command.callback, KAFKA_COMMANDS[path]

    def checked(*args: Any, **kwargs: Any) -> Any:
        if parameter is None or kwargs.get(parameter):
            require_kafka(Settings.from_env())
        return body(*args, **kwargs)

    command.callback = checked


def _kafka_message(exc: KafkaException) -> str:
    error: Any = exc.args[0] if exc.args else None
    return str(error.str()) if hasattr(error, "str") else str(exc)


class _OneLineErrors(TyperGroup):
    """The root command group: an error runplane raises on purpose (bad configuration, a
    value the wire refuses, …) that a command did not turn into its own message, a usage
    mistake, or a backend that cannot be reached becomes one line and exit 2 — a person at
    the CLI never reads a traceback (nor a boxed usage panel) for a mistake of theirs."""

    def invoke(self, ctx: Any) -> Any:  # click.Context (typer vendors its own click)
        path, command = _leaf(ctx)
        _check_kafka_first(path, command)
        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:
            raise  # `runplane runs`: the group's help, as asked
        except UsageError as exc:
            where = f"runplane {path}".strip()
            typer.echo(f"error: {exc.format_message()} (see `{where} --help`)", err=True)
            raise typer.Exit(2) from None
        except RunplaneError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except KafkaException as exc:  # reachable, then failed (a timeout, authorisation)
            typer.echo(f"error: Kafka: {_kafka_message(exc)}", err=True)
            raise typer.Exit(2) from None
        except RedisConnectionError as exc:
            typer.echo(f"error: cannot reach Redis (RUNPLANE_REDIS_URL): {exc}", err=True)
            raise typer.Exit(2) from None


app = typer.Typer(
    name="runplane",
    help="Durable AI agents and business workflows on Apache Kafka.",
    no_args_is_help=True,
    add_completion=False,
    cls=_OneLineErrors,
)

for _module in (
    stack,
    topics,
    serve,
    lint,
    emit,
    journal,
    cases,
    tasks,
    principals,
    demo,
    acls,
    runs,
):
    _module.register(app)
operate.register(app)  # after runs: it adds `runs cancel` to the runs group
policy.register(app)  # runplane policy check
watch.register(app)  # runplane runs watch
tree.register(app)  # `runs tree` (commissions): after runs, which owns the runs group

# Versions and replay testing: `journal export`, `replay`, `agents list`.
from runplane.cli import agents as _agents  # noqa: E402
from runplane.cli import replay as _replay  # noqa: E402
from runplane.cli import schedules as _schedules  # noqa: E402

for _module in (_replay, _agents, _schedules):
    _module.register(app)


def main() -> None:
    if sys.argv[1:2] != ["serve"]:
        release_early()  # only `serve` installs handlers of its own
    app()
