"""A long loop ends its history through continue-as-new (issue 27 item 2): the successor goes
on from a checkpoint with what the loop needs, budgets count across the generations, no
recorded call is made again, and the successor's input carries the label of everything its
predecessor read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runplane.core import AgentRegistry, EffectDecl, Generation, Recovery
from runplane.core.ctx import StepCtx
from runplane.core.loop import LoopBudget, LoopResult, LoopState, LoopStatus
from runplane.core.policy import Policy
from runplane.core.turns import Message, Role, ToolCall, ToolSpec
from runplane.testing import Driver, ScriptedModel
from runplane.wire import Label, RunStatus, Sensitivity, Trust

STEPS = 5  # the model counts to five, one tool call a turn, then answers


def counting(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> Generation:
    """A model that reads the last ``step`` result and asks for the next: it needs the last
    turn verbatim, and nothing older — what a checkpoint keeps."""
    last = next((m for m in reversed(messages) if m.role is Role.TOOL), None)
    n = 0 if last is None else json.loads(last.content)["n"]
    if n >= STEPS:
        return Generation(f"counted to {n}", stop_reason="end")
    call = ToolCall(f"c{n + 1}", "step", {"n": n + 1})
    return Generation("", tool_calls=(call,), stop_reason="tool_use")


def _registry(*, turns: int | None = None, read_untrusted: bool = False) -> AgentRegistry:
    reg = AgentRegistry()

    @reg.agent(
        "loop.long",
        models=["scripted"],
        effects=(
            EffectDecl("step", mutating=False, recovery=Recovery.RETRY),
            EffectDecl("fetch_document", mutating=False, recovery=Recovery.RETRY),
        ),
    )
    async def long(ctx: StepCtx, input: dict[str, Any]) -> Any:
        if read_untrusted and "loop" not in input:
            await ctx.tool("fetch_document", {"id": "d-1"})
        result: LoopResult = await ctx.agent_loop(
            "scripted",
            "m",
            "Count to five with the step tool.",
            input["request"],
            tools=["step"],
            budget=LoopBudget(turns=turns),
            resume=input.get("loop"),
            history_turns=2,
        )
        if result.status is LoopStatus.CONTINUE:
            return await ctx.continue_as_new({**input, "loop": result.checkpoint(keep_turns=1)})
        return {
            "status": str(result.status),
            "text": result.text,
            "turns": result.turns,
            "request_label": str(ctx.label_of(input["request"]).trust),
        }

    return reg


POLICY = Policy(
    sources={
        "tool://fetch_document": Label(
            trust=Trust.UNTRUSTED,
            sensitivity=Sensitivity.INTERNAL,
            provenance=("tool://fetch_document",),
        )
    }
)


def _driver(reg: AgentRegistry, model: ScriptedModel) -> Driver:
    return Driver(
        reg,
        providers={"scripted": model},
        tools={"step": lambda a, k: {"n": a["n"]}, "fetch_document": lambda a, k: {"t": "x"}},
        policy=POLICY,
    )


def _generations(d: Driver) -> list[str]:
    return sorted(d.sessions)


def test_a_long_loop_continues_as_new_and_finishes_in_a_successor() -> None:
    model = ScriptedModel(model=counting)
    d = _driver(_registry(), model)
    d.run("loop.long", {"request": "count"})
    runs = _generations(d)
    assert runs == ["run-1", "run-1.n1", "run-1.n2"]  # 2 + 2 + 2 turns (the last answers)
    last = d.view(runs[-1])
    assert last.status is RunStatus.COMPLETED, last.error
    assert last.output["text"] == f"counted to {STEPS}"
    assert last.output["turns"] == STEPS + 1  # counted across the generations
    assert d.tool_calls["step"] == STEPS  # no recorded call made again
    assert model.calls == STEPS + 1  # no recorded turn paid again
    # The successor's prompt was cut: the opening and the last turn, not the whole history.
    resumed = model.prompts[-1]
    assert [m.role for m in resumed[:2]] == [Role.SYSTEM, Role.USER]
    assert sum(1 for m in resumed if m.role is Role.ASSISTANT) == 2  # kept one + the new one
    for sid in runs:
        assert d.verify(sid).ok
    # Nothing untrusted was read: the successors' inputs are admission inputs like any other.
    assert all("input_label" not in d.view(sid).journal[0].attrs for sid in runs)
    assert last.output["request_label"] == "TRUSTED"


def test_budgets_count_across_the_generations() -> None:
    d = _driver(_registry(turns=3), ScriptedModel(model=counting))
    d.run("loop.long", {"request": "count"})
    last = d.view(_generations(d)[-1])
    assert last.output["status"] == "budget_exhausted"
    assert last.output["turns"] == 3
    assert d.tool_calls["step"] == 3


def test_a_successor_of_a_run_that_read_untrusted_data_does_not_start_trusted() -> None:
    d = _driver(_registry(read_untrusted=True), ScriptedModel(model=counting))
    d.run("loop.long", {"request": "count"})
    runs = _generations(d)
    first_successor = d.view(runs[1]).journal[0]
    carried = json.loads(first_successor.attrs["input_label"])
    assert carried["trust"] == "UNTRUSTED"
    assert (
        carried["provenance"] == []
    )  # trust travels; an origin a source rule could match does not
    # ...and on down the chain: a successor's successor keeps it.
    assert json.loads(d.view(runs[2]).journal[0].attrs["input_label"])["trust"] == "UNTRUSTED"
    assert d.view(runs[-1]).output["request_label"] == "UNTRUSTED"
    # The snapshot keeps it too (its part), so a restored successor labels alike.
    snap = d.sessions[runs[-1]].snapshot
    assert snap is not None and "input_label" in snap.parts


def test_a_checkpoint_reads_back_and_refuses_what_is_not_one() -> None:
    state = LoopState(
        (Message(Role.SYSTEM, "s"), Message(Role.USER, "u")), turns=3, earlier_calls=2
    )
    assert LoopState.from_json(state.to_json()) == state
    for bad in ({}, {"messages": [], "turns": 0, "usage": {}}, {"messages": "x", "turns": -1}):
        with pytest.raises(ValueError):
            LoopState.from_json(bad)
