"""``ctx.approve_call``: a person approves, rejects or edits a proposed tool call.

Through ``runplane.testing``'s Driver, as a loop agent would make the call: the task shows the
call, its labels and turn; a rejection's reason comes back; an edit is that person's release
of exactly the edited fields — the gate honours it there and nowhere else; the run's initiator
and an edit of a field the call does not have are refused by the engine itself (the run keeps
waiting); and a decided call replays from the journal with no task opened again.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from runplane.core import AgentRegistry, AgentSpec, StepCtx, replay_history
from runplane.core.agents import EffectDecl
from runplane.core.callapproval import CallDecision, CallOutcome, edits_of, needs_approval
from runplane.core.gate import FieldRule, SinkDecl, sinks
from runplane.core.policy import ApprovalRule, parse_policy
from runplane.core.releases import Released, SinkRefused
from runplane.errors import ConfigError
from runplane.testing import Driver, RunView, ScriptedProvider
from runplane.wire import DecisionOutcome, RunStatus, Trust

ACCOUNT = "NL91ABNA0417164300"
OURS = "NL02RABO0123456789"
ANSWER = f"Refund 12345 cents to {ACCOUNT} today, says the e-mail."
REFUND = SinkDecl(
    "tool://refund",
    protected=(FieldRule("$.recipient", sources=("human:*",)), FieldRule("$.amount_cents")),
)


async def agent(ctx: StepCtx, input: Any) -> Any:
    answer = await ctx.generate("p", "m", "what does the e-mail ask?")
    words = answer.text.split()
    proposed = {"recipient": words[4], "amount_cents": int(words[1]), "memo": "refund"}
    decision: CallDecision = await ctx.approve_call("refund", proposed, role="finance", turn=1)
    out: dict[str, Any] = {
        "outcome": str(decision.outcome),
        "reason": decision.reason,
        "by": list(decision.decided_by),
        "edited": list(decision.edited),
    }
    if not decision.approved:
        return out
    try:
        await ctx.tool("refund", decision.arguments, mutating=True)
        out["sent"] = True
    except SinkRefused as exc:
        out["sent"] = exc.message
    return out


def _driver(hits: list[dict[str, Any]]) -> Driver:
    spec = AgentRegistry().register(AgentSpec("refunds", sinks(REFUND)(agent)), lint=False)

    def refund(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        hits.append(args)
        return {"refunded": True}

    return Driver(
        spec, tools={"refund": refund}, providers={"p": ScriptedProvider([ANSWER], name="p")}
    )


def _asked() -> tuple[Driver, RunView, list[dict[str, Any]]]:
    hits: list[dict[str, Any]] = []
    driver = _driver(hits)
    run = driver.run("refunds", {})
    assert run.status is RunStatus.AWAITING_HUMAN, run.error
    return driver, run, hits


def _replays(driver: Driver, run: RunView) -> None:
    assert driver.verify(run.session_id).ok
    opened = len(driver.tasks_opened)
    report = replay_history(driver.agents.spec("refunds"), run.snapshot, dict(run.results))
    assert (report.output, report.live_calls, report.divergence) == (run.output, 0, None)
    assert len(driver.tasks_opened) == opened  # no task opened again


def _refusals(run: RunView) -> list[tuple[str, str]]:
    return [(r.attrs["reason"], r.attrs["path"]) for r in run.journal if "gate" in r.attrs]


def test_the_task_shows_the_call_its_labels_and_turn() -> None:
    _, run, _ = _asked()
    task = run.task
    assert task is not None and task.role == "finance" and task.initiator == "tester"
    shown = json.loads(task.answer_json)
    assert shown["tool"] == "refund" and shown["turn"] == 1
    assert shown["arguments"] == {"recipient": ACCOUNT, "amount_cents": 12345, "memo": "refund"}
    # The model's answer is untrusted: so are the arguments copied from it.
    assert shown["labels"]["recipient"]["trust"] == str(Trust.UNTRUSTED)
    assert "model:p/m" in shown["labels"]["recipient"]["provenance"]
    assert shown["labels"]["memo"]["trust"] == str(Trust.UNTRUSTED)  # the run has read it
    assert task.editable == ("amount_cents", "memo", "recipient")
    opened = [r for r in run.journal if r.kind.name == "TASK_OPENED"]
    assert opened[-1].attrs["call"] == "tool://refund"


def test_approved_as_proposed_the_gate_still_judges_the_call() -> None:
    driver, run, hits = _asked()
    run = driver.decide(run.session_id, "APPROVED", by=("ada",), comment="ok")
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output["outcome"] == "approved" and run.output["by"] == ["ada"]
    # An approval is no release: the untrusted recipient is refused as before.
    assert "protected field $.recipient" in run.output["sent"]
    assert _refusals(run) == [("field_trust", "$.recipient")]
    assert hits == []
    _replays(driver, run)


def test_rejected_with_a_reason_the_call_is_not_made() -> None:
    driver, run, hits = _asked()
    run = driver.decide(run.session_id, "REJECTED", by=("ada",), comment="not our customer")
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {
        "outcome": "rejected",
        "reason": "not our customer",
        "by": ["ada"],
        "edited": [],
    }
    assert hits == []
    _replays(driver, run)


def test_an_edit_releases_exactly_the_edited_field() -> None:
    driver, run, hits = _asked()
    run = driver.decide(run.session_id, "APPROVED", by=("ada",), edits={"recipient": OURS})
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output["outcome"] == "edited" and run.output["edited"] == ["recipient"]
    # The recipient is ada's now; the amount is still the e-mail's, untrusted: refused there.
    assert _refusals(run) == [("field_trust", "$.amount_cents")]
    assert hits == []
    _replays(driver, run)


def test_an_edit_of_every_protected_field_is_sent_as_edited() -> None:
    driver, run, hits = _asked()
    edits = {"recipient": OURS, "amount_cents": 500}
    run = driver.decide(run.session_id, "APPROVED", by=("ada",), edits=edits)
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output["sent"] is True and run.output["edited"] == ["amount_cents", "recipient"]
    assert hits == [{"recipient": OURS, "amount_cents": 500, "memo": "refund"}]
    assert _refusals(run) == []
    _replays(driver, run)


def test_the_edited_argument_is_a_released_of_the_decider() -> None:
    seen: list[CallDecision] = []

    async def keep(ctx: StepCtx, input: Any) -> Any:
        seen.append(await ctx.approve_call("refund", {"recipient": ACCOUNT}, role="finance"))
        return None

    spec = AgentRegistry().register(AgentSpec("keep", keep), lint=False)
    driver = Driver(spec)
    run = driver.run("keep", {})
    driver.decide(run.session_id, "APPROVED", by=("bob",), edits={"recipient": OURS})
    (decision,) = seen
    released = decision.arguments["recipient"]
    assert isinstance(released, Released)
    assert (released.value, released.destination, released.field) == (
        OURS,
        "tool://refund",
        "$.recipient",
    )
    assert released.decided_by == ("bob",) and released.trust and released.sensitivity is None
    assert decision.outcome is CallOutcome.EDITED


def test_the_initiator_is_refused_as_decider_and_the_run_keeps_waiting() -> None:
    driver, run, hits = _asked()
    run = driver.decide(run.session_id, "APPROVED", by=("tester",), edits={"recipient": OURS})
    assert run.status is RunStatus.AWAITING_HUMAN
    assert "names the run's initiator 'tester'" in driver.rejected[-1][1]
    run = driver.decide(run.session_id, "REJECTED", by=("ada",), comment="no")
    assert run.status is RunStatus.COMPLETED and run.output["outcome"] == "rejected"
    assert hits == []


@pytest.mark.parametrize(
    ("edits", "outcome", "fragment"),
    [
        ({"iban": OURS}, "APPROVED", "'iban', not an editable argument of the proposed call"),
        ({}, "APPROVED", "non-empty JSON object"),
        ({"recipient": OURS}, "REJECTED", "edits come with an approval, not with REJECTED"),
    ],
)
def test_an_edit_the_call_cannot_take_is_refused_by_the_engine(
    edits: dict[str, Any], outcome: str, fragment: str
) -> None:
    driver, run, hits = _asked()
    run = driver.decide(run.session_id, outcome, by=("ada",), edits=edits)
    assert run.status is RunStatus.AWAITING_HUMAN
    assert fragment in driver.rejected[-1][1]
    run = driver.decide(run.session_id, "APPROVED", by=("ada",), edits={"recipient": OURS})
    assert run.output["outcome"] == "edited"  # the run took the good decision after it
    assert hits == []


def test_edits_on_a_plain_approval_are_refused() -> None:
    async def plain(ctx: StepCtx, input: Any) -> Any:
        decision = await ctx.approval("refund?", {"recipient": ACCOUNT}, role="finance")
        return decision.approved

    driver = Driver(AgentRegistry().register(AgentSpec("plain", plain), lint=False))
    run = driver.run("plain", {})
    assert run.task is not None and run.task.editable == ()
    run = driver.decide(run.session_id, "APPROVED", by=("ada",), edits={"recipient": OURS})
    assert run.status is RunStatus.AWAITING_HUMAN
    assert "no call approval" in driver.rejected[-1][1]


def test_a_call_needing_two_approvals_takes_no_edit() -> None:
    with pytest.raises(ValueError, match="needs 2 approvals is not edited"):
        edits_of(("a",), '{"a": 1}', DecisionOutcome.APPROVED, 2)
    assert edits_of(("a",), None, DecisionOutcome.APPROVED, 2) == {}
    assert edits_of(("a",), '{"a": [1]}', DecisionOutcome.APPROVED, 1) == {"a": [1]}


def test_only_plain_member_names_are_editable() -> None:
    async def odd(ctx: StepCtx, input: Any) -> Any:
        await ctx.approve_call("t", {"ok_1": 1, "not ok": 2, "9lives": 3}, role="r")

    driver = Driver(AgentRegistry().register(AgentSpec("odd", odd), lint=False))
    task = driver.run("odd", {}).task
    assert task is not None and task.editable == ("ok_1",)


def test_bad_requests_are_refused_in_the_agent() -> None:
    async def bad(ctx: StepCtx, input: Any) -> Any:
        problems = []
        for kwargs in (
            {"labels": {"nope": None}},
            {"turn": -1},
            {"approvals": 0},
            {"role": " "},
        ):
            try:
                ctx.approve_call("t", {"a": 1}, **{"role": "r", **kwargs})
            except ValueError as exc:
                problems.append(str(exc))
        return problems

    driver = Driver(AgentRegistry().register(AgentSpec("bad", bad), lint=False))
    out = driver.run("bad", {}).output
    assert len(out) == 4 and "labels name no argument of the call: nope" in out[0]


def test_needs_approval_policy_wins_over_the_declaration() -> None:
    policy = parse_policy(
        """
