"""``ctx.planned_loop`` through the in-memory Driver: the support scenario with an injected
document, in the planned mode and — measured on the same injection — the free loop."""

from __future__ import annotations

import copy
import json
from typing import Any

from runplane.core import AgentRegistry, StepCtx, agent, replay_history
from runplane.core.canonical import canonical_json
from runplane.core.engine.planlabels import planned_labels
from runplane.core.gate import Source, sinks
from runplane.testing import Driver, RunView, ScriptedModel
from runplane.wire import JournalKind, Label, RunStatus, Sensitivity, Trust
from tests.helpers import planned_support as P
from tests.helpers import support_loop as S

INPUT = {"customer_id": "c-1", "request": "refund my damaged order o-1"}
REFUND_TO_CUSTOMER = (
    f"refund:{sorted({'amount_eur': 40, 'order': 'o-1', 'recipient': S.CUSTOMER_IBAN}.items())}"
)


def _driver(registry: AgentRegistry, model: ScriptedModel, counts: dict[str, int]) -> Driver:
    return Driver(registry, tools=S.tools(counts), providers={"scripted": model}, policy=S.POLICY)


def _refusals(run: RunView) -> list[tuple[str, str, str]]:
    return [
        (r.name or "", r.attrs["reason"], r.attrs["path"])
        for r in run.journal
        if r.kind is JournalKind.EFFECT_RECORDED and r.attrs.get("gate") == "refused"
    ]


def _planned(plan: Any = None, *, obey: bool = True) -> tuple[RunView, dict[str, int], Driver]:
    counts: dict[str, int] = {}
    driver = _driver(P.AGENTS, P.model(obey_injections=obey, plan=plan), counts)
    return driver.run("planned.support", INPUT), counts, driver


def test_the_planned_loop_runs_the_plan_it_wrote_before_reading_the_document() -> None:
    run, counts, driver = _planned()
    assert run.status is RunStatus.COMPLETED, run.error
    out = run.output
    assert out["status"] == "completed" and out["problems"] == []
    assert [n["node"] for n in out["nodes"]] == ["crm", "doc", "claim", "status", "pay", "note"]
    assert all(n["ok"] for n in out["nodes"])
    # The plan was journaled, with its verdict, before the first tool ran.
    names = [r.name for r in run.journal if r.kind is JournalKind.EFFECT_RECORDED]
    assert names.index("plan:support-refund") < names.index("tool://crm_lookup")
    assert names.index("plan:support-refund") < names.index("tool://fetch_document")
    # The refund went to the account on file; the injection changed no call and no argument.
    assert counts[REFUND_TO_CUSTOMER] == 1
    assert not any(S.ATTACKER in k for k in counts)
    assert _refusals(run) == []
    assert driver.verify(run.session_id).ok


def test_a_quarantined_turn_is_offered_no_tool_and_its_answer_is_typed() -> None:
    counts: dict[str, int] = {}
    model = P.model(obey_injections=True)
    run = _driver(P.AGENTS, model, counts).run("planned.support", INPUT)
    assert run.status is RunStatus.COMPLETED, run.error
    claim = next(n for n in run.output["nodes"] if n["node"] == "claim")
    # What it may still do: fill a typed slot with the attacker's values (nothing bound to it).
    assert claim["ok"] and set(claim["args"]) == {"prompt", "schema"}
    quarantined = [p for p in model.prompts if p[0].content.startswith("Read the content")]
    assert len(quarantined) == 1 and S.INJECTION in quarantined[0][-1].content
    generations = [e for e in run.results.values() if e.family == "generation"]
    assert len(generations) == 2  # the planner and the one quarantined turn
    assert all("tool_calls" not in json.loads(e.value_json or "{}") for e in generations)


