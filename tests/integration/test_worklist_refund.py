"""The worklist with the real executor in the loop, on the real broker and Redis.

The refund example parks on its approval; the task appears in the worklist API; the run's
initiator is refused (403), a principal of another tenant holding the role finds no such task
(404); another principal's approval resumes the run to completion with
one charge. Expiry: an agent that declared both opt-ins proceeds unattended and its journal
says so; one missing opt-in does not proceed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_worklist_support import auth, token, worklist_service, write_principals

from runplane.config import Settings
from runplane.core import AgentRegistry, StepCtx, verify_chain
from runplane.fakes import FakeBillingServer, read_counts
from runplane.wire import JournalKind, RunStatus
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, chain_of, executor_thread, plain_producer, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[FakeBillingServer]:
    with FakeBillingServer(counts_path=tmp_path / "billing.json") as server:
        yield server


def status_of(settings: Settings, run_id: str) -> RunStatus | None:
    snap = sessions(settings).get(run_id)
    return None if snap is None else snap.status


def test_refund_parks_initiator_refused_another_approves_run_completes(
    settings: Settings, billing: FakeBillingServer, tmp_path: Path
) -> None:
    ex = ExecutorSettings(
        base=settings, billing_url=billing.url, agent_modules=("examples.refund",)
    )
    principals = write_principals(tmp_path, tenant="acme")
    # gil holds the same role in another tenant: acme's task does not exist for them.
    digest = hashlib.sha256(token("gil").encode()).hexdigest()
    with principals.open("a") as f:
        f.write(f"  - {{name: gil, token_sha256: {digest}, roles: [finance], tenant: globex}}\n")
    with worklist_service(settings, principals) as wl, executor_thread(ex):
        c = wl.client
        [run] = admit(
            plain_producer(settings),
            settings,
            "refund",
            [{"invoice_id": "INV-9"}],
            initiator="ivan",
        )
        tasks = wait_for(
            lambda: c.get("/api/tasks", headers=auth("ada")).json()["tasks"],
            what="the refund's task in the API",
            timeout_s=60,
        )
        (task,) = [t for t in tasks if t["session_id"] == run.run_id]
        assert task["initiator"] == "ivan" and task["role"] == "finance"
        assert task["answer"]["invoice_id"] == "INV-9"
        assert status_of(settings, run.run_id) is RunStatus.AWAITING_HUMAN
        assert billing.counts().charges == {}  # nothing charged before a person decided

        url = f"/api/tasks/{task['task_id']}/decide"
        assert c.get("/api/tasks", headers=auth("gil")).json()["tasks"] == []
        assert c.get(f"/api/tasks/{task['task_id']}", headers=auth("gil")).status_code == 404
        other = c.post(url, headers=auth("gil"), json={"decision": "approve"})
        assert other.status_code == 404  # another tenant's task, whatever the role
        refused = c.post(url, headers=auth("ivan"), json={"decision": "approve"})
        assert refused.status_code == 403 and "four-eyes" in refused.json()["detail"]
        ok = c.post(url, headers=auth("ada"), json={"decision": "approve", "comment": "ok"})
        assert ok.status_code == 200 and ok.json()["outcome"] == "APPROVED"

        wait_for(
            lambda: status_of(settings, run.run_id) is RunStatus.COMPLETED,
            what="completion",
            timeout_s=60,
        )

    output = json.loads(sessions(settings)[run.run_id].output_json or "null")
    assert output["status"] == "refunded" and output["approved_by"] == ["ada"]
    assert read_counts(tmp_path / "billing.json").charges == {f"refund/{run.run_id}": 1}
    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    decided = [r for r in records if r.kind is JournalKind.TASK_DECIDED]
    assert [dict(r.attrs)["outcome"] for r in decided] == ["APPROVED"]


def ended_probe(settings: Settings, run_id: str) -> Callable[[], bool]:
    return lambda: status_of(settings, run_id) in {RunStatus.COMPLETED, RunStatus.FAILED}


def expiring_agents() -> AgentRegistry:
    registry = AgentRegistry()

    async def ask(ctx: StepCtx, input: dict[str, Any], unattended: bool) -> dict[str, Any]:
        decision = await ctx.approval(
            "Send the reminder?",
            {"to": input["to"]},
            role="finance",
            expires_in=1_000,
            on_expiry="proceed",
            allow_unattended=unattended,
        )
        return {"approved": decision.approved, "outcome": decision.outcome}

    @registry.agent("remind_unattended", durability="replayable")
    async def remind_unattended(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
        return await ask(ctx, input, True)

    @registry.agent("remind_attended", durability="replayable")
    async def remind_attended(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
        return await ask(ctx, input, False)

    return registry


def test_expiry_proceeds_only_with_both_opt_ins_and_the_journal_says_so(
    settings: Settings, tmp_path: Path
) -> None:
    ex = ExecutorSettings(base=settings)
    with (
        worklist_service(settings, write_principals(tmp_path, tenant="acme")),
        executor_thread(ex, registry=expiring_agents()),
    ):
        producer = plain_producer(settings)
        [both] = admit(producer, settings, "remind_unattended", [{"to": "a"}], initiator="ivan")
        [one] = admit(producer, settings, "remind_attended", [{"to": "b"}], initiator="ivan")
        for run_id in (both.run_id, one.run_id):
            wait_for(ended_probe(settings, run_id), what=f"{run_id} to end", timeout_s=60)

    assert status_of(settings, both.run_id) is RunStatus.COMPLETED
    out = json.loads(sessions(settings)[both.run_id].output_json or "null")
    assert out == {"approved": True, "outcome": "EXPIRED_PROCEEDED"}
    records, _ = chain_of(settings, both.run_id)
    assert [dict(r.attrs)["outcome"] for r in records if r.kind is JournalKind.TASK_DECIDED] == [
        "EXPIRED_PROCEEDED"
    ]

    # One opt-in missing: the worklist does not proceed; the approval fails (ApprovalExpired).
    assert status_of(settings, one.run_id) is RunStatus.FAILED
    records, _ = chain_of(settings, one.run_id)
    assert [dict(r.attrs)["outcome"] for r in records if r.kind is JournalKind.TASK_DECIDED] == [
        "EXPIRED_FAILED"
    ]
