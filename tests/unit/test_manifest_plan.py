"""Declarative agents of kind ``plan``: the manifest's sources become the plan IR, with fan-out."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

import examples.plan_triage
from runplane.core import REGISTRY, AgentRegistry
from runplane.core.manifest import ManifestError, compile_manifest, validate_manifest
from runplane.providers import TOOLS
from runplane.testing import Driver
from runplane.wire import JournalKind, RunStatus

DOC = yaml.safe_load((Path(__file__).parents[2] / "examples" / "plans" / "triage.yaml").read_text())


def _driver() -> Driver:
    reg = AgentRegistry([REGISTRY.spec(n) for n in ("risk.score", "fraud.check", "decide")])
    reg.register(compile_manifest(DOC))
    tools = {
        n: (lambda t: lambda a, k: t.fn(**a))(TOOLS[n]) for n in examples.plan_triage.TOOL_NAMES
    }
    return Driver(reg, tools=tools)


def test_a_plan_manifest_fans_out_and_maps_its_output() -> None:
    d = _driver()
    view = d.run("plan.triage-declared", {"amount": 120, "account": "a-1"})
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == {"decision": {"approve": True, "fraud": False, "score": 12}, "score": 12}
    # The manifest first, then the plan, then both branches announced before either result.
    names = [r.name for r in view.journal if r.kind is not JournalKind.RUN_ADMITTED]
    assert names[:2] == ["manifest:plan.triage-declared", "plan:plan.triage-declared"]
    kinds = [(r.kind, r.name) for r in view.journal if r.family == "commission"][:2]
    assert all(k is JournalKind.EFFECT_ANNOUNCED for k, _ in kinds)
    assert len(d.children) == 3 and d.verify(view.session_id).ok


def _with(path: list[Any], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


NODES = ["spec", "execution", "nodes"]


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        ([*NODES, 0, "args", "amount"], {"from": "decide"}, "spec.execution.nodes"),
        (
            [*NODES, 1, "args", "account"],
            {"from": "ghost"},
            "spec.execution.nodes[1].args.account.from",
        ),
        ([*NODES, 2, "tool"], "undeclared", "spec.execution.nodes[2]"),
        (
            [*NODES, 0, "args", "amount"],
            {"from": "input", "path": "amount"},
            "spec.execution.nodes[0].args.amount.path",
        ),
        ([*NODES, 0, "after"], ["risk_score"], "spec.execution.nodes.risk_score.after"),
    ],
)
def test_a_bad_plan_manifest_is_refused_at_its_position(
    path: list[Any], value: Any, where: str
) -> None:
    doc = _with(path, value)
    problems = validate_manifest(doc)
    assert any(p.path == where for p in problems), [str(p) for p in problems]
    with pytest.raises(ManifestError):
        compile_manifest(doc)


def test_a_checkpointed_plan_manifest_commissions_each_node_once() -> None:
    doc = _with(["spec", "durability"], "checkpointed")
    assert validate_manifest(doc) == []
    reg = AgentRegistry([REGISTRY.spec(n) for n in ("risk.score", "fraud.check", "decide")])
    reg.register(compile_manifest(doc))
    tools = {
        n: (lambda t: lambda a, k: t.fn(**a))(TOOLS[n]) for n in examples.plan_triage.TOOL_NAMES
    }
    d = Driver(reg, tools=tools)
    view = d.run("plan.triage-declared", {"amount": 120, "account": "a-1"})
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output["score"] == 12 and len(d.children) == 3
    assert all("/w" in key for key in d.children)  # keys that survive a restore
