"""The worklist's pure rules: four-eyes, N approvals, claims, roles, the expiry matrix."""

from __future__ import annotations

import io
import json

import fastavro
import pytest

from runplane.wire import (
    ClaimTask,
    CloseTask,
    DecideTask,
    DecisionOutcome,
    ExpireTask,
    ExpiryPolicy,
    OpenTask,
    ReleaseTask,
    TaskKind,
    TaskRecord,
    TaskStatus,
    decode,
    encode,
    register_writer_schema,
)
from services.worklist.access import Policy, Refusal, TaskChange, visible_to
from services.worklist.decide import Command, decide, due_for_expiry

pytestmark = pytest.mark.unit

ROLES = {
    "ivan": frozenset({"finance"}),  # the runs' initiator, who also holds the role
    "ada": frozenset({"finance"}),
    "bob": frozenset({"finance"}),
    "cy": frozenset({"support"}),
    "sue": frozenset({"supervisor"}),
}
POLICY = Policy(roles_of=lambda name: ROLES.get(name, frozenset()), escalation_role="supervisor")


def opened(**overrides: object) -> OpenTask:
    fields: dict[str, object] = {
        "task_id": "run-1/0/1",
        "session_id": "run-1",
        "era": 0,
        "call_seq": 1,
        "kind": TaskKind.APPROVAL,
        "question": "Refund 1200 cents?",
        "answer_json": '{"amount_cents":1200}',
        "case_id": "case-9",
        "capability": "refund",
        "role": "finance",
        "approvals": 1,
        "initiator": "ivan",
        "expires_ms": None,
        "on_expiry": ExpiryPolicy.FAIL,
        "allow_unattended": False,
        "opened_ms": 1_000,
    }
    fields.update(overrides)
    return OpenTask(**fields)  # type: ignore[arg-type]


def fold(*commands: Command, now_ms: int = 2_000) -> tuple[TaskRecord | None, list[TaskChange]]:
    task: TaskRecord | None = None
    verdicts = []
    for c in commands:
        v = decide(task, c, now_ms, POLICY)
        verdicts.append(v)
        if v.task is not None:
            task = v.task
    return task, verdicts


def claim(who: str, at: int = 1_500) -> ClaimTask:
    return ClaimTask(task_id="run-1/0/1", principal=who, at_ms=at)


def approve(who: str, comment: str = "", at: int = 1_600) -> DecideTask:
    return DecideTask(task_id="run-1/0/1", principal=who, at_ms=at, approve=True, comment=comment)


def reject(who: str, comment: str = "") -> DecideTask:
    return DecideTask(
        task_id="run-1/0/1", principal=who, at_ms=1_600, approve=False, comment=comment
    )


def test_open_creates_an_open_task_and_a_second_open_changes_nothing() -> None:
    task, (first, again) = fold(opened(), opened(question="something else"))
    assert task is not None and task.status is TaskStatus.OPEN
    assert task.task.question == "Refund 1200 cents?"
    assert first.result == "applied" and again.result == "unchanged"


def test_open_with_zero_approvals_is_invalid() -> None:
    _, (v,) = fold(opened(approvals=0))
    assert v.refused is Refusal.INVALID and "approvals" in v.reason


def test_the_initiator_can_neither_claim_nor_decide_its_own_task() -> None:
    _, (_, c, d) = fold(opened(), claim("ivan"), approve("ivan"))
    for v in (c, d):
        assert v.refused is Refusal.FORBIDDEN
        assert "four-eyes" in v.reason and "ivan" in v.reason
        assert v.task is None and v.decision is None


def test_another_principal_with_the_role_approves_and_the_run_gets_the_decision() -> None:
    task, verdicts = fold(opened(), claim("ada"), approve("ada", "ok"))
    assert task is not None
    assert task.status is TaskStatus.DECIDED and task.outcome is DecisionOutcome.APPROVED
    assert task.approved_by == ("ada",)
    decision = verdicts[-1].decision
    assert decision is not None
    assert (decision.session_id, decision.task_id, decision.call_seq) == ("run-1", "run-1/0/1", 1)
    assert decision.outcome is DecisionOutcome.APPROVED
    assert decision.decided_by == ("ada",) and decision.comment == "ok"


def test_a_principal_without_the_role_is_refused() -> None:
    _, (_, c) = fold(opened(), claim("cy"))
    assert c.refused is Refusal.FORBIDDEN and "finance" in c.reason
    _, (_, u) = fold(opened(), claim("mallory"))  # unknown to the directory: no roles at all
    assert u.refused is Refusal.FORBIDDEN