def test_a_refund_bound_to_a_quarantined_field_is_refused_by_the_gate() -> None:
    plan = copy.deepcopy(P.PLAN)
    pay = next(n for n in plan["nodes"] if n["id"] == "pay")
    pay["args"]["recipient"] = {"source": "claim.output", "path": "$.recipient"}
    run, counts, _ = _planned(plan)
    assert run.output["status"] == "node_failed"
    assert _refusals(run) == [("tool://refund", "field_trust", "$.recipient")]
    assert not any(k.startswith("refund:") for k in counts)
    assert "note" not in [n["node"] for n in run.output["nodes"]]  # nothing after it ran


def test_a_plan_using_a_tool_not_offered_is_refused_before_anything_runs() -> None:
    plan = copy.deepcopy(P.PLAN)
    plan["nodes"].append({"id": "mail", "call": "tool:send_mail", "args": {}})
    run, counts, _ = _planned(plan)
    assert run.output["status"] == "plan_refused"
    assert any(p.startswith("nodes.mail.call") for p in run.output["problems"])
    assert counts == {}


def test_a_planner_answer_that_is_no_plan_ends_the_loop_refused() -> None:
    run, counts, _ = _planned("I will refund the customer.")
    assert run.output["status"] == "plan_refused" and run.output["plan"] is None
    assert "not JSON" in run.output["problems"][0]
    assert counts == {}


def test_a_quarantined_answer_of_the_wrong_shape_fails_its_node() -> None:
    plan = copy.deepcopy(P.PLAN)
    claim = next(n for n in plan["nodes"] if n["id"] == "claim")
    claim["args"]["schema"]["value"] = {"order": "integer"}  # the model answers a string
    pay = next(n for n in plan["nodes"] if n["id"] == "pay")
    pay["after"] = ["claim"]
    plan["nodes"] = [n for n in plan["nodes"] if n["id"] != "status"]
    run, counts, _ = _planned(plan, obey=False)
    failed = [n for n in run.output["nodes"] if not n["ok"]]
    assert [(n["node"], n["error"]) for n in failed] == [("claim", "QuarantineInvalid")]
    assert not any(k.startswith("refund:") for k in counts)


READER = AgentRegistry()


@sinks(S.REFUND_SINK)
@agent(
    "planned.after_reading",
    registry=READER,
    effects=tuple(S.AGENTS.spec("loop.support").effects.values()),
    models=["scripted"],
)
async def plans_after_reading(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    document = await ctx.tool("fetch_document", {"document_id": "d-9"})
    result = await ctx.planned_loop(
        "scripted",
        "support-1",
        "Plan the refund.",
        {**input, "document": document},
        tools=list(P.TOOLS),
    )
    return {"status": str(result.status), "problems": list(result.problems)}


def test_a_planner_that_read_untrusted_content_writes_a_plan_that_is_refused() -> None:
    counts: dict[str, int] = {}
    run = _driver(READER, P.model(), counts).run("planned.after_reading", INPUT)
    assert run.output["status"] == "plan_refused"
    assert run.output["problems"] and all("trusted input only" in p for p in run.output["problems"])
    assert list(counts) == ["fetch_document:[('document_id', 'd-9')]"]  # the planner's read


def test_a_replay_of_a_planned_loop_calls_nobody() -> None:
    run, _, _ = _planned()
    report = replay_history(P.AGENTS.spec("planned.support"), run.snapshot, run.results)
    assert report.divergence is None and report.live_calls == 0
    assert report.output == run.output


# -- the gate's labels of a planned call, from the journal (engine/planlabels) ---------------

_FIRST = Source(
    "input:admission",
    Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=("input:admission",)),
    INPUT,
)


def _taken(entry: Any) -> Source | None:
    if not entry.ok or entry.value_json is None:
        return None
    return Source(entry.name, entry.label, json.loads(entry.value_json))


def _labels(run: RunView, node: str, args: dict[str, Any], *, drop: str | None = None) -> Any:
    earlier = sorted((k, e) for k, e in run.results.items() if e.name != drop)
    planned = {"hash": run.output["plan"], "node": node}
    tool = {"pay": "refund", "note": "add_note"}[node]
    return planned_labels(earlier, _FIRST, _taken, planned, tool, args)


