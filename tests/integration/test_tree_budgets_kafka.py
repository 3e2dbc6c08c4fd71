"""Budgets over a tree on the real broker (issue 33 item 4): a parent whose policy budget is
B tool calls fans out to ten children that each try to spend B, served by the stock admission
and executor processes: the whole tree spends at most B, the later children are refused
before they start (``BudgetExceeded``, journaled at the parent's slot), the parent sees why,
and every chain verifies."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from test_plan_commission import RUNPLANE, Service, admit_through_admission

from runplane.config import Settings
from runplane.core import verify_chain
from runplane.wire import JournalKind, RunStatus
from tests.helpers.harness import chain_of, wait_ended

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

KEY = "tree-budget-1"
B = 10
ROOT = Path(__file__).resolve().parents[2]


def test_ten_children_spend_one_budget_on_the_real_broker(
    settings: Settings, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"agents: {{budget.boss: {{budget: {{tool_calls: {B}}}}}}}\n")
    extra = {
        # The served module lives in tests/: the processes import it (and the library) from
        # this checkout.
        "RUNPLANE_AGENT_MODULES": "tests.helpers.tree_budget_served",
        "PYTHONPATH": os.pathsep.join((str(ROOT / "libs"), str(ROOT))),
        "RUNPLANE_POLICY": str(policy),
    }
    admission = Service(
        settings, [str(RUNPLANE), "serve", "admission"], "admission", tmp_path, extra
    )
    executor = Service(
        settings, [sys.executable, "-m", "services.executor"], "executor", tmp_path, extra
    )
    try:
        parent = admit_through_admission(settings, KEY, "budget.boss", {"want": B})
        snap = wait_ended(settings, parent, what="the parent to complete")
    finally:
        executor.stop()
        admission.stop()

    assert snap.status is RunStatus.COMPLETED, snap.error
    out = json.loads(snap.output_json or "null")
    assert out["results"] == {"c0": {"made": B, "refused": ""}}
    assert sorted(out["failures"]) == [f"c{i}" for i in range(1, 10)]
    for message in out["failures"].values():
        assert message.startswith("BudgetExceeded: agent/budget.worker: nothing left to allot")
    records, results = chain_of(settings, parent)
    assert verify_chain(records, results).ok
    announced = [
        r.attrs
        for r in records
        if r.kind is JournalKind.EFFECT_ANNOUNCED and "child_key" in r.attrs
    ]
    assert json.loads(announced[0]["allotment"]) == {"tool_calls": B}
    refused = [r for r in records if r.attrs.get("gate") == "refused"]
    assert len(refused) == 9 and {r.attrs["reason"] for r in refused} == {"budget"}
    (settled,) = [r for r in records if "child_spent" in r.attrs]
    child = settled.attrs["child_run"]
    assert json.loads(settled.attrs["child_spent"])["tool_calls"] == B
    # The whole tree spent B: the one child's recorded tool calls, and none of the parent's.
    child_records, child_results = chain_of(settings, child)
    assert verify_chain(child_records, child_results).ok
    assert sum(1 for e in child_results.values() if e.family == "tool" and e.ok) == B
    assert json.loads(child_records[0].attrs["delegation"]) == {"allotment": {"tool_calls": B}}
