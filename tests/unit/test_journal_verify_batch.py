"""``runplane journal verify`` of many runs in one process: a line per run, a summary, a verdict."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from runplane.cli import journal as cli
from runplane.runs.read import RunHistory
from tests.helpers.sample import sample_run

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000


def _histories() -> dict[str, RunHistory]:
    ok, ok_bodies = sample_run("r-ok", 2)
    bad, bad_bodies = sample_run("r-bad", 2)
    bad[3] = dataclasses.replace(bad[3], hash="f" * 64)
    gone, gone_bodies = sample_run("r-gone", 2)
    missing = {k: v for k, v in gone_bodies.items() if k != (0, 1)}
    return {
        "r-ok": RunHistory("r-ok", 0, tuple(ok), dict(ok_bodies)),
        "r-bad": RunHistory("r-bad", 0, tuple(bad), dict(bad_bodies)),
        "r-gone": RunHistory("r-gone", 0, tuple(gone), dict(missing)),
    }


@pytest.fixture
def topics(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    histories = _histories()
    asked: dict[str, Any] = {"since": []}

    def read_run(settings: Any, run_id: str, **_: Any) -> RunHistory:
        return histories.get(run_id, RunHistory(run_id, 0, ()))

    def journal_run_ids(settings: Any, *, since_ms: int | None = None) -> list[str]:
        asked["since"].append(since_ms)
        return sorted(histories)

    monkeypatch.setattr(cli, "read_run", read_run)
    monkeypatch.setattr(cli, "journal_run_ids", journal_run_ids)
    monkeypatch.setattr(cli, "read_snapshot", lambda settings, run_id: None)
    # No snapshot under that id or admission key: the argument is taken as the run id.
    monkeypatch.setattr(cli, "find_run", lambda settings, asked: (asked, None))
    return asked


def _run(*args: str) -> Any:
    app = typer.Typer()
    cli.register(app)
    return CliRunner().invoke(app, ["journal", "verify", *args])


def test_all_runs_in_one_process_with_a_summary(topics: dict[str, Any]) -> None:
    result = _run("--all")
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("r-bad: BROKEN at seq 3: bad_hash: content hashes to ")
    assert lines[1:] == [
        "r-gone: BODY_MISSING at seq [4]",
        "r-ok: VERIFIED (6 records)",
        "3 runs: 1 verified, 1 broken, 1 with bodies missing, 0 without records",
    ]
    assert result.exit_code == cli.EXIT_BROKEN  # the worst of the three
    assert topics["since"] == [None]


def test_json_has_a_verdict_per_run_and_the_summary(topics: dict[str, Any]) -> None:
    result = _run("r-ok", "r-gone", "r-typo", "--json")
    data = json.loads(result.output)
    verdicts = {r["run_id"]: r["verdict"] for r in data["runs"]}
    assert verdicts == {"r-ok": "VERIFIED", "r-gone": "BODY_MISSING", "r-typo": "NO_SUCH_RUN"}
    assert data["summary"] == {
        "runs": 3,
        "VERIFIED": 1,
        "BROKEN": 0,
        "BODY_MISSING": 1,
        "NO_SUCH_RUN": 1,
    }
    # No break, so the unknown run decides: 4 before 2.
    assert result.exit_code == data["exit"] == cli.EXIT_NO_SUCH_RUN
    assert topics["since"] == []  # named runs only: the topic is not listed


def test_one_run_json_carries_its_verdict(topics: dict[str, Any]) -> None:
    result = _run("r-bad", "--json")
    data = json.loads(result.output)
    assert data["verdict"] == "BROKEN" and data["broken_at_seq"] == 3
    assert result.exit_code == cli.EXIT_BROKEN


def test_since_takes_an_age_or_an_iso_time(topics: dict[str, Any]) -> None:
    assert cli.parse_since("30m", NOW) == NOW - 30 * 60_000
    assert cli.parse_since("7d", NOW) == NOW - 7 * 86_400_000
    assert cli.parse_since("2023-11-14T22:13:20", NOW) == NOW
    assert cli.parse_since("2023-11-14T23:13:20+01:00", NOW) == NOW
    result = _run("--since", "2h")
    assert result.exit_code == cli.EXIT_BROKEN
    [since_ms] = topics["since"]
    assert since_ms is not None


@pytest.mark.parametrize("bad", ["yesterday", "5w", "-3h", ""])
def test_a_since_that_does_not_parse_is_a_clear_error(bad: str, topics: dict[str, Any]) -> None:
    result = _run("--since", bad)
    assert result.exit_code == 2 and "--since" in result.output
    assert topics["since"] == []


def test_verify_with_nothing_to_verify_says_so(topics: dict[str, Any]) -> None:
    result = _run()
    assert result.exit_code == 2 and "--all or --since" in result.output
