"""A panel of people on the worklist, with the real executor, broker and Redis (issue 14.5).

The run opens a task per seat (two finance seats, one auditor seat; 2 approvals carry it) and
parks. Its initiator is refused every seat (403). ada approves one finance seat; the executor
is stopped and another restores the run mid-panel (nobody is asked again); ada approves the
other finance seat: the worklist sees two tasks and lets her, the run does not count the second (four-eyes
across the panel) and asks that seat again with a new task; bob approves it. Two approvals
decide the panel before the auditor seat is decided: that task is withdrawn, the run
completes with ``Approved``, each decision is in its journal, which verifies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_worklist_support import auth, worklist_service, write_principals

from runplane.config import Settings
from runplane.core import AgentRegistry, StepCtx, verify_chain
from runplane.wire import JournalKind, RunStatus
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, chain_of, executor_thread, plain_producer, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

SEATS = {"fin-1": "finance", "fin-2": "finance", "audit": "auditor"}


def panel_agents() -> AgentRegistry:
    registry = AgentRegistry()

    @registry.agent("payout_panel", durability="replayable")
    async def payout_panel(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
        outcome = await ctx.human_panel("Release the payout?", input, seats=SEATS, approve_at=2)
        return {"panel": type(outcome).__name__, "seats": list(getattr(outcome, "approvers", ()))}

    return registry


def _open_seats(client: Any, who: str, run_id: str) -> dict[str, dict[str, Any]]:
    tasks = client.get("/api/tasks", headers=auth(who), params={"status": "OPEN"}).json()["tasks"]
    return {t["task_id"]: t for t in tasks if t["session_id"] == run_id}


def _counted(settings: Settings, run_id: str) -> int:
    records, _ = chain_of(settings, run_id)
    return sum(
        1
        for r in records
        if r.kind is JournalKind.TASK_DECIDED and dict(r.attrs).get("counted") == "yes"
    )


def _decide(client: Any, who: str, task_id: str) -> Any:
    return client.post(
        f"/api/tasks/{task_id}/decide", headers=auth(who), json={"decision": "approve"}
    )


def test_a_panel_of_people_decides_by_quorum_with_four_eyes_across_seats(
    settings: Settings, tmp_path: Path
) -> None:
    ex = ExecutorSettings(base=settings)
    principals = write_principals(tmp_path, tenant="acme")
    with worklist_service(settings, principals) as wl:
        c = wl.client
        with executor_thread(ex, registry=panel_agents()):
            [run] = admit(
                plain_producer(settings),
                settings,
                "payout_panel",
                [{"amount": 40}],
                initiator="ivan",
            )
            rid = run.run_id
            wait_for(lambda: len(_open_seats(c, "ada", rid)) == 3, what="three seats", timeout_s=60)
            open_ = _open_seats(c, "ada", rid)
            fin1, fin2, audit = (f"{rid}/0/0/panel/{s}" for s in ("fin-1", "fin-2", "audit"))
            assert set(open_) == {fin1, fin2, audit}
            assert open_[audit]["role"] == "auditor" and open_[fin1]["answer"] == {"amount": 40}

            refused = _decide(c, "ivan", fin1)  # the initiator sits on no seat
            assert refused.status_code == 403 and "four-eyes" in refused.json()["detail"]
            assert _decide(c, "ada", fin1).status_code == 200
            wait_for(lambda: _counted(settings, rid) == 1, what="ada's vote counted", timeout_s=60)
        # The executor is gone; the next one restores the run mid-panel from its snapshot and
        # journal: nobody is asked again, ada's vote still counts.
        with executor_thread(ex, registry=panel_agents()):
            # The worklist cannot tell the seats are one panel: it lets ada decide another.
            assert _decide(c, "ada", fin2).status_code == 200
            again = f"{fin2}/1"
            wait_for(
                lambda: again in _open_seats(c, "bob", rid), what="fin-2 asked again", timeout_s=60
            )
            assert sessions(settings)[rid].status is RunStatus.AWAITING_HUMAN
            assert _decide(c, "bob", again).status_code == 200

            wait_for(
                lambda: sessions(settings)[rid].status is RunStatus.COMPLETED,
                what="completion",
                timeout_s=60,
            )
            closed = f"/api/tasks/{audit}"
            wait_for(
                lambda: c.get(closed, headers=auth("ada")).json()["status"] == "CLOSED",
                what="the auditor seat withdrawn",
                timeout_s=60,
            )

    opened = [r for r in chain_of(settings, rid)[0] if r.kind is JournalKind.TASK_OPENED]
    assert [dict(r.attrs)["task_id"] for r in opened] == [audit, fin1, fin2, f"{fin2}/1"]
    output = json.loads(sessions(settings)[rid].output_json or "null")
    assert output == {"panel": "Approved", "seats": ["fin-1", "fin-2"]}
    records, results = chain_of(settings, rid)
    assert verify_chain(records, results).ok
    decided = [dict(r.attrs) for r in records if r.kind is JournalKind.TASK_DECIDED]
    assert [(d.get("seat"), d.get("decided_by"), d.get("counted")) for d in decided] == [
        ("fin-1", "ada", "yes"),
        ("fin-2", "ada", "no"),
        ("fin-2", "bob", "yes"),
        (None, None, None),  # the panel's result
    ]
    assert decided[-1]["panel"] == "APPROVED"
    [result] = [e for e in results.values() if e.name == "panel"]
    assert json.loads(result.value_json or "null")["deciders"] == {
        "fin-1": ["ada"],
        "fin-2": ["bob"],
    }
