"""The journal's runs UI in headless Chromium: sign in, list and filter runs, open one and read
its timeline and verdict (real broker, Redis index, journal service and indexer)."""

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

from runplane.auth import Principals, token_digest
from runplane.config import Settings
from runplane.journal.index import RunIndex
from runplane.service import run_http
from services.journal.api import build_api
from services.journal.indexer import Indexer
from services.journal.sample import sample_run
from services.journal.serve import KafkaRunReader

pytestmark = pytest.mark.browser

TOKEN = "tok-ada-" + uuid.uuid4().hex
OTHER = "tok-olga-" + uuid.uuid4().hex


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
    recs_a, res_a = sample_run(a, calls=3, capability="refund", case_id="c-7", start_ms=10_000)
    recs_b, res_b = sample_run(b, calls=1, capability="triage", case_id=None, start_ms=20_000)
    produce_run(settings, recs_a, res_a)
    produce_run(settings, recs_b, res_b)
    with running(settings):
        wait_audit(settings, a, len(recs_a))
        wait_audit(settings, b, len(recs_b))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    _until(
        "both runs indexed",
        lambda: len(httpx.get(f"{ui}/runs", headers=headers).json()["runs"]) == 2,
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
    assert "Verification: VERIFIED" in main and "COMPLETED" in main and "c-7" in main
    items = page.locator("ol.timeline > li")
    assert items.count() == len(recs_a)
    assert "RUN_ADMITTED" in items.nth(0).inner_text()
    assert "RUN_COMPLETED" in items.nth(len(recs_a) - 1).inner_text()
    page.screenshot(path=str(output_dir / "runs-ui-run.png"), full_page=True)

    # Another tenant's principal sees neither run: not in its list, "not found" by id.
    other = chromium.new_page()
    other.goto(f"{ui}/ui")
    other.fill("#token", OTHER)
    other.click("button[type=submit]")
    other.wait_for_selector("text=Signed in as")
    assert "No runs match." in other.inner_text("main")
    response = other.goto(f"{ui}/ui/runs/{a}")
    assert response is not None and response.status == 404
