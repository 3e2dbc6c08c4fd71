"""The worklist after the security review, on the real broker and Redis: a claim's lease lapses
through the single writer's tick, a supervisor takes a claim back through the API (both noted
on the record in ``tasks``), and a decided task leaves the active indexes of the read model."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from test_worklist_support import (
    auth,
    open_task,
    read_all,
    send,
    worklist_service,
    write_principals,
)

from runplane.config import Settings
from runplane.wire import TaskRecord, TaskStatus
from services.worklist.topology import redis_namespace
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration


def _records(settings: Settings, task_id: str) -> list[TaskRecord]:
    return [v for k, v in read_all(settings, "tasks") if k == task_id and isinstance(v, TaskRecord)]


def test_a_lapsed_claim_returns_to_open_and_the_record_says_so(
    settings: Settings, tmp_path: Path
) -> None:
    task = open_task()
    with worklist_service(settings, write_principals(tmp_path), claim_ttl_s=1) as wl:
        c = wl.client
        send(settings, task)
        wait_for(
            lambda: c.get(f"/api/tasks/{task.task_id}", headers=auth("ada")).status_code == 200,
            what="the task",
        )
        held = c.post(f"/api/tasks/{task.task_id}/claim", headers=auth("ada"))
        assert held.status_code == 200 and held.json()["claimed_by"] == "ada"
        assert held.json()["claim_expires_ms"] == held.json()["updated_ms"] + 1_000

        def lapsed() -> dict | None:  # type: ignore[type-arg]
            t = c.get(f"/api/tasks/{task.task_id}", headers=auth("bob")).json()
            return t if t.get("status") == "OPEN" and t.get("claim_note") else None

        shown = wait_for(lapsed, what="the lease to lapse", timeout_s=30)
        assert shown["claimed_by"] is None and "ada" in shown["claim_note"]
        # Someone else can take it now.
        assert (
            c.post(f"/api/tasks/{task.task_id}/claim", headers=auth("bob")).json()["claimed_by"]
            == "bob"
        )
    history = _records(settings, task.task_id)
    assert [r.status for r in history] == [
        TaskStatus.OPEN,
        TaskStatus.CLAIMED,
        TaskStatus.OPEN,
        TaskStatus.CLAIMED,
    ]
    assert history[2].claim_note is not None and "lapsed" in history[2].claim_note


def test_a_supervisor_releases_a_claim_and_decided_tasks_leave_the_active_index(
    settings: Settings, tmp_path: Path
) -> None:
    task = open_task()
    with worklist_service(settings, write_principals(tmp_path)) as wl:
        c = wl.client
        send(settings, task)
        url = f"/api/tasks/{task.task_id}"
        wait_for(lambda: c.get(url, headers=auth("ada")).status_code == 200, what="the task")
        assert c.post(f"{url}/claim", headers=auth("ada")).status_code == 200
        assert c.post(f"{url}/release", headers=auth("bob")).status_code == 409
        r = c.post(f"{url}/release", headers=auth("sue"))  # sue: supervisor
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "OPEN" and "released by sue" in r.json()["claim_note"]

        client = redis.Redis.from_url(settings.redis_url)
        ns = redis_namespace(settings)
        assert client.zcard(f"{ns}ix:OPEN:role:finance") == 1
        decided = c.post(f"{url}/decide", headers=auth("bob"), json={"decision": "approve"})
        assert decided.status_code == 200 and decided.json()["status"] == "DECIDED"
        # The record and its indexes moved together: out of the active ones, into DECIDED.
        assert client.zcard(f"{ns}ix:OPEN:role:finance") == 0
        assert client.zcard(f"{ns}ix:CLAIMED:all") == 0
        assert client.zcard(f"{ns}ix:DECIDED:role:finance") == 1
        listed = c.get("/api/tasks", headers=auth("bob"), params={"status": "DECIDED"}).json()
        assert [t["task_id"] for t in listed["tasks"]] == [task.task_id]
    released = [r for r in _records(settings, task.task_id) if r.claim_note]
    assert released and "was claimed by ada" in released[0].claim_note  # type: ignore[operator]
