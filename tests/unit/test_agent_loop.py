"""``ctx.agent_loop`` through the in-memory Driver: a five-turn loop with parallel calls, crashes
at three points of it, an injected instruction refused by exact labels, replay calls nobody."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from runplane.core import Generation, LiveCall, replay_history
from runplane.core.turns import ToolCall
from runplane.testing import Call, Driver, RunView, ScriptedModel
from runplane.wire import JournalKind, RunStatus
from tests.helpers import support_loop as S
from tests.helpers.crashes import crash_once

INPUT = {"customer_id": "c-1", "request": "refund my damaged order o-1"}


def _driver(model: ScriptedModel, counts: dict[str, int] | None = None, **kw: Any) -> Driver:
    return Driver(
        S.AGENTS, tools=S.tools(counts), providers={"scripted": model}, policy=S.POLICY, **kw
    )


def _turns(run: RunView) -> int:
    return sum(1 for e in run.results.values() if e.family == "generation")


def _tool_results(run: RunView) -> int:
    return sum(1 for e in run.results.values() if e.family == "tool")


def test_a_five_turn_loop_with_parallel_calls_completes() -> None:
    model = S.model()
    driver = _driver(model)
    run = driver.run("loop.support", INPUT)
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output["status"] == "answered" and run.output["turns"] == 5
    assert all(ok for _, ok, _ in run.output["calls"])
    assert model.calls == 5 == _turns(run)
    # Two turns fanned their reads out as branches of one ready set (each its own slot).
    joins = [r for r in run.journal if (r.name or "").startswith("fanout:")]
    assert [j.name for j in joins][:2] == ["fanout:t1c0,t1c1", "fanout:t2c0,t2c1"]
    # The model was offered the tools with what their declarations say of them.
    offered = model.prompts[0]
    assert offered[0].content.startswith("You are a support agent")
    assert driver.verify(run.session_id).ok


def test_every_turn_is_sent_the_conversation_rebuilt_from_recorded_values() -> None:
    model = S.model()
    run = _driver(model).run("loop.support", INPUT)
    last = model.prompts[-1]
    answered = [m for m in last if m.role == "tool"]
    proposed = [c for m in last for c in m.tool_calls]
    assert [m.tool_call_id for m in answered] == [c.id for c in proposed]
    crm = next(json.loads(m.content) for m in answered if "account" in m.content)
    assert crm["account"] == S.CUSTOMER_IBAN
    assert run.status is RunStatus.COMPLETED


def _before_turn_3(phase: str, call: LiveCall) -> bool:
    return phase == "before_act" and call.family == "generation" and call.call_seq == 10


def _between_announce_and_result_of_refund(phase: str, call: LiveCall) -> bool:
    return phase == "before_act" and call.target == "refund"


def _mid_fan_out(phase: str, call: LiveCall) -> bool:
    # The second branch of turn 2's reads performed, the wave not yet recorded.
    return phase == "after_act" and call.target == "order_status" and call.call_seq == 8


@pytest.mark.parametrize(
    "where", [_before_turn_3, _between_announce_and_result_of_refund, _mid_fan_out]
)
def test_a_crash_repeats_no_recorded_turn_or_tool_call(
    where: Callable[[str, LiveCall], bool],
) -> None:
    calm = _driver(S.model()).run("loop.support", INPUT)
    model, counts = S.model(), {}
    driver = _driver(model, counts)
    lost = {"performs": 0, "turns": 0}

    def hook(phase: str, call: LiveCall) -> bool:
        crash = once(phase, call)
        if crash:
            session = next(iter(driver.sessions.values()))
            recorded_tools = sum(1 for e in session.results.values() if e.family == "tool")
            recorded_turns = sum(1 for e in session.results.values() if e.family == "generation")
            lost["performs"] = sum(counts.values()) - recorded_tools
            lost["turns"] = model.calls - recorded_turns
        return crash

    once = crash_once(where)
    driver.crash_hook = hook
    run = driver.run("loop.support", INPUT)
    assert driver.crashes == 1
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == calm.output
    assert driver.verify(run.session_id).ok
    # What was recorded before the crash was served, never performed or paid again: the only
    # repeats are the calls whose outcome the crash lost (a wave's unrecorded branches).
    # No turn is paid twice: a turn's recorded outcome is committed before the calls it
    # proposed are performed (``Step.performs_after_commit``), even reads whose announce
    # rides with their outcome — so a crash mid fan-out loses their outcomes, not the turn.
    assert lost["turns"] == 0
    assert model.calls == _turns(run)
    assert sum(counts.values()) == _tool_results(run) + lost["performs"]
    assert (
        counts[
            "refund:"
            + str(sorted({"recipient": S.CUSTOMER_IBAN, "amount_eur": 40, "order": "o-1"}.items()))
        ]
        == 1
    )


def test_an_injected_refund_is_refused_returned_to_the_model_and_the_task_completes() -> None:
    model, counts = S.model(obey_injections=True), {}
    driver = _driver(model, counts)
    run = driver.run("loop.support", INPUT)
    assert run.status is RunStatus.COMPLETED, run.error
    # The obedient model proposed the attacker's refund; the gate refused it (journaled).
    refused = [
        r
        for r in run.journal
        if r.kind is JournalKind.EFFECT_RECORDED and r.attrs.get("gate") == "refused"
    ]
    assert [(r.name, r.attrs["reason"], r.attrs["path"]) for r in refused] == [
        ("tool://refund", "field_trust", "$.recipient")
    ]
    announced = [r.call_seq for r in run.journal if r.kind is JournalKind.EFFECT_ANNOUNCED]
    assert refused[0].call_seq not in announced  # never performed
    assert not any(S.ATTACKER in k for k in counts)
    # The model read the refusal as a tool error, and went on with the real task.
    errors = [m for m in model.prompts[3] if m.role == "tool" and m.is_error]
    assert len(errors) == 1 and errors[0].content.startswith("SinkRefused:")
    assert run.output["status"] == "answered"
    assert ["refund", False, "SinkRefused"] in run.output["calls"]
    assert ["refund", True, None] in run.output["calls"]
    assert driver.verify(run.session_id).ok


def test_a_replay_of_a_recorded_loop_calls_nobody() -> None:
    model = S.model(obey_injections=True)
    run = _driver(model).run("loop.support", INPUT)
    report = replay_history(S.AGENTS.spec("loop.support"), run.snapshot, run.results)
    assert report.divergence is None and report.live_calls == 0
    assert report.output == run.output and report.replayed == len(run.results)


def _one_turn_script(*turns: Any) -> ScriptedModel:
    return ScriptedModel(list(turns))


def test_a_protected_field_is_met_only_by_a_verbatim_copy_of_its_source() -> None:
    # Nothing untrusted is read: the model's composed recipient is trusted, but it is no copy
    # of the CRM's value, so the source rule is not met.
    def respelled(seen: Any) -> list[Call]:
        account = seen.result("crm_lookup")["account"]
        return [Call("refund", {"recipient": account.lower(), "amount_eur": 40, "order": "o-1"})]

    model = _one_turn_script(
        [Call("crm_lookup", {"customer_id": "c-1"})], respelled, S._refund, "done"
    )
    run = _driver(model).run("loop.support", INPUT)
    refused = [r for r in run.journal if r.attrs.get("gate") == "refused"]
    assert [(r.attrs["reason"], r.attrs["path"]) for r in refused] == [
        ("field_source", "$.recipient")
    ]
    assert run.output["calls"][1:] == [["refund", False, "SinkRefused"], ["refund", True, None]]


def test_a_mutating_sink_without_protected_fields_refuses_a_call_an_untrusted_turn_chose() -> None:
    model = _one_turn_script(
        [Call("add_note", {"note": "before reading"})],
        [Call("fetch_document", {"document_id": "d-9"})],
        [Call("add_note", {"note": "before reading"})],  # the same bytes, now chosen untrusted
        "done",
    )
    run = _driver(model).run("loop.support", INPUT)
    assert run.output["calls"] == [
        ["add_note", True, None],
        ["fetch_document", True, None],
        ["add_note", False, "SinkRefused"],
    ]


def test_budgets_end_the_loop_with_a_typed_outcome() -> None:
    model = ScriptedModel([[Call("order_status", {"order": f"o-{i}"})] for i in range(20)])
    run = _driver(model).run("loop.support", {**INPUT, "turns": 3})
    assert run.status is RunStatus.COMPLETED
    assert (run.output["status"], run.output["exhausted"], run.output["turns"]) == (
        "budget_exhausted",
        "turns",
        3,
    )
    assert model.calls == 3


def test_a_model_function_drives_the_loop_like_a_script() -> None:
    # ``model=``: a turn's logic by hand, the fakes' model function (Pydantic AI's FunctionModel).
    def looks_up_then_answers(messages: Any, tools: Any) -> Generation:
        if not any(m.role == "tool" for m in messages):
            lookup = ToolCall("look-1", "crm_lookup", {"customer_id": "c-1"})
            return Generation("", tool_calls=(lookup,), stop_reason="tool_calls")
        return Generation(f"{len(tools)} tools offered, record read", stop_reason="end")

    model = ScriptedModel(model=looks_up_then_answers)
    run = _driver(model).run("loop.support", INPUT)
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output["text"] == "5 tools offered, record read"
    assert run.output["calls"] == [["crm_lookup", True, None]] and model.calls == 2
    assert run.output["tokens"] > 0  # usage is counted by the provider, not the function
