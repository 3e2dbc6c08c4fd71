"""Every `runplane` command, driven with missing, malformed and wrong arguments and with
nothing to talk to, answers one line and an exit code — never a traceback, never a usage
panel, never a minute-long client timeout.

The walk is over the typer app itself, so a command added later is driven too. Nothing here
reaches the network: Kafka, Redis and every HTTP service point at ports nothing listens on,
and a command that reaches Kafka must say so within seconds (`runplane.cli.KAFKA_COMMANDS`
checks the broker first; one missing from that list waits for its client's timeout and fails
the time bound below).
"""

from __future__ import annotations

import enum
import socket
import time
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from runplane.cli import KAFKA_COMMANDS, app

# Commands whose body acts on this machine's local stack (start or stop it, serve, run the
# demo): driven only with arguments that fail parsing, never with valid ones.
ACTS_LOCALLY = {"up", "down", "status", "demo", "serve"}
# What a command documents for "the backend could not be reached", where that is not 2.
UNREACHABLE_EXIT = {
    "signal": 3,  # admission's HTTP not answering: retry with the same --id
    "runs cancel": 3,
    "runs update": 3,
    "runs query": 3,
}
# Commands that check their own arguments, then call runplane.cli.reach.require_kafka.
CHECKS_KAFKA_ITSELF = {"emit", "agents list"}
# Commands that need nothing from the network: with everything unreachable they still work.
OFFLINE_OK = {
    "journal keygen",
    "principals new",
    "emitters new-key",
    "acls print",
    "policy check",  # no file: the default policy, and the example agents it applies to
}
# Plausible values for required parameters, by name (anything else gets "x-1").
PLAUSIBLE = {
    "role": "executor",
    "decision": "approve",
    "from_seq": "3",
    "out": "out.json",
    "name": "zoe",
    "tenant": "acme",
    "capability": "refund",
    "key": "order-1",
    "reason": "a test",
}
JSON_OPTIONS = {"--input", "--payload", "--result"}