def test_a_claim_is_held_until_released() -> None:
    _, verdicts = fold(opened(), claim("ada"), claim("bob"), approve("bob"), claim("ada"))
    assert verdicts[2].refused is Refusal.CONFLICT and "claimed by ada" in verdicts[2].reason
    assert verdicts[3].refused is Refusal.CONFLICT
    assert verdicts[4].result == "unchanged"  # re-claiming your own claim is a no-op
    task, verdicts = fold(
        opened(),
        claim("ada"),
        ReleaseTask(task_id="run-1/0/1", principal="bob", at_ms=1),
        ReleaseTask(task_id="run-1/0/1", principal="ada", at_ms=1),
        claim("bob"),
    )
    assert verdicts[2].refused is Refusal.CONFLICT
    assert verdicts[3].result == "applied"
    assert task is not None and task.claimed_by == "bob" and task.status is TaskStatus.CLAIMED


def test_two_approvals_need_two_different_principals() -> None:
    task, verdicts = fold(
        opened(approvals=2),
        approve("ada", "fine"),
        approve("ada"),
        claim("ada"),
        approve("bob", "agreed"),
    )
    first, twice, reclaim, second = verdicts[1:]
    assert first.decision is None and first.task is not None
    assert first.task.status is TaskStatus.OPEN and first.task.approved_by == ("ada",)
    assert twice.refused is Refusal.FORBIDDEN and "already approved" in twice.reason
    assert reclaim.refused is Refusal.FORBIDDEN
    assert second.decision is not None and second.decision.outcome is DecisionOutcome.APPROVED
    assert second.decision.decided_by == ("ada", "bob")
    assert second.decision.comment == "ada: fine\nbob: agreed"
    assert task is not None and task.status is TaskStatus.DECIDED


def test_a_rejection_ends_the_task_at_once() -> None:
    task, verdicts = fold(opened(approvals=2), approve("ada"), reject("bob", "no"))
    d = verdicts[-1].decision
    assert (
        d is not None and d.outcome is DecisionOutcome.REJECTED and d.decided_by == ("ada", "bob")
    )
    assert (
        task is not None and task.outcome is DecisionOutcome.REJECTED and task.claimed_by == "bob"
    )
    _, (after,) = fold_from(task, approve("ada"))
    assert after.refused is Refusal.CONFLICT


def fold_from(task: TaskRecord, *commands: Command) -> tuple[TaskRecord, list[TaskChange]]:
    out = []
    for c in commands:
        v = decide(task, c, 2_000, POLICY)
        out.append(v)
        task = v.task or task
    return task, out


def test_acting_on_an_unknown_task_is_not_found() -> None:
    for cmd in (claim("ada"), approve("ada"), ReleaseTask(task_id="x", principal="ada", at_ms=1)):
        assert decide(None, cmd, 1, POLICY).refused is Refusal.NOT_FOUND


def test_close_ends_an_active_task_without_a_decision() -> None:
    task, (_, _, closed) = fold(
        opened(), claim("ada"), CloseTask(task_id="run-1/0/1", reason="run FAILED", at_ms=3)
    )
    assert closed.decision is None
    assert task is not None and task.status is TaskStatus.CLOSED and task.comment == "run FAILED"
    assert decide(task, approve("bob"), 2_000, POLICY).refused is Refusal.CONFLICT


# --- the expiry matrix -----------------------------------------------------------------------


def expire(policy: ExpiryPolicy, unattended: bool, escalate_to: str | None = None) -> TaskChange:
    task, _ = fold(
        opened(
            expires_ms=5_000, on_expiry=policy, allow_unattended=unattended, escalate_to=escalate_to
        ),
        claim("ada"),
    )
    assert task is not None and due_for_expiry(task, 5_000) and not due_for_expiry(task, 4_999)
    return decide(task, ExpireTask(task_id="run-1/0/1", at_ms=5_000), 5_000, POLICY)


def test_both_opt_ins_proceed_unattended_and_the_decision_says_so() -> None:
    v = expire(ExpiryPolicy.PROCEED, True)
    assert v.task is not None and v.task.status is TaskStatus.EXPIRED
    assert v.task.outcome is DecisionOutcome.EXPIRED_PROCEEDED
    assert v.decision is not None and v.decision.outcome is DecisionOutcome.EXPIRED_PROCEEDED
    assert v.decision.decided_by == ()
    assert "unattended" in v.decision.comment


