"""The run page without a broker: the waterfall of its steps (a failed call red, a wait for a
person as such), the failed call red in the timeline too, "Waiting on" linking the task on the
worklist, and the input and output panes — bodies for auditors only, withheld for others, how a
run ended (a failure's reason, who cancelled) for everyone."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from runplane.journal.summary import RunSummary
from runplane.runs.read import RunHistory
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import CaseRecord, RunStatus, SessionSnapshot
from services.journal.api import build_api
from services.journal.ui import _waiting_on
from tests.helpers.known_runs import KnownRuns
from tests.helpers.sample_steps import ENDED_AT, SteppedRun, stepped_run

pytestmark = pytest.mark.unit

START = 1_700_000_000_000
READERS = Principals.from_data(
    [
        {"name": "ada", "token_sha256": token_digest("clerk"), "roles": ["clerk"]},
        {"name": "audrey", "token_sha256": token_digest("auditor"), "roles": ["auditor"]},
    ]
)
WORKLIST = "https://worklist.example"


class SteppedReader:
    """Serves the stepped runs; counts snapshot reads (bodies: auditors' pages only)."""

    def __init__(self, runs: dict[str, SteppedRun]) -> None:
        self.runs = runs
        self.snapshots: list[str] = []

    def history(self, run_id: str, *, bodies: bool, since_ms: int | None = None) -> RunHistory:
        run = self.runs[run_id]
        return RunHistory(run_id, 0, tuple(run.records), dict(run.results))

    def case(self, case_id: str) -> CaseRecord | None:
        return None

    def snapshot(self, run_id: str) -> SessionSnapshot | None:
        self.snapshots.append(run_id)
        return self.runs[run_id].snapshot


@pytest.fixture
def site() -> Iterator[tuple[str, KnownRuns, SteppedReader]]:
    done, waiting = (
        stepped_run("r-done", start_ms=START),
        stepped_run("r-wait", start_ms=START, waiting=True),
    )
    index = KnownRuns()
    index.runs["r-done"] = RunSummary(
        "r-done",
        status=RunStatus.COMPLETED,
        capability="refund",
        started_ms=START,
        ended_ms=START + ENDED_AT,
    )
    index.runs["r-wait"] = RunSummary(
        "r-wait",
        status=RunStatus.AWAITING_HUMAN,
        capability="refund",
        started_ms=START,
        parked_on=f"task:{waiting.task_id}",
    )
    reader = SteppedReader({"r-done": done, "r-wait": waiting})
    app = build_api(lambda: index, reader, READERS, worklist_ui=WORKLIST)  # type: ignore[arg-type,return-value]
    stop = threading.Event()
    with run_http(app, "127.0.0.1", 0, stop) as server:
        yield f"http://127.0.0.1:{server.port}", index, reader
    stop.set()


def _page(base: str, token: str, run_id: str) -> str:
    with httpx.Client(base_url=base, timeout=20) as c:
        assert c.post("/ui/signin", data={"token": token}).status_code == 303
        r = c.get(f"/ui/runs/{run_id}")
        assert r.status_code == 200, r.text
        return r.text


def _rows(html: str) -> list[dict[str, str]]:
    return [
        dict(re.findall(r'data-([a-z-]+)="([^"]*)"', m))
        for m in re.findall(r'<li class="wf-row[^>]*>', html)
    ]


def test_the_waterfall_draws_each_step_with_its_duration(site) -> None:  # type: ignore[no-untyped-def]
    base, _, _ = site
    html = _page(base, "clerk", "r-done")
    rows = _rows(html)
    assert [(r["kind"], r["state"], r["duration-ms"]) for r in rows] == [
        ("call", "ok", "400"),
        ("call", "ok", "120"),
        ("call", "failed", "300"),
        ("person", "ok", "2000"),
        ("call", "ok", "200"),
    ]
    assert [int(r["start-ms"]) for r in rows] == [5, 410, 540, 850, 2860]
    assert "waiting for a person: role finance" in html and "2.0 s" in html
    assert "5 steps over 3.1 s · 1 failed · 2.0 s waiting for people" in html


def test_a_failed_call_is_red_in_the_timeline_and_only_it(site) -> None:  # type: ignore[no-untyped-def]
    base, _, _ = site
    html = _page(base, "clerk", "r-done")
    bad = re.findall(r'<li class="kind-bad" id="seq-(\d+)">', html)
    assert bad == ["6"]  # the charge's EFFECT_RECORDED, not its announce
    assert '<li class="kind-ok" id="seq-4">' in html  # the invoice's recorded call stays green
    # Its error is a body: for auditors only.
    assert "card declined" not in html
    assert "ToolError: card declined" in _page(base, "auditor", "r-done")


def test_a_run_waiting_on_a_task_links_it_on_the_worklist(site) -> None:  # type: ignore[no-untyped-def]
    base, _, _ = site
    html = _page(base, "clerk", "r-wait")
    href = f'{WORKLIST}/tasks/r-wait%2F0%2F3"'
    assert f'<a class="task-link" href="{href}' in html
    assert [(r["kind"], r["state"]) for r in _rows(html)][-1] == ("person", "open")
    assert "still waiting" in html and "No output yet: the run is AWAITING_HUMAN." in html


def test_waiting_on_without_a_worklist_is_the_task_id_as_text() -> None:
    shown = _waiting_on("task:t-1")
    assert "t-1" in shown and "<a" not in shown
    assert 'href="https://w.example/tasks/a%2Fb"' in _waiting_on("task:a/b", "https://w.example")
    assert "&lt;b&gt;" in _waiting_on("task:<b>", "https://w.example")  # escaped


def test_bodies_are_for_auditors_others_are_told_they_are_withheld(site) -> None:  # type: ignore[no-untyped-def]
    base, _, reader = site
    clerk = _page(base, "clerk", "r-done")
    assert clerk.count("Bodies withheld") == 2 and "A-17" not in clerk
    assert reader.snapshots == []  # no body read for a page that shows none
    auditor = _page(base, "auditor", "r-done")
    assert "&quot;order&quot;: &quot;A-17&quot;" in auditor
    assert "&quot;refunded&quot;: 42" in auditor and "Bodies withheld" not in auditor
    assert reader.snapshots == ["r-done"]


def test_how_a_run_ended_is_shown_to_everyone(site) -> None:  # type: ignore[no-untyped-def]
    base, index, _ = site
    done = index.runs["r-done"]
    index.runs["r-done"] = replace(
        done, status=RunStatus.CANCELLED, ended_reason="customer withdrew", cancelled_by="oscar"
    )
    html = _page(base, "clerk", "r-done")
    assert "CANCELLED</span> by <strong>oscar</strong>" in html and "customer withdrew" in html
    index.runs["r-done"] = replace(
        done, status=RunStatus.FAILED, ended_reason="card declined", error_type="ToolError"
    )
    html = _page(base, "clerk", "r-done")
    assert "<code>ToolError</code>" in html and '<p class="reason">card declined</p>' in html
    index.runs["r-done"] = replace(done, erased_bodies=4, erased_by="retention")
    assert _page(base, "auditor", "r-done").count("Erased by retention.") == 2


def test_the_worklist_origin_is_read_as_an_origin() -> None:
    from runplane.errors import ConfigError
    from services.journal.settings import JournalSettings

    read = JournalSettings.from_env({"RUNPLANE_JOURNAL_WORKLIST_UI": "HTTPS://W.example:443/"})
    assert read.worklist_ui == "https://w.example"
    assert JournalSettings.from_env({}).worklist_ui is None
    with pytest.raises(ConfigError, match="RUNPLANE_JOURNAL_WORKLIST_UI"):
        JournalSettings.from_env({"RUNPLANE_JOURNAL_WORKLIST_UI": "w.example/tasks"})


def test_each_wait_is_labelled_for_a_person() -> None:
    from runplane.journal.waterfall import Bar, BarKind, BarState
    from services.journal.ui_waterfall import bar_label

    def parked(on: str, kind: BarKind = BarKind.PARKED, roles: tuple[str, ...] = ()) -> str:
        bar = Bar(kind, BarState.OPEN, 0, 1, "", "", 0, 5, 1, roles=roles, waits_for=on)
        return bar_label(bar)

    assert parked("", BarKind.PERSON, ("finance", "audit")) == (
        "waiting for a person: role finance, audit"
    )
    assert parked("signal:go") == "waiting for signal go"
    assert parked("version:v2") == "parked: version v2 not deployed"
    assert parked("doubt") == "in doubt: waiting out the call's deadline"
    assert parked("case:r1") == "parked on case:r1"