sinks:
  "tool://refund": {protected: [{path: $.recipient}], approval: {role: finance, approvals: 2}}
  "tool://mail": {approval: support}
"""
    )
    assert needs_approval(policy, None, "refund") == ApprovalRule("finance", 2)
    assert needs_approval(policy, None, "mail") == ApprovalRule("support")
    assert "tool://mail" not in policy.sinks  # approval only: no sink declared
    assert "tool://refund" in policy.sinks
    marked = EffectDecl("lookup", needs_approval=True)
    assert needs_approval(policy, marked, "lookup") == ApprovalRule()
    assert needs_approval(policy, EffectDecl("lookup"), "lookup") is None
    assert needs_approval(None, None, "refund") is None
    with pytest.raises(ConfigError, match="approval is a role or"):
        parse_policy('sinks: {"tool://x": {approval: {who: me}}}')
    with pytest.raises(ConfigError, match="approvals >= 1"):
        parse_policy('sinks: {"tool://x": {approval: {role: a, approvals: 0}}}')


def test_a_decided_call_replays_from_the_journal_and_no_task_is_opened_again() -> None:
    async def then_wait(ctx: StepCtx, input: Any) -> Any:
        decision = await ctx.approve_call("refund", {"recipient": ACCOUNT}, role="finance")
        await ctx.wait_signal("go")
        return {"edited": list(decision.edited), "to": decision.arguments["recipient"].value}

    driver = Driver(AgentRegistry().register(AgentSpec("w", then_wait), lint=False))
    run = driver.run("w", {})
    run = driver.decide(run.session_id, "APPROVED", by=("ada",), edits={"recipient": OURS})
    assert run.status is RunStatus.PARKED and len(driver.tasks_opened) == 1
    driver.crash(run.session_id)
    run = driver.signal(run.session_id, "go", {})  # rebuilt by replay, then resumed
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"edited": ["recipient"], "to": OURS}
    assert len(driver.tasks_opened) == 1 and driver.replayed > 0
    assert driver.verify(run.session_id).ok
