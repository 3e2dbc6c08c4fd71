"""Operator verdicts through the worklist, with the real executor, broker and Redis.

A mutating call whose outcome is unknown (the peer timed out after the request was sent) is in
doubt; its declared recovery is the default for a mutation, ``requires_operator``, so the
executor parks the run on an OPERATOR task. Nobody is killed: the fake tool answers its first
call with an in-doubt failure. Each verdict, given on the worklist API by a principal holding
the role ``operator``, reaches the run and does what it says:

- retry    → the call is performed again (the tool sees a second call) and its value is used;
- happened → the call is not performed again; the observed result is the call's value;
- abandon  → recorded as failed: the agent sees ``EffectAbandoned`` with the note.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from test_worklist_support import auth, worklist_service, write_principals

from runplane.config import Settings
from runplane.core import AgentRegistry, EffectDecl, EffectError, StepCtx, verify_chain
from runplane.providers import PeerCallError, Reach
from runplane.wire import JournalKind, RunStatus
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, chain_of, executor_thread, plain_producer, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration


class FlakyCharge:
    """``charge``: the first call is in doubt (sent, then timed out); later calls succeed."""

    name = "charge"
    decl = EffectDecl("charge", mutating=True)  # recovery: requires_operator (the default)

    def __init__(self) -> None:
        self.calls: list[str | None] = []

    async def call(self, args: Mapping[str, Any], *, idempotency_key: str | None) -> Any:
        self.calls.append(idempotency_key)
        if len(self.calls) == 1:
            raise PeerCallError("read timeout after send", reach=Reach.IN_DOUBT, retryable=True)
        return {"charge_id": f"ch_{len(self.calls)}", "cents": args["cents"]}


def agents() -> AgentRegistry:
    registry = AgentRegistry()

    @registry.agent("charge_once", durability="replayable")
    async def charge_once(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
        try:
            charge = await ctx.tool("charge", {"cents": input["cents"]}, idempotency_key="inv-7")
        except EffectError as exc:
            return {"failed": exc.type, "why": exc.message}
        return {"charge": charge}

    return registry


def _status(settings: Settings, run_id: str) -> RunStatus | None:
    snap = sessions(settings).get(run_id)
    return None if snap is None else snap.status


@pytest.mark.parametrize(
    "body, calls, output",
    [
        (
            {"decision": "retry", "comment": "not in the ledger"},
            2,
            {"charge": {"charge_id": "ch_2", "cents": 5}},
        ),
        (
            {"decision": "happened", "result": {"charge_id": "ch_seen"}},
            1,
            {"charge": {"charge_id": "ch_seen"}},
        ),
        (
            {"decision": "abandon", "comment": "customer cancelled"},
            1,
            {"failed": "EffectAbandoned", "why": "customer cancelled"},
        ),
    ],
    ids=["retry", "happened", "abandon"],
)
def test_each_operator_verdict_reaches_the_run(
    settings: Settings, tmp_path: Path, body: dict[str, Any], calls: int, output: dict[str, Any]
) -> None:
    tool = FlakyCharge()
    ex = ExecutorSettings(base=settings)
    with (
        worklist_service(settings, write_principals(tmp_path, tenant="acme")) as wl,
        executor_thread(ex, registry=agents(), tools={"charge": tool}),
    ):
        c = wl.client
        [run] = admit(
            plain_producer(settings), settings, "charge_once", [{"cents": 5}], initiator="ivan"
        )

        def operator_task() -> dict[str, Any] | None:
            tasks = c.get("/api/tasks", headers=auth("sue")).json()["tasks"]
            mine = [t for t in tasks if t["session_id"] == run.run_id and t["kind"] == "OPERATOR"]
            return mine[0] if mine else None

        task = wait_for(operator_task, what="the operator task in the API", timeout_s=60)
        assert task["choices"] == ["retry", "happened", "abandon"]
        assert task["call"] == {
            "name": "tool://charge",
            "args": {"cents": 5},
            "idempotency_key": "inv-7",
        }
        assert (
            task["role"] == "operator" and _status(settings, run.run_id) is RunStatus.AWAITING_HUMAN
        )
        url = f"/api/tasks/{task['task_id']}/decide"
        # The wrong kind of answer is refused before anything is sent; ada may not even see it.
        wrong = c.post(url, headers=auth("sue"), json={"decision": "approve"})
        assert wrong.status_code == 422 and "verdict" in wrong.json()["detail"]
        assert c.post(url, headers=auth("ada"), json={"decision": "retry"}).status_code == 404

        decided = c.post(url, headers=auth("sue"), json=body)
        assert decided.status_code == 200, decided.text
        wait_for(
            lambda: _status(settings, run.run_id) is RunStatus.COMPLETED,
            what="the run to end",
            timeout_s=60,
        )

    assert json.loads(sessions(settings)[run.run_id].output_json or "null") == output
    assert tool.calls == ["inv-7"] * calls  # retried once at most, always under the same key
    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    outcomes = [dict(r.attrs)["outcome"] for r in records if r.kind is JournalKind.TASK_DECIDED]
    assert outcomes == [decided.json()["outcome"]]
