"""Every CLI reader of a run (``journal show|verify``, ``runs show|tree``) takes its run id or
its admission key, answers "no such run" with exit 2 for one nobody knows, and shows what the
run took and gave: its input, its output, or why it failed and who cancelled it."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
from helpers.sample import sample_run
from typer.testing import CliRunner

from runplane.cli import app
from runplane.cli import journal as journal_cli
from runplane.cli import runs as runs_cli
from runplane.cli import tree as tree_cli
from runplane.journal.summary import RunSummary
from runplane.runs.read import RunHistory
from runplane.wire import (
    AdmissionClaim,
    ErrorInfo,
    RunStatus,
    SessionSnapshot,
    TenantId,
)

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("reachable_kafka")]

RUN = "r-1"
KEY = "order-101"


def _snapshot(**fields: Any) -> SessionSnapshot:
    base: dict[str, Any] = dict(
        session_id=RUN,
        capability="refund",
        status=RunStatus.FAILED,
        era=0,
        next_seq=4,
        last_hash="a" * 64,
        admission_key=KEY,
        tenant=TenantId("default"),
        initiator="alice",
        input_json='{"invoice_id":"inv-7"}',
        error=ErrorInfo(type="RunCancelled", message="wrong customer"),
        started_ms=1,
        updated_ms=2,
    )
    base.update(fields)
    return SessionSnapshot(**base)


class _Client:
    """``sessions`` and ``admission.claims`` as the compacted tables hold them."""

    tables: ClassVar[dict[tuple[str, str], object]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None: ...

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc: object) -> None: ...

    def latest(self, topic: str, key: str, *, partition_key: str | None = None) -> object | None:
        return self.tables.get((topic, key))


class _Index:
    def __init__(self, runs: dict[str, RunSummary]) -> None:
        self.runs = runs

    def get(self, run_id: str) -> RunSummary | None:
        return self.runs.get(run_id)


def _history(settings: Any, run_id: str, **kwargs: Any) -> RunHistory:
    if run_id != RUN:
        return RunHistory(run_id, 0, ())
    records, results = sample_run(RUN, calls=1)
    return RunHistory(RUN, 0, tuple(records), dict(results))


@pytest.fixture(autouse=True)
def kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    _Client.tables = {
        ("sessions", RUN): _snapshot(),
        ("admission.claims", KEY): AdmissionClaim(
            admission_key=KEY,
            run_id=RUN,
            capability="refund",
            tenant=TenantId("default"),
            status=RunStatus.FAILED,
            admitted_ms=1,
            updated_ms=2,
        ),
    }
    monkeypatch.setattr(journal_cli, "Client", _Client)
    monkeypatch.setattr(journal_cli, "read_run", _history)
    monkeypatch.setattr(journal_cli, "_erased_since", lambda *a: 2)
    monkeypatch.setattr(tree_cli, "read_run", _history)
    summary = RunSummary(
        RUN,
        status=RunStatus.CANCELLED,
        capability="refund",
        ended_reason="wrong customer",
        cancelled_by="ops",
    )
    index = _Index({RUN: summary})
    monkeypatch.setattr(runs_cli.RunIndex, "from_url", classmethod(lambda cls, *a: index))
    monkeypatch.setattr(runs_cli, "read_audit", lambda *a, **k: [])


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize(
    "command",
    [("journal", "show"), ("journal", "verify"), ("runs", "show"), ("runs", "tree")],
)
def test_an_unknown_run_is_no_such_run_exit_2(command: tuple[str, str]) -> None:
    code, out = _cli(*command, "r-typo")
    assert code == 2 and "no such run: 'r-typo'" in out, out


@pytest.mark.parametrize(
    "command",
    [("journal", "show"), ("journal", "verify"), ("runs", "show"), ("runs", "tree")],
)
def test_a_run_is_found_by_its_admission_key(command: tuple[str, str]) -> None:
    code, out = _cli(*command, KEY)
    assert code == 0 and RUN in out, out


def test_runs_show_says_cancelled_by_whom_and_why_and_shows_the_input() -> None:
    code, out = _cli("runs", "show", KEY, "--json")
    data = json.loads(out)
    assert code == 0 and data["status"] == "CANCELLED"
    assert (data["cancelled_by"], data["ended_reason"]) == ("ops", "wrong customer")
    assert data["input"] == {"invoice_id": "inv-7"}
    assert data["error"]["type"] == "RunCancelled"
    code, out = _cli("runs", "show", RUN)
    assert "CANCELLED" in out and "ops" in out and "inv-7" in out


def test_journal_show_shows_the_output_of_a_completed_run() -> None:
    _Client.tables[("sessions", RUN)] = _snapshot(
        status=RunStatus.COMPLETED, error=None, output_json='{"refunded":12}'
    )
    code, out = _cli("journal", "show", RUN, "--json")
    data = json.loads(out)
    assert code == 0 and data["output"] == {"refunded": 12}
    assert data["input"] == {"invoice_id": "inv-7"} and data["error"] is None
    code, out = _cli("journal", "show", RUN)
    assert 'output: {"refunded":12}' in out


# --- one verdict for an erased run ------------------------------------------------------

ERASED_BY = ErrorInfo(type="BodiesErased", message="bodies erased by ops")


def _erased_history(settings: Any, run_id: str, **kwargs: Any) -> RunHistory:
    records, results = sample_run(RUN, calls=2)
    return RunHistory(RUN, 0, tuple(records), dict.fromkeys(results))  # every body tombstoned


def test_an_erased_run_has_one_verdict_in_verify_show_and_replay(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from runplane.core.recording import Recording, dump_recordings

    erased = _snapshot(status=RunStatus.COMPLETED, input_json="null", error=ERASED_BY)
    _Client.tables[("sessions", RUN)] = erased
    monkeypatch.setattr(journal_cli, "read_run", _erased_history)
    monkeypatch.setattr(runs_cli, "read_run", _erased_history)
    verdict = "VERIFIED, 2 bodies erased"

    code, out = _cli("journal", "verify", RUN)
    assert code == 0 and f"{RUN}: {verdict} (" in out, out
    code, out = _cli("runs", "show", RUN)
    assert code == 0 and verdict in out, out
    assert json.loads(_cli("runs", "show", RUN, "--json")[1])["erased_bodies"] == 2

    records, _ = sample_run(RUN, calls=2)
    file = tmp_path / "erased.json"
    file.write_text(dump_recordings([Recording(erased, tuple(records), {})]))
    code, out = _cli("replay", str(file))
    assert code == 0 and f"{RUN}: {verdict}: not replayed" in out, out
    assert "broken" not in out.lower()


# --- runs found by business key -------------------------------------------------------------


def test_runs_list_finds_a_run_by_its_business_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from runplane.core.keys import case_id_for
    from runplane.journal.index import RunFilter

    case = case_id_for("default", {"order": "101"})
    other = case_id_for("acme", {"order": "101"})  # the same key of another tenant
    runs = [RunSummary("r-1", case_id=case), RunSummary("r-2", case_id=other)]

    class Listing:
        def offsets(self) -> dict[int, int]:
            return {0: 2}

        def list(self, f: RunFilter) -> list[RunSummary]:
            return [s for s in runs if f.matches(s)]

    monkeypatch.setattr(runs_cli.RunIndex, "from_url", classmethod(lambda cls, *a: Listing()))

    def listed(*args: str) -> list[str]:
        code, out = _cli("runs", "list", "--json", *args)
        assert code == 0, out
        return [r["run_id"] for r in json.loads(out)]

    assert listed("--case", "order=101") == ["r-1"]
    assert listed("--case", "order=101", "--tenant", "acme") == ["r-2"]
    assert listed("--case", str(case)) == ["r-1"]  # the case id itself still works
    assert listed("--case", "order=999") == []


def test_journal_export_takes_an_admission_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from runplane.cli import replay as replay_cli
    from runplane.core.recording import Recording, load_recordings

    snap = _snapshot(status=RunStatus.COMPLETED, error=None, output_json="1")
    records, results = sample_run(RUN, calls=1)
    monkeypatch.setattr(replay_cli, "read_snapshots", lambda settings: {RUN: snap})
    monkeypatch.setattr(
        replay_cli, "read_recording", lambda settings, s: Recording(s, tuple(records), results)
    )
    out = tmp_path / "runs.json"
    code, text = _cli("journal", "export", KEY, "--out", str(out), "--no-requests")
    assert code == 0, text
    assert [r.session_id for r in load_recordings(out.read_text())] == [RUN]
    code, text = _cli("journal", "export", "r-typo", "--out", str(out), "--no-requests")
    assert code == 2 and "no such run: 'r-typo'" in text
