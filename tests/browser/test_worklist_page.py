"""The worklist page in headless Chromium: sign in, open the refund's task, approve it, and
the run resumes to completion (real broker, Redis, executor and worklist)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_worklist_support import (
    auth,
    decisions,
    open_task,
    send,
    worklist_service,
    write_principals,
)

from runplane.config import Settings
from runplane.fakes import FakeBillingServer
from runplane.wire import ExpiryPolicy, RunStatus, TaskKind
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, executor_thread, plain_producer, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.browser


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[FakeBillingServer]:
    with FakeBillingServer(counts_path=tmp_path / "billing.json") as server:
        yield server


def status_of(settings: Settings, run_id: str) -> RunStatus | None:
    snap = sessions(settings).get(run_id)
    return None if snap is None else snap.status


def test_sign_in_approve_and_the_run_resumes(
    stack_settings: Settings,
    billing: FakeBillingServer,
    chromium: Any,
    output_dir: Path,
    tmp_path: Path,
) -> None:
    settings = stack_settings
    ex = ExecutorSettings(
        base=settings, billing_url=billing.url, agent_modules=("examples.refund",)
    )
    with (
        worklist_service(settings, write_principals(tmp_path, tenant="acme")) as wl,
        executor_thread(ex),
    ):
        [run] = admit(
            plain_producer(settings),
            settings,
            "refund",
            [{"invoice_id": "INV-42"}],
            initiator="ivan",
        )
        wait_for(
            lambda: wl.client.get("/api/tasks", headers=auth("ada")).json()["tasks"],
            what="the task in the API",
            timeout_s=60,
        )
        page = chromium.new_page(viewport={"width": 1200, "height": 900})
        page.goto(wl.url + "/")

        # A wrong token is refused with a message; the right one signs in.
        page.fill("#token", "not-a-token")
        page.click("button[type=submit]")
        assert "That token is not known here." in page.inner_text("main")
        page.fill("#token", "ada-token")
        page.click("button[type=submit]")
        page.wait_for_selector("text=Signed in as")
        assert "ada" in page.inner_text("header")

        # The refund waits for ada; open it: the question and the proposed answer are there.
        page.click("table a:has-text('INV-42')")
        page.wait_for_selector("#answer")
        answer = json.loads(page.inner_text("#answer"))
        assert answer["invoice_id"] == "INV-42" and answer["amount_cents"] > 0
        assert "ivan" in page.inner_text(".details")  # who started the run
        page.screenshot(path=str(output_dir / "worklist-task.png"), full_page=True)

        page.click("button:has-text('Claim')")
        page.wait_for_selector("text=You hold the claim on this task.")
        page.fill("#comment", "Invoice checked against the order.")
        page.click("button:has-text('Approve')")
        page.wait_for_selector("text=Decided: approved")
        assert "decided" in page.inner_text(".badge") or "approved" in page.inner_text(".badge")

        # The decision reached the run: it resumes and completes.
        wait_for(
            lambda: status_of(settings, run.run_id) is RunStatus.COMPLETED,
            what="the run to complete",
            timeout_s=60,
        )
        page.reload()
        page.screenshot(path=str(output_dir / "worklist-task-decided.png"), full_page=True)
        assert "Invoice checked against the order." in page.inner_text(".details")
        page.close()

    output = json.loads(sessions(settings)[run.run_id].output_json or "null")
    assert output["status"] == "refunded" and output["approved_by"] == ["ada"]
    assert (output_dir / "worklist-task.png").stat().st_size > 10_000


def test_the_initiator_sees_why_they_cannot_act(
    stack_settings: Settings, chromium: Any, tmp_path: Path
) -> None:
    task = open_task(question="Refund INV-77?")
    with worklist_service(stack_settings, write_principals(tmp_path)) as wl:
        send(stack_settings, task)
        wait_for(
            lambda: wl.client.get("/api/tasks", headers=auth("ivan")).json()["tasks"],
            what="the task",
        )
        page = chromium.new_page()
        page.goto(wl.url + "/")
        page.fill("#token", "ivan-token")
        page.click("button[type=submit]")
        page.wait_for_selector("text=Nothing is waiting for you.")
        page.click("a:has-text('Refund INV-77?')")
        note = page.inner_text("#actions")
        assert "four-eyes" in note and "ivan" in note
        assert page.query_selector("button:has-text('Approve')") is None
        page.close()


def test_an_operator_answers_a_call_in_doubt_with_its_observed_result(
    stack_settings: Settings, chromium: Any, output_dir: Path, tmp_path: Path
) -> None:
    task = open_task(
        "run-opb/0/2/operator",
        kind=TaskKind.OPERATOR,
        call_seq=2,
        role="operator",
        question="Did tool://charge (call 2 of run run-opb) take effect?",
        answer_json='{"effect":"tool://charge","request":{"args":{"cents":5},'
        '"idempotency_key":"inv-7","tool":"charge"}}',
        on_expiry=ExpiryPolicy.ESCALATE,
    )
    with worklist_service(stack_settings, write_principals(tmp_path)) as wl:
        send(stack_settings, task)
        wait_for(
            lambda: wl.client.get("/api/tasks", headers=auth("sue")).json()["tasks"],
            what="the task",
        )
        page = chromium.new_page(viewport={"width": 1200, "height": 1000})
        page.goto(wl.url + "/")
        page.fill("#token", "sue-token")
        page.click("button[type=submit]")
        page.click("a:has-text('take effect?')")
        assert page.inner_text("#call-name") == "tool://charge"
        assert json.loads(page.inner_text("#answer")) == {"cents": 5}
        assert page.query_selector("button:has-text('Approve')") is None
        page.screenshot(path=str(output_dir / "worklist-operator-task.png"), full_page=True)
        page.fill("#result", '{"charge_id": "ch_seen"}')
        page.click("button:has-text('It happened')")
        page.wait_for_selector("text=Decided: happened")
        page.close()
        (decision,) = wait_for(lambda: decisions(stack_settings, "run-opb"), what="the verdict")
    assert str(decision.outcome) == "APPROVED" and decision.decided_by == ("sue",)
    assert json.loads(decision.comment) == {"charge_id": "ch_seen"}
