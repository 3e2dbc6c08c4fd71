"""Kind ``agent-loop`` with ``mode: planned``: a declarative agent whose model writes the plan
over its declared tools first (``ctx.planned_loop``) — validated with positions, run through
the Driver with a scripted planner, replayed with zero live calls."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runplane.core import Generation, replay_history
from runplane.core.canonical import canonical_json
from runplane.core.manifest import compile_manifest, validate_manifest
from runplane.testing import Driver, ScriptedModel
from runplane.wire import RunStatus

DOC: dict[str, Any] = {
    "apiVersion": "runplane/v1",
    "kind": "Agent",
    "metadata": {"name": "lookup-planned"},
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
            "mode": "planned",
            "instructions": "Find the customer {{ input.customer }} and say their tier.",
            "tools": ["crm_lookup"],
        },
    },
}

PLAN = {
    "name": "lookup",
    "output": "crm",
    "nodes": [
        {
            "id": "crm",
            "call": "tool:crm_lookup",
            "args": {"customer": {"source": "input", "path": "$.customer"}},
        }
    ],
}


def _crm(args: dict[str, Any], key: str | None) -> dict[str, str]:
    return {"customer": args["customer"], "tier": "gold"}


def test_the_planned_mode_runs_the_plan_the_model_wrote_first_and_replays() -> None:
    model = ScriptedModel(model=lambda messages, tools: Generation(canonical_json(PLAN)))
    driver = Driver(
        compile_manifest(DOC), tools={"crm_lookup": _crm}, providers={"scripted": model}
    )
    run = driver.run("lookup-planned", {"customer": "c-7"})
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output["status"] == "completed"
    assert run.output["nodes"] == ["crm"] and run.output["refused"] == []
    assert run.output["output"] == {"customer": "c-7", "tier": "gold"}
    first = model.prompts[0]
    assert first[0].content.startswith("Find the customer c-7 and say their tier.")
    assert len(model.prompts) == 1  # the planner alone: no quarantined node in this plan
    report = replay_history(compile_manifest(DOC), run.snapshot, dict(run.results))
    assert report.live_calls == 0 and report.output == run.output


def test_a_plan_over_a_tool_the_manifest_does_not_offer_is_refused() -> None:
    wrong = copy.deepcopy(PLAN)
    wrong["nodes"][0]["call"] = "tool:unused"
    model = ScriptedModel(model=lambda messages, tools: Generation(canonical_json(wrong)))
    run = Driver(
        compile_manifest(DOC),
        tools={"crm_lookup": _crm, "unused": _crm},
        providers={"scripted": model},
    ).run("lookup-planned", {"customer": "c-7"})
    assert run.output["status"] == "plan_refused"
    assert any(p.startswith("nodes.crm.call") for p in run.output["problems"])


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda e: e.__setitem__("mode", "clever"), "spec.execution.mode"),
        (lambda e: e.__setitem__("budget", {"turns": 3}), "spec.execution.budget"),
    ],
)
def test_a_broken_planned_manifest_is_refused_where_it_broke(edit: Any, path: str) -> None:
    doc = copy.deepcopy(DOC)
    edit(doc["spec"]["execution"])
    problems = validate_manifest(doc)
    assert path in [p.path for p in problems], problems
