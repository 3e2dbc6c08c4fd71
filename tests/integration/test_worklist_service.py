"""The worklist on the real broker and Redis: four-eyes over HTTP, decisions into the inbox,
expiry, the single writer's authority, and a read model that survives losing Redis."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from test_worklist_support import (
    auth,
    dead_letters,
    decisions,
    forget_read_model,
    open_task,
    read_all,
    send,
    worklist_service,
    write_principals,
)
from typer.testing import CliRunner

from runplane.cli import app
from runplane.config import Settings
from runplane.wire import (
    DecideTask,
    DecisionOutcome,
    ExpiryPolicy,
    TaskDecision,
    TaskRecord,
    TaskStatus,
)
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration


def visible(client, task_id: str, who: str = "ada") -> dict | None:  # type: ignore[no-untyped-def,type-arg]
    r = client.get(f"/api/tasks/{task_id}", headers=auth(who))
    return r.json() if r.status_code == 200 else None


def decided(settings: Settings, session: str) -> list[TaskDecision]:
    return wait_for(lambda: decisions(settings, session), what=f"{session} decided")


def test_opened_task_is_listed_initiator_refused_another_approves(
    settings: Settings, tmp_path: Path
) -> None:
    task = open_task()
    with worklist_service(settings, write_principals(tmp_path)) as wl:
        c = wl.client
        send(settings, task, task)  # the executor may send OpenTask twice (replay): idempotent
        wait_for(lambda: visible(c, task.task_id), what="the task in the API")
        listed = c.get(
            "/api/tasks", headers=auth("ada"), params={"status": "OPEN", "actionable": True}
        )
        assert [t["task_id"] for t in listed.json()["tasks"]] == [task.task_id]
        assert listed.json()["tasks"][0]["answer"] == {"amount_cents": 1200, "invoice_id": "INV-7"}

        r = c.post(
            f"/api/tasks/{task.task_id}/decide", headers=auth("ivan"), json={"decision": "approve"}
        )
        assert r.status_code == 403 and "four-eyes" in r.json()["detail"]
        # cy holds no role of this task and is not involved: it does not exist for cy.
        assert c.post(f"/api/tasks/{task.task_id}/claim", headers=auth("cy")).status_code == 404
        assert c.get(f"/api/tasks/{task.task_id}", headers=auth("cy")).status_code == 404
        assert c.post("/api/tasks/no-such/0/1/claim", headers=auth("ada")).status_code == 404
        assert c.get("/api/tasks", headers={"Authorization": "Bearer nope"}).status_code == 401

        claimed = c.post(f"/api/tasks/{task.task_id}/claim", headers=auth("ada"))
        assert claimed.status_code == 200 and claimed.json()["claimed_by"] == "ada"
        r = c.post(
            f"/api/tasks/{task.task_id}/decide", headers=auth("bob"), json={"decision": "approve"}
        )
        assert r.status_code == 409 and "claimed by ada" in r.json()["detail"]

        done = c.post(
            f"/api/tasks/{task.task_id}/decide",
            headers=auth("ada"),
            json={"decision": "approve", "comment": "checked the invoice"},
        )
        # Answered after the writer applied it: the body is the committed record.
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "DECIDED" and done.json()["outcome"] == "APPROVED"

    (d,) = decisions(settings, task.session_id)
    assert d.outcome is DecisionOutcome.APPROVED and d.decided_by == ("ada",)
    assert (d.task_id, d.era, d.call_seq, d.comment) == (task.task_id, 0, 1, "checked the invoice")
    versions = [r for k, r in read_all(settings, "tasks") if k == task.task_id]
    assert [v.status for v in versions if isinstance(v, TaskRecord)] == [
        TaskStatus.OPEN,
        TaskStatus.CLAIMED,
        TaskStatus.DECIDED,
    ]


def test_two_approvals_need_two_distinct_principals(settings: Settings, tmp_path: Path) -> None:
    task = open_task(approvals=2)
    with worklist_service(settings, write_principals(tmp_path)) as wl:
        c = wl.client
        send(settings, task)
        wait_for(lambda: visible(c, task.task_id), what="the task")
        url = f"/api/tasks/{task.task_id}/decide"
        first = c.post(url, headers=auth("ada"), json={"decision": "approve", "comment": "one"})
        assert first.status_code == 200 and first.json()["status"] == "OPEN"
        assert first.json()["approved_by"] == ["ada"]
        again = c.post(url, headers=auth("ada"), json={"decision": "approve"})
        assert again.status_code == 403 and "already approved" in again.json()["detail"]
        assert decisions(settings, task.session_id) == []
        second = c.post(url, headers=auth("bob"), json={"decision": "approve", "comment": "two"})
        assert second.status_code == 200 and second.json()["status"] == "DECIDED"
    (d,) = decisions(settings, task.session_id)
    assert d.decided_by == ("ada", "bob") and d.comment == "ada: one\nbob: two"


def test_the_writer_refuses_what_the_api_would_refuse(settings: Settings, tmp_path: Path) -> None:
    """A command that bypasses the API (the initiator deciding their own task) is refused by
    the single writer and dead-lettered with the reason; the run hears nothing."""
    task = open_task()
    forged = DecideTask(task_id=task.task_id, principal="ivan", at_ms=1, approve=True)
    with worklist_service(settings, write_principals(tmp_path)) as wl:
        send(settings, task, forged)
        (dl,) = wait_for(lambda: dead_letters(settings, task.task_id), what="the dead letter")
        assert "four-eyes" in dl.reason
        assert visible(wl.client, task.task_id)["status"] == "OPEN"  # type: ignore[index]
    assert decisions(settings, task.session_id) == []


def test_expiry_proceeds_only_with_both_opt_ins(settings: Settings, tmp_path: Path) -> None:
    soon = time.time_ns() // 1_000_000 + 1_500
    both = open_task(expires_ms=soon, on_expiry=ExpiryPolicy.PROCEED, allow_unattended=True)
    one = open_task(expires_ms=soon, on_expiry=ExpiryPolicy.PROCEED, allow_unattended=False)
    up = open_task(expires_ms=soon, on_expiry=ExpiryPolicy.ESCALATE)
    with worklist_service(settings, write_principals(tmp_path)) as wl:
        send(settings, both, one, up)
        got = {t.session_id: decided(settings, t.session_id) for t in (both, one, up)}
        escalated = wait_for(
            lambda: visible(wl.client, up.task_id, "sue"), what="the escalated task"
        )
        assert escalated["status"] == "OPEN" and escalated["role"] == "supervisor"
        assert escalated["you_may_act"] is True
        metrics = wl.client.get("/metrics").text
    assert got[both.session_id][0].outcome is DecisionOutcome.EXPIRED_PROCEEDED
    assert got[both.session_id][0].decided_by == ()
    assert got[one.session_id][0].outcome is DecisionOutcome.EXPIRED_FAILED
    assert "allow_unattended" in got[one.session_id][0].comment
    assert got[up.session_id][0].outcome is DecisionOutcome.ESCALATED
    assert 'runplane_task_expiries_total{outcome="EXPIRED_PROCEEDED"}' in metrics


def test_losing_redis_loses_nothing(settings: Settings, tmp_path: Path) -> None:
    task = open_task()
    with worklist_service(settings, write_principals(tmp_path)) as wl:
        send(settings, task)
        wait_for(lambda: visible(wl.client, task.task_id), what="the task")
        assert forget_read_model(settings) >= 2
        # The indexer notices the read model is gone and rebuilds it from the tasks topic.
        again = wait_for(lambda: visible(wl.client, task.task_id), what="the rebuilt task")
        assert again["question"] == task.question
        r = wl.client.post(
            f"/api/tasks/{task.task_id}/decide", headers=auth("bob"), json={"decision": "reject"}
        )
        assert r.status_code == 200 and r.json()["outcome"] == "REJECTED"
    # A restarted worklist with an empty Redis rebuilds too.
    forget_read_model(settings)
    with worklist_service(settings, write_principals(tmp_path)) as wl:
        shown = wait_for(lambda: visible(wl.client, task.task_id), what="the task after restart")
        assert shown["status"] == "DECIDED" and shown["claimed_by"] == "bob"


def test_cli_lists_and_decides_through_the_api(settings: Settings, tmp_path: Path) -> None:
    task = open_task(question="Refund via the CLI?")
    runner = CliRunner()
    with worklist_service(settings, write_principals(tmp_path)) as wl:
        send(settings, task)
        wait_for(lambda: visible(wl.client, task.task_id), what="the task")
        base = ["--url", wl.url]
        listed = runner.invoke(
            app, ["tasks", "list", "--token", "ada-token", "--mine", "--json", *base]
        )
        assert listed.exit_code == 0, listed.output
        assert [t["task_id"] for t in json.loads(listed.output)] == [task.task_id]
        wide = {"COLUMNS": "200"}
        table = runner.invoke(app, ["tasks", "list", "--token", "ada-token", *base], env=wide)
        assert "Refund via the CLI?" in table.output
        refused = runner.invoke(
            app, ["tasks", "decide", task.task_id, "approve", "--token", "ivan-token", *base]
        )
        assert refused.exit_code == 1 and "403" in refused.output and "four-eyes" in refused.output
        no_token = runner.invoke(app, ["tasks", "list", "--token", "wrong", *base])
        assert no_token.exit_code == 1 and "401" in no_token.output
        done = runner.invoke(
            app,
            [
                "tasks",
                "decide",
                task.task_id,
                "reject",
                "--token",
                "bob-token",
                "--comment",
                "no",
                *base,
            ],
        )
        assert done.exit_code == 0, done.output
        assert f"{task.task_id}: REJECTED by bob" in done.output
    (d,) = decisions(settings, task.session_id)
    assert d.outcome is DecisionOutcome.REJECTED and d.decided_by == ("bob",) and d.comment == "no"
    unreachable = runner.invoke(
        app, ["tasks", "list", "--token", "x", "--url", "http://127.0.0.1:9"]
    )
    assert unreachable.exit_code == 2
