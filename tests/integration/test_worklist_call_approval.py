"""A proposed tool call decided through the worklist's HTTP API, on the real broker and Redis.

Three runs of an agent that asks ``ctx.approve_call`` before a refund park on their tasks; the
API shows each task's call (tool, arguments, labels, turn) and what may be edited. The run's
initiator is refused (403), an edit naming an argument the call does not have is refused
(422, with the reason), and then one run is approved, one rejected with a reason and one
edited: each run completes with the decision it was given — the edited argument comes back as
that person's release — and every chain verifies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_worklist_support import auth, worklist_service, write_principals

from runplane.config import Settings
from runplane.core import AgentRegistry, StepCtx, verify_chain
from runplane.core.releases import Released
from runplane.wire import JournalKind, RunStatus
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, chain_of, executor_thread, plain_producer, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration


def agents() -> AgentRegistry:
    registry = AgentRegistry()

    @registry.agent("call_approval", durability="replayable")
    async def call_approval(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
        proposed = {"recipient": input["to"], "amount_cents": 500}
        d = await ctx.approve_call("refund", proposed, role="finance", turn=0)
        return {
            "outcome": str(d.outcome),
            "reason": d.reason,
            "by": list(d.decided_by),
            "edited": list(d.edited),
            "arguments": {
                k: v.value if isinstance(v, Released) else v for k, v in d.arguments.items()
            },
            "released_by": {
                k: list(v.decided_by) for k, v in d.arguments.items() if isinstance(v, Released)
            },
        }

    return registry


def test_approve_reject_and_edit_a_proposed_call_through_the_api(
    settings: Settings, tmp_path: Path
) -> None:
    ex = ExecutorSettings(base=settings)
    with (
        worklist_service(settings, write_principals(tmp_path, tenant="acme")) as wl,
        executor_thread(ex, registry=agents()),
    ):
        c = wl.client
        runs = admit(
            plain_producer(settings),
            settings,
            "call_approval",
            [{"to": "A-1"}, {"to": "A-2"}, {"to": "A-3"}],
            initiator="ivan",
        )
        ids = [r.run_id for r in runs]

        def tasks() -> dict[str, dict[str, Any]] | None:
            listed = c.get("/api/tasks", headers=auth("ada")).json()["tasks"]
            mine = {t["session_id"]: t for t in listed if t["session_id"] in ids}
            return mine if len(mine) == 3 else None

        by_run = wait_for(tasks, what="the three call approvals in the API", timeout_s=60)
        first = by_run[ids[0]]
        assert first["answer"]["tool"] == "refund" and first["answer"]["turn"] == 0
        assert first["answer"]["arguments"] == {"recipient": "A-1", "amount_cents": 500}
        assert set(first["answer"]["labels"]) == {"recipient", "amount_cents"}
        assert first["editable"] == ["amount_cents", "recipient"]
        assert first["choices"] == ["approve", "edit", "reject"]

        def url(i: int) -> str:
            return f"/api/tasks/{by_run[ids[i]]['task_id']}/decide"

        edit = {"decision": "edit", "arguments": {"recipient": "OURS-9"}}
        refused = c.post(url(2), headers=auth("ivan"), json=edit)
        assert refused.status_code == 403 and "four-eyes" in refused.json()["detail"]
        bad = c.post(url(2), headers=auth("ada"), json={**edit, "arguments": {"iban": "X"}})
        assert bad.status_code == 422 and "'iban': not an argument" in bad.json()["detail"]
        no_args = c.post(url(2), headers=auth("ada"), json={"decision": "edit"})
        assert no_args.status_code == 422

        ok = c.post(url(0), headers=auth("ada"), json={"decision": "approve"})
        assert ok.status_code == 200 and ok.json()["outcome"] == "APPROVED"
        no = c.post(url(1), headers=auth("bob"), json={"decision": "reject", "comment": "nope"})
        assert no.status_code == 200 and no.json()["outcome"] == "REJECTED"
        edited = c.post(url(2), headers=auth("ada"), json=edit)
        assert edited.status_code == 200 and edited.json()["outcome"] == "APPROVED"

        def ended() -> bool:
            snaps = sessions(settings)
            return all(s in snaps and snaps[s].status is RunStatus.COMPLETED for s in ids)

        wait_for(ended, what="the three runs to complete", timeout_s=60)

    snaps = sessions(settings)
    out = [json.loads(snaps[s].output_json or "null") for s in ids]
    assert out[0] == {
        "outcome": "approved",
        "reason": "",
        "by": ["ada"],
        "edited": [],
        "arguments": {"recipient": "A-1", "amount_cents": 500},
        "released_by": {},
    }
    assert (out[1]["outcome"], out[1]["reason"], out[1]["by"]) == ("rejected", "nope", ["bob"])
    assert out[2]["outcome"] == "edited" and out[2]["edited"] == ["recipient"]
    assert out[2]["arguments"] == {"recipient": "OURS-9", "amount_cents": 500}
    assert out[2]["released_by"] == {"recipient": ["ada"]}
    for run_id in ids:
        records, results = chain_of(settings, run_id)
        assert verify_chain(records, results).ok
        decided = [r for r in records if r.kind is JournalKind.TASK_DECIDED]
        assert len(decided) == 1  # the initiator's and the bad edit never reached the run
