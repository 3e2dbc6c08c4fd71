"""People in the agent loop, through the in-memory Driver: a call that needs approval (by the
deployment policy or by its declaration) parks the run on a task showing the proposed call;
approved, it is made as proposed; rejected, the model reads the reason and answers; edited,
it is made with the edited arguments, released by that person (four-eyes: never the run's
initiator); a replay under a changed policy asks whom the recorded run asked."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from runplane.core import AgentRegistry, EffectDecl, Recovery, StepCtx, agent, replay_history
from runplane.core.gate import FieldRule, SinkDecl
from runplane.core.policy import DEFAULT_APPROVAL_ROLE, ApprovalRule, Policy
from runplane.testing import Call, Driver, RunView, ScriptedModel, Seen
from runplane.wire import RunStatus, Trust
from tests.helpers import support_loop as S

INPUT = {"customer_id": "c-1", "request": "refund my damaged order o-1"}
OURS = "NL02RABO0123456789"
REFUND = "refund:" + str(
    sorted({"recipient": S.CUSTOMER_IBAN, "amount_eur": 40, "order": "o-1"}.items())
)
# A person's release is a source the recipient may come from, besides the CRM's record.
EDITABLE = SinkDecl(
    "tool://refund",
    protected=(
        FieldRule("$.recipient", sources=("tool://crm_lookup", "human:*")),
        FieldRule("$.amount_eur", sources=("tool://crm_lookup", "input:admission")),
    ),
)
POLICY = replace(
    S.POLICY,
    approvals={"tool://refund": ApprovalRule(role="finance")},
    sinks={"tool://refund": EDITABLE},
)


def _answers_what_it_read(seen: Seen) -> str:
    return "Not refunded: " + (seen.errors[-1] if seen.errors else "nothing refused")


def _script(last: Any = "Refunded 40 EUR for order o-1.") -> ScriptedModel:
    return ScriptedModel(
        [
            [Call("crm_lookup", {"customer_id": "c-1"})],
            S._refund,
            last,
        ]
    )


def _parked(
    model: ScriptedModel, counts: dict[str, int], policy: Policy = POLICY
) -> tuple[Driver, RunView]:
    driver = Driver(S.AGENTS, tools=S.tools(counts), providers={"scripted": model}, policy=policy)
    run = driver.run("loop.support", INPUT)
    assert run.status is RunStatus.AWAITING_HUMAN, run.error
    assert not any(k.startswith("refund:") for k in counts)  # asked first, not performed
    return driver, run


def _replays(driver: Driver, run: RunView) -> None:
    assert driver.verify(run.session_id).ok
    opened = len(driver.tasks_opened)
    # No policy at all now: the need for approval is the journaled one, so the same slots.
    report = replay_history(S.AGENTS.spec("loop.support"), run.snapshot, dict(run.results))
    assert (report.divergence, report.live_calls, report.output) == (None, 0, run.output)
    assert len(driver.tasks_opened) == opened


def test_the_task_shows_the_proposed_call_its_exact_labels_and_turn() -> None:
    _, run = _parked(_script(), {})
    task = run.task
    assert task is not None and task.role == "finance"
    shown = json.loads(task.answer_json)
    assert shown["tool"] == "refund" and shown["turn"] == 2
    assert shown["arguments"] == {"recipient": S.CUSTOMER_IBAN, "amount_eur": 40, "order": "o-1"}
    # The turn's exact labels: the recipient is a verbatim copy of the CRM's record.
    recipient = shown["labels"]["recipient"]
    assert recipient["trust"] == str(Trust.TRUSTED)
    assert "tool://crm_lookup" in recipient["provenance"]


def test_approved_the_call_is_made_as_proposed() -> None:
    counts: dict[str, int] = {}
    driver, run = _parked(_script(), counts)
    run = driver.decide(run.session_id, "APPROVED", by=("ada",))
    assert run.status is RunStatus.COMPLETED, run.error
    assert counts[REFUND] == 1
    assert run.output["calls"] == [["crm_lookup", True, None], ["refund", True, None]]
    assert run.output["status"] == "answered"
    _replays(driver, run)


def test_rejected_the_model_reads_the_reason_and_answers() -> None:
    counts: dict[str, int] = {}
    model = _script(_answers_what_it_read)
    driver, run = _parked(model, counts)
    run = driver.decide(run.session_id, "REJECTED", by=("ada",), comment="refund exceeds policy")
    assert run.status is RunStatus.COMPLETED, run.error
    assert not any(k.startswith("refund:") for k in counts)
    assert run.output["calls"][-1] == ["refund", False, "CallRejected"]
    errors = [m for m in model.prompts[-1] if m.role == "tool" and m.is_error]
    assert [e.content for e in errors] == ["CallRejected: refund exceeds policy"]
    assert run.output["text"] == "Not refunded: CallRejected: refund exceeds policy"
    _replays(driver, run)


def test_edited_the_refund_goes_to_the_edited_recipient_released_by_the_person() -> None:
    counts: dict[str, int] = {}
    driver, run = _parked(_script(), counts)
    # Four-eyes: the run's initiator may not decide (nor edit) the call.
    initiator = run.task.initiator if run.task is not None else ""
    run = driver.decide(run.session_id, "APPROVED", by=(initiator,), edits={"recipient": OURS})
    assert run.status is RunStatus.AWAITING_HUMAN and driver.rejected
    assert counts == {"crm_lookup:[('customer_id', 'c-1')]": 1}
    run = driver.decide(run.session_id, "APPROVED", by=("ada",), edits={"recipient": OURS})
    assert run.status is RunStatus.COMPLETED, run.error
    edited = "refund:" + str(sorted({"recipient": OURS, "amount_eur": 40, "order": "o-1"}.items()))
    assert counts.get(edited) == 1 and REFUND not in counts
    assert run.output["calls"][-1] == ["refund", True, None]
    assert not [r for r in run.journal if r.attrs.get("gate") == "refused"]
    _replays(driver, run)


def test_an_edit_releases_only_the_edited_field_the_rest_is_judged_as_the_turn_proposed() -> None:
    # The model reads the customer's document first: the amount it then writes is no copy of
    # a trusted source (a composed number, by the untrusted turn). The person edits only the
    # recipient: the amount is still refused, by the turn's own label.
    def refund_more(seen: Seen) -> list[Call]:
        account = seen.result("crm_lookup")["account"]
        return [Call("refund", {"recipient": account, "amount_eur": 41, "order": "o-1"})]

    model = ScriptedModel(
        [
            [
                Call("crm_lookup", {"customer_id": "c-1"}),
                Call("fetch_document", {"document_id": "d"}),
            ],
            refund_more,
            _answers_what_it_read,
        ]
    )
    counts: dict[str, int] = {}
    driver, run = _parked(model, counts)
    run = driver.decide(run.session_id, "APPROVED", by=("ada",), edits={"recipient": OURS})
    assert run.status is RunStatus.COMPLETED, run.error
    refused = [
        (r.attrs["reason"], r.attrs["path"])
        for r in run.journal
        if r.attrs.get("gate") == "refused"
    ]
    assert refused == [("field_trust", "$.amount_eur")]
    assert not any(k.startswith("refund:") for k in counts)
    _replays(driver, run)


def test_a_call_needs_no_approval_unless_the_policy_or_its_declaration_says_so() -> None:
    counts: dict[str, int] = {}
    driver = Driver(
        S.AGENTS, tools=S.tools(counts), providers={"scripted": _script()}, policy=S.POLICY
    )
    run = driver.run("loop.support", INPUT)
    assert run.status is RunStatus.COMPLETED, run.error
    assert counts[REFUND] == 1 and not driver.tasks_opened


DECLARED = AgentRegistry()


@agent(
    "loop.declared",
    registry=DECLARED,
    effects=(
        EffectDecl("crm_lookup", mutating=False, recovery=Recovery.RETRY),
        EffectDecl("refund", mutating=True, recovery=Recovery.RETRY, needs_approval=True),
    ),
    models=["scripted"],
)
async def declared(ctx: StepCtx, input: dict[str, Any]) -> list[Any]:
    result = await ctx.agent_loop(
        "scripted", "m", "", input, tools=["crm_lookup", "refund"], max_turns=4
    )
    return [[c.call.name, c.ok, c.error_type] for c in result.calls]


def test_a_tool_declared_as_needing_approval_is_asked_by_the_default_role() -> None:
    counts: dict[str, int] = {}
    driver = Driver(DECLARED, tools=S.tools(counts), providers={"scripted": _script()})
    run = driver.run("loop.declared", INPUT)
    assert run.status is RunStatus.AWAITING_HUMAN, run.error
    assert run.task is not None and run.task.role == DEFAULT_APPROVAL_ROLE
    run = driver.decide(run.session_id, "APPROVED", by=("ada",))
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == [["crm_lookup", True, None], ["refund", True, None]]
    assert counts[REFUND] == 1
