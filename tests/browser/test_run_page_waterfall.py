"""The run page's waterfall, failed calls, task link and panes in headless Chromium.

Two refund runs on the real broker (journal, results and the run's snapshot on ``sessions``),
audited by the journal service and indexed: one ended — a generation, a tool call, a tool call
that failed, a wait for a person of role finance (2 s), the refund — and one still waiting on
its finance task. The page draws each step on the run's axis with its duration, the failed call
red in the waterfall and in the timeline, the wait for a person as such, "Waiting on" as a link
to the task's worklist page, and the input and output to an auditor only (a clerk is told they
are withheld). It fits a 420 px phone. Screenshots kept in test-output/ (runs-ui-waterfall*).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_journal_service import produce_run, running, wait_audit

from runplane.config import Settings
from runplane.journal.index import RunIndex
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from services.journal.api import build_api
from services.journal.indexer import Indexer
from services.journal.serve import KafkaRunReader
from tests.helpers.harness import plain_producer, send
from tests.helpers.sample_steps import stepped_run

pytestmark = pytest.mark.browser

CLERK = "tok-ada-" + uuid.uuid4().hex
AUDITOR = "tok-audrey-" + uuid.uuid4().hex
WORKLIST = "http://worklist.test:8302"
RED = "rgb(179, 38, 30)"  # base.css --err


@pytest.fixture
def ui(stack_settings: Settings) -> Iterator[str]:
    settings = stack_settings
    index = RunIndex.from_url(settings.redis_url, settings.topic_prefix)
    stop = threading.Event()
    thread = threading.Thread(target=Indexer(settings, index).run, args=(stop,), daemon=True)
    thread.start()
    readers = Principals.from_data(
        [
            {"name": "ada", "token_sha256": token_digest(CLERK), "roles": ["clerk"]},
            {"name": "audrey", "token_sha256": token_digest(AUDITOR), "roles": ["auditor"]},
        ]
    )
    app = build_api(lambda: index, KafkaRunReader(settings), readers, worklist_ui=WORKLIST)
    try:
        with run_http(app, "127.0.0.1", 0, stop) as server:
            yield f"http://127.0.0.1:{server.port}"
    finally:
        stop.set()
        thread.join(30)
        index.clear()


def _sign_in(chromium: Any, ui: str, token: str, width: int = 1280) -> Any:
    page = chromium.new_page(viewport={"width": width, "height": 1000})
    page.goto(f"{ui}/ui")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_selector("text=Signed in as")
    return page


def _rows(page: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = page.eval_on_selector_all(
        "ol.waterfall > li",
        """els => els.map(li => ({
            kind: li.dataset.kind, state: li.dataset.state,
            start: +li.dataset.startMs, took: +li.dataset.durationMs,
            label: li.querySelector('.wf-label').innerText,
            fill: getComputedStyle(li.querySelector('rect.wf-bar')).fill,
            width: li.querySelector('rect.wf-bar').getBoundingClientRect().width,
        }))""",
    )
    return rows


def test_the_run_page_draws_its_steps_failures_waits_and_panes(
    stack_settings: Settings, ui: str, chromium: Any, output_dir: Path
) -> None:
    settings = stack_settings
    now = int(time.time() * 1000)
    tag = uuid.uuid4().hex[:6]
    done = stepped_run(f"r-wf-done-{tag}", start_ms=now - 60_000)
    waiting = stepped_run(f"r-wf-wait-{tag}", start_ms=now - 5_000, waiting=True)
    producer = plain_producer(settings)
    for run in (done, waiting):
        produce_run(settings, run.records, run.results)
        send(producer, settings, "sessions", run.snapshot.session_id, run.snapshot)
    with running(settings):
        for run in (done, waiting):
            wait_audit(settings, run.snapshot.session_id, len(run.records))
    ids = {done.snapshot.session_id, waiting.snapshot.session_id}
    headers = {"Authorization": f"Bearer {CLERK}"}
    deadline = time.monotonic() + 30
    while not ids <= {r["run_id"] for r in httpx.get(f"{ui}/runs", headers=headers).json()["runs"]}:
        assert time.monotonic() < deadline, "the runs were never indexed"
        time.sleep(0.3)

    # A clerk: the steps with their durations, the failure red, bodies withheld.
    page = _sign_in(chromium, ui, CLERK)
    page.goto(f"{ui}/ui/runs/{done.snapshot.session_id}")
    page.wait_for_selector("ol.waterfall")
    rows = _rows(page)
    assert [(r["kind"], r["state"], r["took"]) for r in rows] == [
        ("call", "ok", 400),
        ("call", "ok", 120),
        ("call", "failed", 300),
        ("person", "ok", 2000),
        ("call", "ok", 200),
    ]
    generation, invoice, charge, finance, refund = rows
    assert "tool://charge_card" in charge["label"] and "300 ms" in charge["label"]
    assert "waiting for a person: role finance" in finance["label"] and "2.0 s" in finance["label"]
    assert charge["fill"] == RED and invoice["fill"] != RED and finance["fill"] != RED
    # Bars are on one axis: the wait is drawn longer than every call, the calls in order.
    assert finance["width"] > max(r["width"] for r in (generation, invoice, charge, refund))
    assert [r["start"] for r in rows] == sorted(r["start"] for r in rows)
    # The timeline: the failed call's record has a red dot, the other recorded calls do not.
    dots = page.eval_on_selector_all(
        "ol.timeline > li",
        "els => els.map(li => [li.id, getComputedStyle(li, '::before').backgroundColor])",
    )
    red = [seq for seq, colour in dots if colour == RED]
    assert red == ["seq-6"], dots
    assert page.locator("#seq-6 .badge-bad").inner_text() == "failed"
    panes = page.inner_text("#io")
    assert panes.count("Bodies withheld") == 2 and "A-17" not in panes
    page.screenshot(path=str(output_dir / "runs-ui-waterfall.png"), full_page=True)

    # An auditor: the input and the output in their panes.
    auditor = _sign_in(chromium, ui, AUDITOR)
    auditor.goto(f"{ui}/ui/runs/{done.snapshot.session_id}")
    assert '"order": "A-17"' in auditor.inner_text("section.io-input")
    output = auditor.inner_text("section.io-output")
    assert '"refunded": 42' in output and "approved by finance" in output
    assert "ToolError: card declined" in auditor.inner_text("ol.waterfall")
    auditor.screenshot(path=str(output_dir / "runs-ui-waterfall-auditor.png"), full_page=True)

    # The run still waiting: its wait open until now, "Waiting on" links the task's page.
    page.goto(f"{ui}/ui/runs/{waiting.snapshot.session_id}")
    link = page.locator("dl.facts a.task-link")
    assert link.get_attribute("href") == f"{WORKLIST}/tasks/{waiting.task_id.replace('/', '%2F')}"
    assert waiting.task_id in link.inner_text()
    last = _rows(page)[-1]
    assert (last["kind"], last["state"]) == ("person", "open") and last["took"] >= 4_000
    assert "still waiting" in last["label"]
    assert "No output yet: the run is AWAITING_HUMAN." in page.inner_text("section.io-output")
    page.screenshot(path=str(output_dir / "runs-ui-waterfall-waiting.png"), full_page=True)

    # A phone: the page does not scroll sideways, the rows stay readable.
    phone = _sign_in(chromium, ui, AUDITOR, width=420)
    phone.goto(f"{ui}/ui/runs/{done.snapshot.session_id}")
    assert phone.evaluate("document.scrollingElement.scrollWidth") <= 420, _too_wide(phone)
    assert len(_rows(phone)) == 5
    phone.screenshot(path=str(output_dir / "runs-ui-waterfall-420.png"), full_page=True)


def _too_wide(page: Any) -> list[str]:
    """What sticks out past a 420 px viewport (the failure message says what to fix)."""
    found: list[str] = page.evaluate(
        """[...document.querySelectorAll('body *')]
             .filter(el => el.getBoundingClientRect().right > 421).slice(0, 8)
             .map(el => `${el.tagName}.${el.className} ${(el.innerText || '').slice(0, 60)}`)"""
    )
    return found
