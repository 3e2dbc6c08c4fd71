"""The journal's runs UI in headless Chromium: sign in, list and filter runs, open one and read
its timeline and verdict, its case (obligations; state for auditors only) and its parent and
children (real broker, Redis index, journal service and indexer)."""

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
from runplane.wire import CaseRecord, Obligation, ObligationStatus
from services.journal.api import build_api
from services.journal.indexer import Indexer
from services.journal.serve import KafkaRunReader
from tests.helpers.harness import plain_producer, send
from tests.helpers.sample import sample_run

pytestmark = pytest.mark.browser

TOKEN = "tok-ada-" + uuid.uuid4().hex
OTHER = "tok-olga-" + uuid.uuid4().hex
AUDITOR = "tok-audrey-" + uuid.uuid4().hex


@pytest.fixture
def ui(stack_settings: Settings) -> Iterator[str]:
    settings = stack_settings
    index = RunIndex.from_url(settings.redis_url, settings.topic_prefix)
    indexer = Indexer(settings, index)
    stop = threading.Event()
    thread = threading.Thread(target=indexer.run, args=(stop,), daemon=True)
    thread.start()
    readers = Principals.from_data(
        [
            {"name": "ada", "token_sha256": token_digest(TOKEN), "roles": ["clerk"]},
            {"name": "audrey", "token_sha256": token_digest(AUDITOR), "roles": ["auditor"]},
            {
                "name": "olga",
                "token_sha256": token_digest(OTHER),
                "roles": ["clerk"],
                "tenant": "other",
            },
        ]
    )
    app = build_api(lambda: index, KafkaRunReader(settings), readers)
    try:
        with run_http(app, "127.0.0.1", 0, stop) as server:
            yield f"http://127.0.0.1:{server.port}"
    finally:
        stop.set()
        thread.join(30)
        index.clear()


def _until(what: str, pred: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_list_filter_and_open_a_run(
    stack_settings: Settings, ui: str, chromium: Any, output_dir: Path
) -> None:
    settings = stack_settings
    a, b = f"r-ui-a-{uuid.uuid4().hex[:6]}", f"r-ui-b-{uuid.uuid4().hex[:6]}"
    kid, case = f"r-ui-kid-{uuid.uuid4().hex[:6]}", f"c-ui-{uuid.uuid4().hex[:6]}"
    recs_a, res_a = sample_run(
        a, calls=3, capability="refund", case_id=case, start_ms=10_000, children=[kid]
    )
    recs_b, res_b = sample_run(b, calls=1, capability="triage", case_id=None, start_ms=20_000)
    recs_k, res_k = sample_run(kid, calls=1, capability="lookup", case_id=None, parent=a)
    for recs, res in ((recs_a, res_a), (recs_b, res_b), (recs_k, res_k)):
        produce_run(settings, recs, res)
    send(plain_producer(settings), settings, "cases", case, _case(case))
    with running(settings):
        wait_audit(settings, a, len(recs_a))
        wait_audit(settings, b, len(recs_b))
        wait_audit(settings, kid, len(recs_k))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    _until(
        "the three runs indexed",
        lambda: (
            {a, b, kid}
            <= {r["run_id"] for r in httpx.get(f"{ui}/runs", headers=headers).json()["runs"]}
        ),
    )
    # The pages get the strict CSP; the JSON API keeps its own.
    assert "script-src 'self'" in httpx.get(f"{ui}/ui").headers["content-security-policy"]
    assert httpx.get(f"{ui}/runs", headers=headers).headers["content-security-policy"] == (
        "frame-ancestors 'none'"
    )

    page = chromium.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(f"{ui}/ui")
    page.fill("#token", "not-a-token")
    page.click("button[type=submit]")
    assert "That token is not known here." in page.inner_text("main")
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    page.wait_for_selector("text=Signed in as")
    table = page.inner_text("table.runs")
    assert a in table and b in table
    page.screenshot(path=str(output_dir / "runs-ui-list.png"), full_page=True)

    page.fill("input[name=capability]", "refund")
    page.click("text=Filter")
    page.wait_for_url("**capability=refund**")
    table = page.inner_text("table.runs")
    assert a in table and b not in table

    page.click(f"text={a}")
    page.wait_for_selector("text=Timeline")
    main = page.inner_text("main")
    assert "Verification: VERIFIED" in main and "COMPLETED" in main and case in main
    items = page.locator("ol.timeline > li")
    assert items.count() == len(recs_a)
    assert "RUN_ADMITTED" in items.nth(0).inner_text()
    assert "RUN_COMPLETED" in items.nth(len(recs_a) - 1).inner_text()
    # Its case: version, obligations (status, breach run); the state is for auditors only.
    card = page.inner_text("section.case")
    assert "Version\n4" in card and "open" in card, card
    rows = page.locator("table.obligations tbody tr")
    assert rows.count() == 2
    assert "reply-sla" in rows.nth(0).inner_text() and "OPEN" in rows.nth(0).inner_text()
    assert "BREACHED" in rows.nth(1).inner_text() and "r-sweep-1" in rows.nth(1).inner_text()
    assert "shown to auditors only" in card and "INV-77" not in card
    # Its parent and children: admitted from outside, one child (with its plan node).
    related = page.inner_text("section.related")
    assert "none: admitted from outside" in related and kid in related and "node n0" in related
    page.screenshot(path=str(output_dir / "runs-ui-run.png"), full_page=True)

    page.click(f"section.related a:has-text('{kid}')")
    page.wait_for_url(f"**/ui/runs/{kid}")
    assert a in page.inner_text("section.related")  # the child names its parent
    assert page.locator("section.case").count() == 0  # no case, no case card
    page.click(f"section.related a:has-text('{a}')")
    page.wait_for_url(f"**/ui/runs/{a}")

    auditor = chromium.new_page(viewport={"width": 1280, "height": 1000})
    auditor.goto(f"{ui}/ui")
    auditor.fill("#token", AUDITOR)
    auditor.click("button[type=submit]")
    auditor.wait_for_selector("text=Signed in as")
    auditor.goto(f"{ui}/ui/runs/{a}")
    state = auditor.inner_text("pre.case-state")
    assert '"invoice": "INV-77"' in state, state
    auditor.screenshot(path=str(output_dir / "runs-ui-run-auditor.png"), full_page=True)

    # Another tenant's principal sees neither run: not in its list, "not found" by id.
    other = chromium.new_page()
    other.goto(f"{ui}/ui")
    other.fill("#token", OTHER)
    other.click("button[type=submit]")
    other.wait_for_selector("text=Signed in as")
    assert "No runs match." in other.inner_text("main")
    response = other.goto(f"{ui}/ui/runs/{a}")
    assert response is not None and response.status == 404


def _case(case_id: str) -> CaseRecord:
    def obligation(name: str, status: ObligationStatus, sweep: str | None) -> Obligation:
        return Obligation(
            name=name,
            due_ms=1_800_000_000_000,
            warn_ms=1_799_990_000_000,
            calendar="wall",
            calendar_digest="d" * 64,
            rule_json='{"hours": 4}',
            on_breach="escalate",
            status=status,
            sweep_run_id=sweep,
            registered_by="r-ui",
            updated_ms=1_700_000_000_000,
        )

    return CaseRecord(
        case_id=case_id,
        version=4,
        state_json='{"invoice": "INV-77", "stage": "refund"}',
        obligations=(
            obligation("reply-sla", ObligationStatus.OPEN, None),
            obligation("refund-sla", ObligationStatus.BREACHED, "r-sweep-1"),
        ),
        updated_ms=1_700_000_000_000,
    )