@pytest.mark.parametrize(
    ("policy", "unattended"),
    [(ExpiryPolicy.PROCEED, False), (ExpiryPolicy.FAIL, True), (ExpiryPolicy.FAIL, False)],
)
def test_a_missing_opt_in_does_not_proceed(policy: ExpiryPolicy, unattended: bool) -> None:
    v = expire(policy, unattended)
    assert v.task is not None and v.task.outcome is DecisionOutcome.EXPIRED_FAILED
    assert v.decision is not None and v.decision.outcome is DecisionOutcome.EXPIRED_FAILED
    if policy is ExpiryPolicy.PROCEED:
        assert "allow_unattended" in v.decision.comment


@pytest.mark.parametrize(("escalate_to", "role"), [("cfo", "cfo"), (None, "supervisor")])
def test_escalation_reopens_the_task_for_the_escalation_role(
    escalate_to: str | None, role: str
) -> None:
    v = expire(ExpiryPolicy.ESCALATE, False, escalate_to)
    assert v.task is not None and v.task.status is TaskStatus.OPEN and v.task.claimed_by is None
    assert v.task.task.role == role and v.task.task.expires_ms is None
    assert v.task.outcome is DecisionOutcome.ESCALATED
    assert v.decision is not None and v.decision.outcome is DecisionOutcome.ESCALATED
    if role == "supervisor":
        done = decide(v.task, approve("sue"), 9_000, POLICY)
        assert done.decision is not None and done.decision.outcome is DecisionOutcome.APPROVED


def test_expiry_before_the_instant_or_after_a_decision_does_nothing() -> None:
    task, _ = fold(opened(expires_ms=5_000))
    assert task is not None
    early = decide(task, ExpireTask(task_id="run-1/0/1", at_ms=4_000), 4_000, POLICY)
    assert early.refused is Refusal.CONFLICT
    decided, _ = fold_from(task, approve("ada"))
    assert (
        decide(decided, ExpireTask(task_id="run-1/0/1", at_ms=6_000), 6_000, POLICY).result
        == "unchanged"
    )


def test_a_decision_after_the_expiry_instant_is_refused() -> None:
    task, _ = fold(opened(expires_ms=5_000))
    assert task is not None
    late = decide(task, approve("ada", at=5_001), 5_001, POLICY)
    assert late.refused is Refusal.CONFLICT and "expired" in late.reason


def test_every_record_the_rules_write_round_trips_through_the_wire() -> None:
    _, verdicts = fold(opened(approvals=2), approve("ada", "x"), approve("bob", "y"))
    written = [r for v in verdicts for r in (v.task, v.decision) if r is not None]
    assert len(written) == 4
    for record in written:
        assert decode(encode(record)) == record


# --- operator verdicts -----------------------------------------------------------------------


def operator_opened(**overrides: object) -> OpenTask:
    fields: dict[str, object] = {
        "task_id": "run-1/0/1/operator",
        "kind": TaskKind.OPERATOR,
        "role": "finance",
        "answer_json": '{"effect":"tool://billing/charge","request":{"args":{"cents":1}}}',
    }
    fields.update(overrides)
    return opened(**fields)


def verdict(
    who: str, v: DecisionOutcome | None, comment: str = "", approve: bool = False
) -> DecideTask:
    return DecideTask(
        task_id="run-1/0/1/operator",
        principal=who,
        at_ms=1_600,
        approve=approve,
        comment=comment,
        verdict=v,
    )


@pytest.mark.parametrize(
    "v, comment",
    [
        (DecisionOutcome.RETRY, "not in the ledger"),
        (DecisionOutcome.ABANDON, "give up"),
        (DecisionOutcome.APPROVED, '{"charge_id":"ch_1"}'),
        (DecisionOutcome.APPROVED, ""),
    ],
)
def test_an_operator_verdict_decides_the_task_and_is_the_runs_outcome(
    v: DecisionOutcome, comment: str
) -> None:
    task, (_, decided) = fold(operator_opened(), verdict("ada", v, comment))
    assert task is not None and task.status is TaskStatus.DECIDED
    assert task.outcome is v and task.claimed_by == "ada" and task.comment == comment
    d = decided.decision
    assert d is not None
    assert (d.outcome, d.comment, d.decided_by, d.call_seq) == (v, comment, ("ada",), 1)


@pytest.mark.parametrize(
    "cmd, needle",
    [
        (verdict("ada", None, approve=True), "answered with a verdict"),
        (verdict("ada", None), "answered with a verdict"),
        (verdict("ada", DecisionOutcome.REJECTED), "not an operator verdict"),
        (verdict("ada", DecisionOutcome.EXPIRED_PROCEEDED), "not an operator verdict"),
        (verdict("ada", DecisionOutcome.APPROVED, "it went through"), "must be JSON"),
    ],
)
def test_a_wrong_answer_to_an_operator_task_is_invalid(cmd: DecideTask, needle: str) -> None:
    task, (_, refused) = fold(operator_opened(), cmd)
    assert refused.refused is Refusal.INVALID and needle in refused.reason
    assert refused.decision is None and task is not None and task.status is TaskStatus.OPEN


