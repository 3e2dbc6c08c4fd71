"""``loop.perform_calls``, the door the framework adapters use: one turn's calls performed as
the agent loop performs them — reads together, mutations in position order, an unknown tool
answered and never performed — each an ordinary journaled tool effect that a crash and a
replay perform once."""

from __future__ import annotations

from typing import Any

from runplane.core import AgentRegistry, EffectDecl, Recovery, StepCtx, agent
from runplane.core.loop import perform_calls
from runplane.core.turns import ToolCall
from runplane.testing import Driver
from runplane.wire import RunStatus
from tests.helpers import support_loop as S
from tests.helpers.crashes import crash_once

AGENTS = AgentRegistry()
MUTATING = {"crm_lookup": False, "add_note": True, "refund": True}


@agent(
    "perform.calls",
    registry=AGENTS,
    effects=(
        EffectDecl("crm_lookup", mutating=False, recovery=Recovery.RETRY),
        EffectDecl("add_note", mutating=True, recovery=Recovery.RETRY),
        EffectDecl("refund", mutating=True, recovery=Recovery.RETRY),
    ),
)
async def calls(ctx: StepCtx, input: dict[str, Any]) -> list[list[Any]]:
    proposed = [
        (3, ToolCall("c3", "refund", {"recipient": "r", "amount_eur": 1, "order": "o-1"})),
        (0, ToolCall("c0", "add_note", {"note": "first"})),
        (2, ToolCall("c2", "crm_lookup", {"customer_id": "c-1"})),
        (1, ToolCall("c1", "transfer_all", {})),
    ]
    records = await perform_calls(ctx, 1, proposed, MUTATING)
    return [[r.position, r.call.name, r.ok, r.error_type, r.performed] for r in records]


def _driver(counts: dict[str, int]) -> Driver:
    return Driver(AGENTS, tools=S.tools(counts))


def test_each_call_answered_once_in_position_order_an_unknown_one_never_performed() -> None:
    counts: dict[str, int] = {}
    run = _driver(counts).run("perform.calls", {})
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == [
        [0, "add_note", True, None, True],
        [1, "transfer_all", False, "UnknownTool", False],
        [2, "crm_lookup", True, None, True],
        [3, "refund", True, None, True],
    ]
    assert sorted(counts.values()) == [1, 1, 1] and not any("transfer" in k for k in counts)
    tools = [e.name for e in run.results.values() if e.family == "tool"]
    assert sorted(tools) == ["tool://add_note", "tool://crm_lookup", "tool://refund"]


def test_mutations_go_in_position_order_and_a_crash_between_them_repeats_none() -> None:
    counts: dict[str, int] = {}
    driver = _driver(counts)
    order: list[str] = []

    def before_refund(phase: str, call: Any) -> bool:
        if phase == "before_act" and call.family == "tool":
            order.append(call.target)
        return phase == "before_act" and call.target == "refund"

    driver.crash_hook = crash_once(before_refund)
    run = driver.run("perform.calls", {})
    assert run.status is RunStatus.COMPLETED, run.error
    mutations = [t for t in order if t in ("add_note", "refund")]
    assert mutations[:2] == ["add_note", "refund"]  # position 0 before position 3
    assert all(n == 1 for n in counts.values()), counts
    assert driver.verify(run.session_id).ok
