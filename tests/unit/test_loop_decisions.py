"""The agent loop's decisions (``runplane.core.loop``), pure: case by case and by property."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runplane.core.agents import Generation
from runplane.core.loop import (
    Act,
    CallRecord,
    Exhausted,
    LoopBudget,
    LoopStatus,
    Stop,
    answer,
    begin,
    decide,
    exhausted,
)
from runplane.core.turns import Role, ToolCall

TOOLS = {"read_a": False, "read_b": False, "pay": True, "note": True}


def _gen(*calls: ToolCall, text: str = "", tokens: int = 1) -> Generation:
    return Generation(text, tokens, tokens, cost_units=0.5, tool_calls=calls)


def _answer_all(act: Act) -> list[CallRecord]:
    out = [CallRecord(act.state.turns, at, c, True, {"n": at}) for at, c in act.parallel]
    out += [CallRecord(act.state.turns, at, c, True, {"n": at}) for at, c in act.serial]
    out += [
        CallRecord(act.state.turns, at, c, False, None, t, m, False)
        for (at, c), t, m in act.unanswerable
    ]
    return out


def test_an_answer_without_calls_stops_answered() -> None:
    step = decide(begin("be brief", {"q": 1}), _gen(text="done"), LoopBudget(), TOOLS)
    assert isinstance(step, Stop) and step.status is LoopStatus.ANSWERED and step.text == "done"
    assert [m.role for m in step.state.messages] == [Role.SYSTEM, Role.USER, Role.ASSISTANT]


def test_reads_go_together_and_mutations_follow_in_the_models_order() -> None:
    calls = (
        ToolCall("1", "pay", {"x": 1}),
        ToolCall("2", "read_a"),
        ToolCall("3", "note"),
        ToolCall("4", "read_b"),
    )
    step = decide(begin("", "hi"), _gen(*calls), LoopBudget(), TOOLS)
    assert isinstance(step, Act)
    assert [c.id for _, c in step.parallel] == ["2", "4"]
    assert [c.id for _, c in step.serial] == ["1", "3"]


def test_an_unknown_tool_and_a_repeated_id_are_answered_with_errors_never_performed() -> None:
    calls = (ToolCall("1", "read_a"), ToolCall("1", "read_b"), ToolCall("2", "rm_rf"))
    step = decide(begin("", "hi"), _gen(*calls), LoopBudget(), TOOLS)
    assert isinstance(step, Act)
    assert [t for _, t, _ in step.unanswerable] == ["DuplicateCallId", "UnknownTool"]
    state = answer(step.state, step, _answer_all(step))
    tool_messages = [m for m in state.messages if m.role is Role.TOOL]
    assert [m.is_error for m in tool_messages] == [False, True, True]


def test_the_tool_call_budget_performs_the_first_calls_then_ends_the_loop() -> None:
    budget = LoopBudget(tool_calls=2)
    calls = tuple(ToolCall(str(i), "read_a", {"i": i}) for i in range(3))
    step = decide(begin("", "hi"), _gen(*calls), budget, TOOLS)
    assert isinstance(step, Act) and len(step.parallel) == 2
    assert [t for _, t, _ in step.unanswerable] == ["LoopBudgetExceeded"]
    state = answer(step.state, step, _answer_all(step))
    again = decide(state, _gen(ToolCall("9", "read_a")), budget, TOOLS)
    assert isinstance(again, Stop) and again.exhausted is Exhausted.TOOL_CALLS


def test_turn_token_and_cost_budgets_stop_before_the_next_turn() -> None:
    state = decide(begin("", "hi"), _gen(ToolCall("1", "read_a"), tokens=50), LoopBudget(), TOOLS)
    assert isinstance(state, Act)
    s = state.state
    assert exhausted(s, LoopBudget(turns=1)) is Exhausted.TURNS
    assert exhausted(s, LoopBudget(tokens=100)) is Exhausted.TOKENS
    assert exhausted(s, LoopBudget(cost_units=0.5)) is Exhausted.COST_UNITS
    assert exhausted(s, LoopBudget(turns=2, tokens=101, cost_units=1)) is None


def test_a_negative_budget_is_a_named_error() -> None:
    try:
        LoopBudget(turns=-1)
    except ValueError as exc:
        assert "turns" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("a negative budget was accepted")


_names = st.sampled_from([*sorted(TOOLS), "unknown"])
_calls = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d", "e"]), _names, st.integers(0, 3)),
    max_size=8,
)


@given(turns=st.lists(_calls, min_size=1, max_size=5), limit=st.none() | st.integers(0, 10))
def test_properties_of_any_conversation(
    turns: list[list[tuple[str, str, int]]], limit: int | None
) -> None:
    budget = LoopBudget(tool_calls=limit)
    state = begin("sys", {"q": 1})
    performed = 0
    for proposed in turns:
        calls = tuple(ToolCall(i, n, {"v": v}) for i, n, v in proposed)
        step = decide(state, _gen(*calls), budget, TOOLS)
        if isinstance(step, Stop):
            assert not calls or (limit is not None and len(state.calls) >= limit)
            break
        # Mutating calls in the model's order; every call in exactly one of the three lists.
        assert [at for at, _ in step.serial] == sorted(at for at, _ in step.serial)
        assert all(TOOLS[c.name] for _, c in step.serial)
        assert not any(TOOLS.get(c.name, True) for _, c in step.parallel)
        positions = (
            [at for at, _ in step.parallel]
            + [at for at, _ in step.serial]
            + [at for (at, _), _, _ in step.unanswerable]
        )
        assert sorted(positions) == list(range(len(calls)))
        performed += len(step.parallel) + len(step.serial)
        before = len(step.state.messages)
        state = answer(step.state, step, _answer_all(step))
        # Every proposed call is answered by exactly one tool message, in the model's order.
        replies = state.messages[before:]
        assert [m.tool_call_id for m in replies] == [c.id for c in calls]
        assert all(m.role is Role.TOOL for m in replies)
    # Never more calls performed than the budget allows.
    assert limit is None or performed <= limit