def test_a_verdict_on_an_approval_is_invalid_and_role_checks_come_first() -> None:
    _, (_, refused) = fold(
        opened(),
        DecideTask(
            task_id="run-1/0/1",
            principal="ada",
            at_ms=1_600,
            approve=False,
            verdict=DecisionOutcome.RETRY,
        ),
    )
    assert refused.refused is Refusal.INVALID and "operator verdict" in refused.reason
    _, (_, cy) = fold(operator_opened(), verdict("cy", DecisionOutcome.RETRY))
    assert cy.refused is Refusal.FORBIDDEN
    _, (_, ivan) = fold(operator_opened(), verdict("ivan", DecisionOutcome.RETRY))
    assert ivan.refused is Refusal.FORBIDDEN and "four-eyes" in ivan.reason


def test_an_older_decide_task_without_a_verdict_reads_as_none() -> None:
    schema = json.loads(DecideTask.avro_schema_json())
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "verdict"]
    parsed = fastavro.parse_schema(schema)
    fp = fastavro.schema.fingerprint(
        fastavro.schema.to_parsing_canonical_form(parsed), "CRC-64-AVRO"
    )
    buf = io.BytesIO()
    fastavro.schemaless_writer(
        buf,
        parsed,
        {"task_id": "t", "principal": "ada", "at_ms": 1, "approve": True, "comment": ""},
    )
    register_writer_schema(json.dumps(schema))
    old = decode(b"\xc3\x01" + bytes.fromhex(fp) + buf.getvalue())
    assert old == DecideTask(task_id="t", principal="ada", at_ms=1, approve=True)
    assert isinstance(old, DecideTask) and old.verdict is None


# --- visibility ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "who, task_kw, record_kw, sees",
    [
        ("ada", {}, {}, True),  # holds the role
        ("cy", {}, {}, False),  # neither role nor involvement
        ("cy", {"initiator": "cy"}, {}, True),  # started the run
        ("cy", {}, {"claimed_by": "cy"}, True),  # holds (or made) the final decision
        ("cy", {}, {"approved_by": ("cy",)}, True),  # approved it
        ("sue", {}, {}, False),  # escalation role, but the task does not escalate
        ("sue", {"on_expiry": ExpiryPolicy.ESCALATE}, {}, True),  # the deployment's default
        ("sue", {"on_expiry": ExpiryPolicy.ESCALATE, "escalate_to": "legal"}, {}, False),
        ("cy", {"on_expiry": ExpiryPolicy.ESCALATE, "escalate_to": "support"}, {}, True),
    ],
)
def test_visibility(
    who: str, task_kw: dict[str, object], record_kw: dict[str, object], sees: bool
) -> None:
    base, _ = fold(opened(**task_kw))
    assert base is not None
    record = TaskRecord(
        **{**{f: getattr(base, f) for f in ("task", "status", "updated_ms")}, **record_kw}
    )
    assert visible_to(record, who, POLICY) is sees


def test_a_run_asking_again_for_a_decided_task_gets_the_same_decision_again() -> None:
    # A run resumed after a quarantine asks for the task it asked for before: the decision
    # made then is its answer, sent again as it was (who, outcome, comment, when).
    task, verdicts = fold(opened(), claim("ada"), approve("ada", "fine"), opened())
    first, again = verdicts[2].decision, verdicts[3].decision
    assert first is not None and again == first
    assert verdicts[3].task is None and task is not None and task.status is TaskStatus.DECIDED


def test_a_run_asking_again_for_a_rejected_task_names_who_rejected_it() -> None:
    _, verdicts = fold(opened(), reject("bob", "no"), opened())
    assert verdicts[2].decision == verdicts[1].decision
    assert verdicts[2].decision is not None and verdicts[2].decision.decided_by == ("bob",)


def test_a_withdrawn_task_asked_for_again_is_open_again() -> None:
    withdrawn = CloseTask(task_id="run-1/0/1", reason="run QUARANTINED", at_ms=1_700)
    task, verdicts = fold(opened(), claim("ada"), withdrawn, opened(question="again?"))
    assert task is not None and task.status is TaskStatus.OPEN and task.claimed_by is None
    assert task.task.question == "again?" and verdicts[3].decision is None
