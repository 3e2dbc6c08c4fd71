"""Memory after approval (issue 27 item 6): what a loop means to keep for later runs is held
until a person approves the answer, kept on the case then, dropped on a rejection — and the
next run of the case reads it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.core import AgentRegistry
from runplane.core.ctx import StepCtx
from runplane.core.loop import LoopBudget
from runplane.core.memory import HELD, MAX_NOTE, REMEMBER, Note, note_of, notes
from runplane.core.turns import ToolCall
from runplane.testing import Call, Driver, ScriptedModel, Seen
from runplane.wire import RunStatus

CASE = "case-7"


def _registry() -> AgentRegistry:
    reg = AgentRegistry()

    @reg.agent("loop.notes", models=["scripted"])
    async def remembering(ctx: StepCtx, input: Any) -> Any:
        before = notes((await ctx.case_state()).state)
        result = await ctx.agent_loop(
            "scripted",
            "m-1",
            "Answer; remember what later runs should know.",
            input,
            tools=[],
            remember=True,
            budget=LoopBudget(turns=4),
        )
        decision = await ctx.approve_answer(result, "Send this answer?", role="support")
        return {
            "approved": decision.approved,
            "text": result.text,
            "held": [n.text for n in result.notes],
            "read_before": [n["text"] for n in before],
        }

    return reg


def _said_notes(seen: Seen) -> str:
    # The loop answered each ``remember`` itself: held, not an error.
    assert not seen.errors
    return "Done."


SCRIPT: list[Any] = [
    [
        Call(REMEMBER, {"note": "prefers e-mail over phone"}),
        Call(REMEMBER, {"note": "order o-1 arrived damaged"}),
    ],
    _said_notes,
]


def _driver(model: ScriptedModel) -> Driver:
    return Driver(_registry(), providers={"scripted": model}, cases={CASE: {"opened": True}})


def test_approved_notes_are_kept_on_the_case_and_read_by_the_next_run() -> None:
    d = _driver(ScriptedModel(SCRIPT))
    first = d.run("loop.notes", {"q": "hi"}, case_id=CASE)
    # Parked on the person: nothing is on the case yet.
    assert first.status is RunStatus.AWAITING_HUMAN
    assert "notes" not in d.cases[CASE][0]
    task = first.open_tasks[0]
    assert json.loads(task.answer_json)["notes"] == [
        "prefers e-mail over phone",
        "order o-1 arrived damaged",
    ]
    first = d.decide(first.session_id, "APPROVED")
    assert first.status is RunStatus.COMPLETED, first.error
    assert first.output["approved"] is True
    kept = d.cases[CASE][0]["notes"]
    assert [(n["text"], n["run"], n["turn"]) for n in kept] == [
        ("prefers e-mail over phone", first.session_id, 1),
        ("order o-1 arrived damaged", first.session_id, 1),
    ]
    assert d.cases[CASE][0]["opened"] is True  # the rest of the case state is kept
    # The next run of the case reads them as the case's memory.
    second = d.run("loop.notes", {"q": "again"}, case_id=CASE)
    second = d.decide(second.session_id, "APPROVED")
    assert second.output["read_before"] == [
        "prefers e-mail over phone",
        "order o-1 arrived damaged",
    ]
    assert len(d.cases[CASE][0]["notes"]) == 4
    assert d.verify(first.session_id).ok and d.verify(second.session_id).ok


def test_rejected_notes_are_dropped() -> None:
    d = _driver(ScriptedModel(SCRIPT))
    run = d.run("loop.notes", {"q": "hi"}, case_id=CASE)
    run = d.decide(run.session_id, "REJECTED", comment="wrong customer")
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output["approved"] is False
    assert run.output["held"] == ["prefers e-mail over phone", "order o-1 arrived damaged"]
    assert d.cases[CASE][0] == {"opened": True}  # nothing was written


def test_a_run_that_fails_before_approval_keeps_nothing() -> None:
    bad = [[Call(REMEMBER, {"note": "x"})], "Done."]
    reg = AgentRegistry()

    @reg.agent("loop.crashing", models=["scripted"])
    async def crashing(ctx: StepCtx, input: Any) -> Any:
        await ctx.agent_loop(
            "scripted", "m", "", input, tools=[], remember=True, budget=LoopBudget(turns=3)
        )
        raise RuntimeError("the agent fails after its loop")

    d = Driver(reg, providers={"scripted": ScriptedModel(bad)}, cases={CASE: {}})
    run = d.run("loop.crashing", {}, case_id=CASE)
    assert run.status is RunStatus.FAILED
    assert d.cases[CASE][0] == {}


def test_an_invalid_note_is_a_tool_error_the_model_reads() -> None:
    errors: list[str] = []

    def after(seen: Seen) -> str:
        errors.extend(seen.errors)
        return "ok"

    model = ScriptedModel([[Call(REMEMBER, {"note": ""}), Call(REMEMBER, {"text": "y"})], after])
    d = _driver(model)
    run = d.decide(d.run("loop.notes", {}, case_id=CASE).session_id, "APPROVED")
    assert run.output["held"] == []
    assert len(errors) == 2 and all(e.startswith("InvalidNote") for e in errors)
    assert "notes" not in d.cases[CASE][0]


def test_remember_is_not_offered_unless_asked_and_not_twice() -> None:
    reg = AgentRegistry()

    @reg.agent("loop.plain", models=["scripted"])
    async def plain(ctx: StepCtx, input: Any) -> Any:
        result = await ctx.agent_loop("scripted", "m", "", input, tools=[], max_turns=2)
        return [c.error_type for c in result.calls]

    @reg.agent("loop.twice", models=["scripted"])
    async def twice(ctx: StepCtx, input: Any) -> Any:
        await ctx.agent_loop("scripted", "m", "", input, tools=[REMEMBER], remember=True)

    model = ScriptedModel([[Call(REMEMBER, {"note": "sneaky"})], "ok"])
    d = Driver(reg, providers={"scripted": model}, tools={REMEMBER: lambda a, k: "written"})
    assert d.run("loop.plain", {}).output == ["UnknownTool"]
    failed = d.run("loop.twice", {})
    assert failed.status is RunStatus.FAILED and "offered once" in (failed.error or "")


@given(st.text(max_size=MAX_NOTE + 50), st.integers(min_value=1, max_value=50))
def test_a_note_is_a_non_empty_bounded_string(text: str, turn: int) -> None:
    got = note_of(ToolCall("c1", REMEMBER, {"note": text}), turn)
    if text.strip() and len(text) <= MAX_NOTE:
        assert got == Note(text, turn)
    else:
        assert isinstance(got, str)


def test_held_is_what_the_model_is_told() -> None:
    assert "approved" in HELD["held"]
    with pytest.raises(ValueError):
        Note("   ", 1)


def _manifest(**execution: Any) -> dict[str, Any]:
    return {
        "apiVersion": "runplane/v1",
        "kind": "Agent",
        "metadata": {"name": "noting-loop"},
        "spec": {
            "durability": "replayable",
            "model": {"provider": "scripted", "name": "m"},
            "tools": [],
            "oversight": {"approval": {"required": True, "role": "support"}},
            "execution": {
                "kind": "agent-loop",
                "instructions": "Answer.",
                "tools": [],
                "budget": {"turns": 3},
                **execution,
            },
        },
    }


@pytest.mark.parametrize(("outcome", "kept"), [("APPROVED", 2), ("REJECTED", 0)])
def test_a_declarative_loop_with_memory_keeps_its_notes_only_on_approval(
    outcome: str, kept: int
) -> None:
    from runplane.core.manifest import compile_manifest

    d = Driver(
        compile_manifest(_manifest(memory="case")),
        providers={"scripted": ScriptedModel(SCRIPT)},
        cases={CASE: {}},
    )
    run = d.run("noting-loop", {}, case_id=CASE)
    assert run.status is RunStatus.AWAITING_HUMAN
    run = d.decide(run.session_id, outcome)
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output["notes_kept"] == kept
    assert len(d.cases[CASE][0].get("notes", [])) == kept


def test_memory_needs_an_approval_and_names_one_kind() -> None:
    from runplane.core.manifest import validate_manifest

    no_approval = _manifest(memory="case")
    del no_approval["spec"]["oversight"]
    assert any(
        "memory is formed after approval" in p.message for p in validate_manifest(no_approval)
    )
    wrong = validate_manifest(_manifest(memory="global"))
    assert any(p.path == "spec.execution.memory" for p in wrong)
    # Without memory, the loop kind still takes no approval of its answer.
    assert any("mark the tools that need one" in p.message for p in validate_manifest(_manifest()))