def _leaves(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    subs = getattr(command, "commands", None)
    if not subs:
        yield " ".join(path), command
        return
    for name, sub in subs.items():
        yield from _leaves(sub, (*path, name))


LEAVES = dict(_leaves(typer.main.get_command(app)))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens


@pytest.fixture
def unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    port = _closed_port()
    monkeypatch.chdir(tmp_path)  # --out files and the like land here
    return {
        "RUNPLANE_BOOTSTRAP_SERVERS": f"127.0.0.1:{port}",
        "RUNPLANE_REDIS_URL": f"redis://127.0.0.1:{port}/0",
        "RUNPLANE_JOURNAL_URL": f"http://127.0.0.1:{port}",
        "RUNPLANE_WORKLIST_URL": f"http://127.0.0.1:{port}",
        "RUNPLANE_ADMISSION_URL": f"http://127.0.0.1:{port}",
        "RUNPLANE_STATE_DIR": str(tmp_path / "state"),
        "RUNPLANE_WORKLIST_TOKEN": "some-token",
        "RUNPLANE_INITIATOR": "ivan",
        "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "true",
    }


def _required(command: Any) -> list[str]:
    argv: list[str] = []
    for p in command.params:
        value = PLAUSIBLE.get(p.name, "x-1")
        if p.param_type_name == "argument" and p.required:
            argv.append(value)
        elif p.param_type_name == "option" and p.required:
            argv += [p.opts[0], value]
    return argv


def _run(argv: list[str], env: dict[str, str]) -> tuple[int, list[str], str]:
    result = CliRunner().invoke(app, argv, env=env)
    crash = "" if isinstance(result.exception, SystemExit | type(None)) else repr(result.exception)
    return result.exit_code, result.output.strip().splitlines(), crash


def _assert_one_line(argv: list[str], code: int, lines: list[str], crash: str, want: int) -> None:
    shown = "\n".join(lines)
    assert not crash, f"runplane {' '.join(argv)} raised {crash}"
    assert "Traceback" not in shown, shown
    assert code == want, f"runplane {' '.join(argv)}: exit {code}, want {want}: {shown}"
    assert len(lines) == 1, f"runplane {' '.join(argv)}: not one line:\n{shown}"


def test_the_walk_reaches_every_group() -> None:
    assert {"emit", "runs show", "tasks decide", "acls apply", "agents list"} <= set(LEAVES)
    assert set(KAFKA_COMMANDS) <= set(LEAVES)  # no stale entry


@pytest.mark.parametrize(
    "path", [p for p, c in LEAVES.items() if any(q.required for q in c.params)]
)
def test_a_missing_argument_is_named_in_one_line(path: str, unreachable: dict[str, str]) -> None:
    argv = path.split()
    code, lines, crash = _run(argv, unreachable)
    _assert_one_line(argv, code, lines, crash, 2)
    assert lines[0].startswith("error: Missing "), lines


@pytest.mark.parametrize("path", list(LEAVES))
def test_an_unknown_option_is_one_line(path: str, unreachable: dict[str, str]) -> None:
    argv = [*path.split(), *_required(LEAVES[path]), "--no-such-option"]
    code, lines, crash = _run(argv, unreachable)
    _assert_one_line(argv, code, lines, crash, 2)
    assert "--no-such-option" in lines[0]


def _malformed() -> Iterator[tuple[str, str, str]]:
    """(command, option, bad value) for every typed or JSON option of every command."""
    for path, command in LEAVES.items():
        for p in command.params:
            if p.param_type_name != "option" or getattr(p, "is_flag", False):
                continue
            annotation = p.type_descriptor.annotation
            kinds = set(typing.get_args(annotation)) or {annotation}
            if kinds & {int, float}:
                yield path, p.opts[0], "twelve"
            elif any(isinstance(k, type) and issubclass(k, enum.Enum) for k in kinds):
                yield path, p.opts[0], "no-such-choice"
            elif p.opts[0] in JSON_OPTIONS:
                yield path, p.opts[0], "{nope"


MALFORMED = list(_malformed())


def test_malformed_values_cover_the_typed_options() -> None:
    options = {(path, option) for path, option, _ in MALFORMED}
    assert ("runs fork", "--from-seq") in options
    assert ("emit", "--input") in options
    assert ("signal", "--payload") in options


@pytest.mark.parametrize(("path", "option", "value"), MALFORMED)
def test_a_malformed_value_is_one_line(
    path: str, option: str, value: str, unreachable: dict[str, str]
) -> None:
    required = [a for a in _required(LEAVES[path])]
    if option in required:  # the required option itself is the malformed one
        i = required.index(option)
        del required[i : i + 2]
    argv = [*path.split(), *required, option, value]
    code, lines, crash = _run(argv, unreachable)
    _assert_one_line(argv, code, lines, crash, 2)
    assert option in lines[0] or "JSON" in lines[0] or "json" in lines[0], lines


@pytest.mark.parametrize("path", [p for p in LEAVES if p.split()[0] not in ACTS_LOCALLY])
def test_with_nothing_reachable_a_command_says_so_in_one_line_at_once(
    path: str, unreachable: dict[str, str]
) -> None:
    argv = [*path.split(), *_required(LEAVES[path])]
    if KAFKA_COMMANDS.get(path):  # the form that reaches Kafka
        argv.append("--" + str(KAFKA_COMMANDS[path]).replace("_", "-"))
    started = time.monotonic()
    code, lines, crash = _run(argv, unreachable)
    took = time.monotonic() - started
    if path in OFFLINE_OK:
        assert not crash and code == 0, (code, lines, crash)
        return
    _assert_one_line(argv, code, lines, crash, UNREACHABLE_EXIT.get(path, 2))
    # A client's own timeout is 10–60 s: a command that reaches Kafka without being in
    # KAFKA_COMMANDS (which checks the broker first) fails here.
    assert took < 8, f"runplane {' '.join(argv)} took {took:.1f} s: {lines}"
    if path in KAFKA_COMMANDS or path in CHECKS_KAFKA_ITSELF:
        assert "cannot reach Kafka" in lines[0], lines
