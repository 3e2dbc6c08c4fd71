"""A mistake at the CLI is one line and exit 2, never a traceback: the root group turns any
error runplane raises on purpose into ``error: …``, and the operate commands ask for their
sender (``--as``) before they connect to anything."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from runplane.cli import app

# Nothing listens there: a command that tried to reach Kafka before refusing would hang or
# fail differently (and these must refuse before any I/O).
OFFLINE = {
    "RUNPLANE_BOOTSTRAP_SERVERS": "127.0.0.1:1",
    "RUNPLANE_INITIATOR": "",
    "RUNPLANE_WORKLIST_TOKEN": "",
    "RUNPLANE_WORKLIST_TOKEN_FILE": "",
    "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "",
}
DEV = {**OFFLINE, "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "true"}


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        # Outside dev mode the operate commands need an identity (a token) before anything.
        (["signal", "r-1", "go"], OFFLINE, "no identity: set RUNPLANE_WORKLIST_TOKEN"),
        (["runs", "cancel", "r-1", "--reason", "x"], OFFLINE, "no identity"),
        (["signal", "r-1", "go"], DEV, "no sender: pass --as NAME or set RUNPLANE_INITIATOR"),
        (["runs", "cancel", "r-1", "--reason", "x"], DEV, "no sender: pass --as NAME"),
        (["signal", "r-1", "go", "--payload", "{nope"], OFFLINE, "--payload is not JSON"),
        (["emit", "refund", "--key", "k-1"], OFFLINE, "no initiator"),
        (["emit", "refund", "--key", "k-1", "--input", "[1"], OFFLINE, "--input is not JSON"),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(
    argv: list[str], env: dict[str, str], message: str
) -> None:
    result = CliRunner().invoke(app, argv, env=env)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_runplane_error_no_command_caught_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from runplane.cli import policy
    from runplane.errors import ConfigError

    def broken() -> None:
        raise ConfigError("the policy file names no agents: say which")

    for command in policy.policy_app.registered_commands:
        monkeypatch.setattr(command, "callback", broken)
    app_result = CliRunner().invoke(app, ["policy", "check"], env=OFFLINE)
    assert app_result.exit_code == 2, app_result.output
    assert app_result.output.strip().splitlines() == [
        "error: the policy file names no agents: say which"
    ]
