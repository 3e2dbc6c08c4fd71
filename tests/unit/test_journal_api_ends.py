"""``GET /runs/{id}`` says how a run ended: CANCELLED with who and why, a failure's reason and
error type (body-free facts of its end record, so any reader of the run sees them)."""

from __future__ import annotations

import threading

import httpx
import pytest
from test_journal_api_guards import BOB, READERS, FakeIndex, FakeReader

from runplane.journal.summary import RunSummary
from runplane.serving.shell import run_http
from runplane.wire import RunStatus
from services.journal.api import build_api

pytestmark = pytest.mark.unit


def test_the_run_says_who_cancelled_it_and_why() -> None:
    runs = {
        "r-1": RunSummary(
            "r-1",
            status=RunStatus.CANCELLED,
            tenant="default",
            ended_reason="wrong customer",
            cancelled_by="ops",
        ),
        "r-2": RunSummary(
            "r-2",
            status=RunStatus.FAILED,
            tenant="default",
            ended_reason="card declined",
            error_type="ToolError",
        ),
    }
    app = build_api(lambda: FakeIndex(runs), FakeReader(), READERS)  # type: ignore[arg-type,return-value]
    stop = threading.Event()
    with (
        run_http(app, "127.0.0.1", 0, stop) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=20) as c,
    ):
        cancelled = c.get("/runs/r-1", headers=BOB).json()
        failed = c.get("/runs/r-2", headers=BOB).json()
    stop.set()
    assert (cancelled["status"], cancelled["cancelled_by"], cancelled["ended_reason"]) == (
        "CANCELLED",
        "ops",
        "wrong customer",
    )
    assert (failed["status"], failed["error_type"], failed["ended_reason"]) == (
        "FAILED",
        "ToolError",
        "card declined",
    )
