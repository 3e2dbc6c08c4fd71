"""The runs UI's overview charts and its list on a 420 px phone, in headless Chromium.

The journal API app over a real Redis run index, filled by folding audit records into it as
the indexer does (no broker needed: the list and the overview read the index alone). Runs of
every status, several capabilities, durations and costs; screenshots kept in test-output/.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runplane.config import Settings
from runplane.core.chain import default_label
from runplane.journal.index import RunIndex
from runplane.runs.read import RunHistory
from runplane.serving.auth import Principals, token_digest
from runplane.serving.shell import run_http
from runplane.wire import AuditRecord, CaseRecord, Cost, JournalKind, Verdict
from services.journal.api import build_api

pytestmark = pytest.mark.browser

TOKEN = "tok-ada-" + uuid.uuid4().hex
K = JournalKind
BASE_MS = 1_760_000_000_000
# A long id, as admission keys and hashed ids make them: it must not wrap nor widen the page.
LONG = "r-" + "settlement-reconciliation-batch-" * 3 + uuid.uuid4().hex


class NoKafka:
    """The overview and the list read the index only; a run page would need this."""

    def history(self, run_id: str, *, bodies: bool, since_ms: int | None = None) -> RunHistory:
        raise AssertionError("the overview and the list must not scan Kafka")

    def case(self, case_id: str) -> CaseRecord | None:
        raise AssertionError("the overview and the list must not scan Kafka")


def _audit(run: str, seq: int, kind: JournalKind, ms: int, cap: str, **kw: Any) -> AuditRecord:
    return AuditRecord(
        session_id=run,
        seq=seq,
        era=0,
        kind=kind,
        stamp_ms=ms,
        label=default_label(),
        hash="0" * 64,
        verdict=Verdict.VERIFIED,
        capability=cap,
        case_id=None,
        verified_ms=ms,
        **kw,
    )


def _run(run: str, cap: str, start: int, end: JournalKind | None, took: int, units: float):  # type: ignore[no-untyped-def]
    attrs = {"capability": cap, "tenant": "default", "initiator": "test"}
    out = [
        _audit(run, 0, K.RUN_ADMITTED, start, cap, attrs=attrs),
        _audit(
            run,
            1,
            K.EFFECT_RECORDED,
            start + 5,
            cap,
            call_seq=0,
            cost=Cost(tokens_in=100, tokens_out=20, units=units),
        ),
    ]
    if end is not None:
        out.append(_audit(run, 2, end, start + took, cap))
    return out


@pytest.fixture
def ui() -> Iterator[str]:
    settings = Settings.from_env()
    index = RunIndex.from_url(settings.redis_url, f"bov{uuid.uuid4().hex[:8]}.")
    audits = []
    plan = [
        ("refund", K.RUN_COMPLETED, 2_000),
        ("refund", K.RUN_COMPLETED, 4_000),
        ("refund", K.RUN_COMPLETED, 90_000),
        ("refund", K.RUN_FAILED, 1_000),
        ("triage", K.RUN_COMPLETED, 500),
        ("triage", K.RUN_CANCELLED, 30_000),
        ("triage", None, 0),
        ("payout", K.RUN_QUARANTINED, 7_000),
    ]
    for i, (cap, end, took) in enumerate(plan):
        run = LONG if i == 3 else f"r-ov-{i}-{uuid.uuid4().hex[:6]}"
        audits += _run(run, cap, BASE_MS + i * 3_600_000, end, took, units=0.25 * (i + 1))
    index.apply(audits)
    readers = Principals.from_data(
        [{"name": "ada", "token_sha256": token_digest(TOKEN), "roles": ["clerk"]}]
    )
    app = build_api(lambda: index, NoKafka(), readers)
    stop = threading.Event()
    try:
        with run_http(app, "127.0.0.1", 0, stop) as server:
            yield f"http://127.0.0.1:{server.port}"
    finally:
        stop.set()
        index.clear()


def _sign_in(page: Any, ui: str) -> None:
    page.goto(f"{ui}/ui")
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    page.wait_for_selector("text=Signed in as")


def test_the_overview_draws_status_duration_and_cost_charts(
    ui: str, chromium: Any, output_dir: Path
) -> None:
    page = chromium.new_page(viewport={"width": 1280, "height": 1000})
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    _sign_in(page, ui)
    page.click("text=Overview: charts")
    page.wait_for_url("**/ui/overview")
    # Runs by status: one segment per run here (each started in its own hour).
    segments = page.locator("#by-status svg rect[data-status]")
    statuses = sorted(segments.nth(i).get_attribute("data-status") for i in range(segments.count()))
    assert statuses == sorted(
        ["COMPLETED"] * 4 + ["FAILED", "CANCELLED", "RUNNING", "QUARANTINED"]
    ), statuses
    failed = page.locator("#by-status rect[data-status=FAILED]").first
    cancelled = page.locator("#by-status rect[data-status=CANCELLED]").first
    red = "rgb(179, 38, 30)"
    assert failed.evaluate("el => getComputedStyle(el).fill") == red
    assert cancelled.evaluate("el => getComputedStyle(el).fill") != red
    # Durations: p50 and p99 of refund's three completed runs and one failed (nearest rank).
    titles = page.locator("#durations svg rect title").all_text_contents()
    assert "refund p50 2.0 s" in titles and "refund p99 1 min 30 s" in titles, titles
    assert "triage p99 30.0 s" in titles  # the cancelled run ended too; the running one did not
    bars = page.locator("#durations svg rect")
    assert all(bars.nth(i).bounding_box()["width"] > 0 for i in range(bars.count()))
    # Cost: summed over each capability's runs (0.25 units times the run's place, 1-based).
    cost = page.inner_text("#cost")
    assert "2.5 units · 400/80 tokens" in cost, cost  # refund: .25+.5+.75+1
    assert "payout" in page.inner_text("#numbers")
    page.screenshot(path=str(output_dir / "runs-ui-overview.png"), full_page=True)
    # Nothing but this server: no chart library, no font, no CDN.
    assert requests and all(u.startswith(ui) for u in requests), requests


def test_the_list_at_420px_does_not_scroll_sideways_and_ids_do_not_wrap(
    ui: str, chromium: Any, output_dir: Path
) -> None:
    page = chromium.new_page(viewport={"width": 420, "height": 900})
    _sign_in(page, ui)
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the list is {overflow} px wider than a 420 px screen"
    long_id = page.locator(f"code.id[title='{LONG}']")
    assert long_id.count() == 1
    # One line: its height is one line's, its text cut with an ellipsis, the id whole in title.
    height, font = long_id.evaluate(
        "el => [el.getBoundingClientRect().height, parseFloat(getComputedStyle(el).fontSize)]"
    )
    assert height < 2 * font, f"the id wraps: {height} px high in a {font} px font"
    assert long_id.evaluate("el => el.scrollWidth > el.clientWidth")  # cut, not wrapped
    assert long_id.evaluate("el => getComputedStyle(el).textOverflow") == "ellipsis"
    # The failed run's row is red, the cancelled one's badge is not.
    red = "rgb(179, 38, 30)"
    row = page.locator("table.runs tr.run-bad").first
    assert row.evaluate("el => getComputedStyle(el).borderLeftColor") == red
    badge = page.locator(".badge:has-text('CANCELLED')")
    assert badge.evaluate("el => getComputedStyle(el).color") != red
    page.screenshot(path=str(output_dir / "runs-ui-list-420px.png"), full_page=True)
    page.goto(f"{ui}/ui/overview")
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the overview is {overflow} px wider than a 420 px screen"
    page.screenshot(path=str(output_dir / "runs-ui-overview-420px.png"), full_page=True)
