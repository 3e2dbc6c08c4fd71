"""``runplane runs resume|fork`` and ``journal erase`` against the journal API (a live HTTP
server with a fake Kafka side): the operator's token, the answer, the refusals."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from test_journal_api_guards import FakeIndex, FakeReader
from test_repair_api import PEOPLE, FakeRepairer, _snap
from typer.testing import CliRunner

from runplane.cli import app
from runplane.cli import runs as runs_cli
from runplane.journal.summary import RunSummary
from runplane.serving.shell import run_http
from runplane.wire import RunStatus
from services.journal.api import build_api

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("reachable_kafka")]


@pytest.fixture(autouse=True)
def known_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs' snapshots, found by id or admission key (no broker)."""
    snap = _snap("r-q", RunStatus.QUARANTINED)
    found = {"r-q": snap, snap.admission_key: snap}
    monkeypatch.setattr(
        runs_cli,
        "find_run",
        lambda settings, run: (run, None) if run not in found else ("r-q", snap),
    )


@pytest.fixture
def url() -> Iterator[str]:
    runs = {"r-q": RunSummary("r-q", status=RunStatus.QUARANTINED, tenant="acme")}
    repairer = FakeRepairer({"r-q": _snap("r-q", RunStatus.QUARANTINED)})
    api = build_api(lambda: FakeIndex(runs), FakeReader(), PEOPLE, repairer=repairer)  # type: ignore[arg-type,return-value]
    stop = threading.Event()
    with run_http(api, "127.0.0.1", 0, stop) as server:
        yield f"http://127.0.0.1:{server.port}"
    stop.set()


def _cli(url: str, token: str, *args: str) -> tuple[int, str]:
    env = {"RUNPLANE_JOURNAL_URL": url, "RUNPLANE_WORKLIST_TOKEN": token}
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.output


def test_resume_fork_and_erase_name_the_operator_and_refusals_exit_1(url: str) -> None:
    code, out = _cli(url, "o", "runs", "resume", "r-q", "--reason", "fixed")
    assert code == 0 and "resume accepted (by ops)" in out
    code, out = _cli(url, "o", "runs", "fork", "r-q", "--from-seq", "2")
    assert code == 0 and "as r-fork" in out
    code, out = _cli(url, "o", "runs", "fork", "r-q", "--from-seq", "9")
    assert code == 1 and "409" in out
    code, out = _cli(url, "a", "journal", "erase", "r-q", "--yes")
    assert code == 1 and "403" in out
    code, out = _cli(url, "", "runs", "resume", "r-q")
    assert code == 1 and "token is required" in out


def test_erase_asks_first_and_a_no_or_no_answer_erases_nothing(url: str) -> None:
    env = {"RUNPLANE_JOURNAL_URL": url, "RUNPLANE_WORKLIST_TOKEN": "o"}
    for answer in ("n\n", ""):
        result = CliRunner().invoke(app, ["journal", "erase", "r-q"], env=env, input=answer)
        assert result.exit_code == 1 and "not erased (pass --yes" in result.output
        assert "accepted" not in result.output
    result = CliRunner().invoke(app, ["journal", "erase", "r-q"], env=env, input="y\n")
    assert result.exit_code == 0 and "erase accepted (by ops)" in result.output


def test_a_repair_names_its_run_by_admission_key_and_an_unknown_one_is_no_such_run(
    url: str,
) -> None:
    key = _snap("r-q", RunStatus.QUARANTINED).admission_key
    code, out = _cli(url, "o", "runs", "resume", key)
    assert code == 0 and "r-q: resume accepted" in out
    for args in (["runs", "resume", "r-typo"], ["journal", "erase", "r-typo", "--yes"]):
        code, out = _cli(url, "o", *args)
        assert code == 2 and "no such run: 'r-typo'" in out