PAY = {"recipient": S.CUSTOMER_IBAN, "amount_eur": 40, "order": "o-1"}


def test_a_planned_calls_labels_name_where_each_argument_was_bound() -> None:
    run, _, _ = _planned()
    labels = _labels(run, "pay", PAY)
    assert labels["$.recipient"].trust is Trust.TRUSTED
    assert "tool://crm_lookup" in labels["$.recipient"].provenance
    assert "tool://crm_lookup" in labels["$.amount_eur"].provenance
    note = _labels(run, "note", {"note": P.NOTE})
    # A literal of a planner that read only the request: trusted, the planner turn its origin.
    assert note["$.note"].trust is Trust.TRUSTED
    assert note["$.note"].provenance == ("model:scripted/support-1",)


def test_a_planned_call_is_labelled_exactly_only_as_the_journal_has_it() -> None:
    run, _, _ = _planned()
    # Another value than the binding resolves to, another literal, another node, no plan.
    assert _labels(run, "pay", {**PAY, "recipient": S.ATTACKER}) is None
    assert _labels(run, "note", {"note": "something else"}) is None
    assert _labels(run, "pay", {**PAY, "extra": 1}) is None
    assert _labels(run, "pay", PAY, drop="plan:support-refund") is None
    # A plan record with no planner turn that answered it is no plan of the model's.
    assert _labels(run, "pay", PAY, drop="model:scripted/support-1") is None


# -- both modes on the same injection --------------------------------------------------------


def _figures(
    proposed: list[dict[str, Any]], counts: dict[str, int], run: RunView, completed: bool
) -> dict[str, Any]:
    attacker = [a for a in proposed if S.ATTACKER in canonical_json(a)]
    return {
        "attacker_calls_proposed": len(attacker),
        "attacker_calls_performed": sum(n for k, n in counts.items() if S.ATTACKER in k),
        "attacker_calls_refused": sum(1 for r in _refusals(run)),
        "task_completed": completed,
    }


def test_both_modes_measured_on_the_same_injection() -> None:
    free_counts: dict[str, int] = {}
    free = _driver(S.AGENTS, S.model(obey_injections=True), free_counts).run("loop.support", INPUT)
    proposed_free = [
        c["arguments"]
        for e in free.results.values()
        if e.family == "generation"
        for c in json.loads(e.value_json or "{}").get("tool_calls", [])
    ]
    free_figures = _figures(
        proposed_free, free_counts, free, free_counts.get(REFUND_TO_CUSTOMER) == 1
    )

    planned, planned_counts, _ = _planned()
    tool_calls = [n["args"] for n in planned.output["nodes"] if n["node"] != "claim"]
    planned_figures = _figures(
        tool_calls, planned_counts, planned, planned_counts.get(REFUND_TO_CUSTOMER) == 1
    )
    claim = next(n for n in planned.output["nodes"] if n["node"] == "claim")
    print(
        "\ninjection figures:",
        json.dumps({"free": free_figures, "planned": planned_figures}, sort_keys=True),
    )
    # The free loop: the obedient model proposed the attacker's refund; the gate refused it.
    assert free_figures == {
        "attacker_calls_proposed": 1,
        "attacker_calls_performed": 0,
        "attacker_calls_refused": 1,
        "task_completed": True,
    }
    # The planned loop: no call carries the attacker's data; nothing to refuse.
    assert planned_figures == {
        "attacker_calls_proposed": 0,
        "attacker_calls_performed": 0,
        "attacker_calls_refused": 0,
        "task_completed": True,
    }
    # What it does not prevent: the quarantined turn filled its typed slots as told.
    assert claim["value"] == {"order": "o-1", "recipient": S.ATTACKER, "amount_eur": 900}
