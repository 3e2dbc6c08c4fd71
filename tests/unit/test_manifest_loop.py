"""Kind ``agent-loop``: a declarative agent whose model chooses among its declared tools —
validated with positions like every manifest, compiled to ``ctx.agent_loop``, run through the
Driver with a scripted tool-calling model, replayed with zero live calls."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runplane.core import replay_history
from runplane.core.manifest import compile_manifest, validate_manifest
from runplane.testing import Call, Driver, ScriptedModel
from runplane.wire import RunStatus

DOC: dict[str, Any] = {
    "apiVersion": "runplane/v1",
    "kind": "Agent",
    "metadata": {"name": "lookup-loop"},
    "spec": {
        "durability": "replayable",
        "input": {
            "schema": {
                "type": "object",
                "properties": {"customer": {"type": "string"}},
                "required": ["customer"],
            }
        },
        "model": {"provider": "scripted", "name": "m"},
        "tools": [{"name": "crm_lookup", "mutating": False}, {"name": "unused", "mutating": False}],
        "execution": {
            "kind": "agent-loop",
            "instructions": "Find the customer {{ input.customer }} and say their tier.",
            "tools": ["crm_lookup"],
            "budget": {"turns": 4, "tool_calls": 3},
        },
    },
}


def _crm(args: dict[str, Any], key: str | None) -> dict[str, str]:
    return {"customer": args["customer"], "tier": "gold"}


def _run(model: ScriptedModel) -> tuple[Driver, Any]:
    driver = Driver(
        compile_manifest(DOC), tools={"crm_lookup": _crm}, providers={"scripted": model}
    )
    return driver, driver.run("lookup-loop", {"customer": "c-7"})


def test_the_loop_kind_runs_the_model_over_its_declared_tools_and_replays() -> None:
    model = ScriptedModel([[Call("crm_lookup", {"customer": "c-7"})], "c-7 is gold."])
    driver, run = _run(model)
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {
        "status": "answered",
        "text": "c-7 is gold.",
        "turns": 2,
        "calls": ["crm_lookup"],
        "refused": [],
    }
    first = model.prompts[0]
    assert first[0].content == "Find the customer c-7 and say their tier."
    assert driver.verify(run.session_id).ok
    report = replay_history(compile_manifest(DOC), run.snapshot, dict(run.results))
    assert report.live_calls == 0 and report.output == run.output


def test_the_turn_budget_ends_the_loop_with_a_typed_outcome() -> None:
    model = ScriptedModel([[Call("crm_lookup", {"customer": "c-7"})]] * 6)
    _, run = _run(model)
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output["status"] == "budget_exhausted"
    assert run.output["exhausted"] in ("turns", "tool_calls")


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        (lambda e: e.__setitem__("tools", ["nope"]), "spec.execution.tools[0]", "not declared"),
        (
            lambda e: e.__setitem__("tools", ["crm_lookup", "crm_lookup"]),
            "spec.execution.tools[1]",
            "offered twice",
        ),
        (lambda e: e.__setitem__("budget", {"tool_calls": 3}), "spec.execution.budget", "turns"),
        (lambda e: e["budget"].__setitem__("turns", 0), "spec.execution.budget.turns", ">= 1"),
        (lambda e: e.__setitem__("prompt", "x"), "spec.execution.prompt", "not a field"),
        (
            lambda e: e.__setitem__("instructions", "{{ secret }}"),
            "spec.execution.instructions",
            "only {{ input }}",
        ),
    ],
)
def test_a_broken_loop_manifest_is_refused_where_it_broke(
    change: Any, path: str, message: str
) -> None:
    doc = copy.deepcopy(DOC)
    change(doc["spec"]["execution"])
    problems = validate_manifest(doc)
    assert any(p.path == path and message in p.message for p in problems), problems


def test_the_loop_kind_takes_no_approval_of_its_answer() -> None:
    doc = copy.deepcopy(DOC)
    doc["spec"]["oversight"] = {"approval": {"required": True, "role": "editor"}}
    assert any("mark the tools that need one" in p.message for p in validate_manifest(doc))
