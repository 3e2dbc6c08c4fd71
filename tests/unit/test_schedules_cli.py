"""``runplane schedules``: every bad argument is one line on stderr and exit 2, before any
broker is contacted (the settings point at a port nothing listens on)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from runplane.cli import app

BAD = [
    (["create", "Nightly", "--capability", "c", "--every", "30s"], "schedule name"),
    (["create", "n", "--every", "30s"], "Missing option '--capability'"),
    (["create", "n", "--capability", "c"], "--cron (with --tz) or --every"),
    (["create", "n", "--capability", "c", "--every", "30s", "--cron", "* * * * *"], "not both"),
    (["create", "n", "--capability", "c", "--every", "500ms"], "at least 1s"),
    (["create", "n", "--capability", "c", "--cron", "0 2 * *"], "five fields"),
    (["create", "n", "--capability", "c", "--cron", "0 2 * * *", "--tz", "Mars/X"], "IANA"),
    (["create", "n", "--capability", "c", "--every", "1m", "--catch-up", "all"], "skip, once"),
    (["create", "n", "--capability", "c", "--every", "1m", "--catch-up-max", "0"], "between 1"),
    (["create", "n", "--capability", "c", "--every", "1m", "--input", "{x"], "not JSON"),
    (["create", "n", "--capability", "c", "--every", "1m", "--bogus"], "No such option"),
    (["create", "n", "--capability", "c", "--every", "1m"], "no initiator"),
    (["pause"], "Missing argument"),
    (["list", "--next", "0"], "greater than or equal to 1"),
]


@pytest.mark.parametrize(("args", "needle"), BAD)
def test_bad_arguments_are_one_line_and_exit_2(
    args: list[str], needle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNPLANE_INITIATOR", raising=False)
    monkeypatch.setenv("RUNPLANE_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    result = CliRunner().invoke(app, ["schedules", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
