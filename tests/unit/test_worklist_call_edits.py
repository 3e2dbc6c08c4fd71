"""The worklist's rules for a proposed call (``ctx.approve_call``): an edit is an approval with
some of the call's arguments changed — only arguments the task lists, only on a task one
person decides, only with approve — and it travels on the decided record and its decision, so
a decision sent again carries it too."""

from __future__ import annotations

import json

import pytest

from runplane.wire import DecideTask, DecisionOutcome, TaskKind, TaskStatus
from services.worklist.access import Refusal
from services.worklist.actions import APPROVAL_CHOICES, CALL_CHOICES, choices_for
from tests.unit.test_worklist_decide import fold, opened

pytestmark = pytest.mark.unit

CALL = {"tool": "refund", "arguments": {"recipient": "X", "amount_cents": 9}, "turn": 2}


def call_task(**overrides: object) -> object:
    return opened(answer_json=json.dumps(CALL), editable=("amount_cents", "recipient"), **overrides)


def edit(edits: object, *, approve: bool = True, who: str = "ada") -> DecideTask:
    return DecideTask(
        task_id="run-1/0/1",
        principal=who,
        at_ms=1_600,
        approve=approve,
        edits_json=json.dumps(edits),
    )


def test_an_edit_is_an_approval_that_carries_the_edited_arguments() -> None:
    task, changes = fold(call_task(), edit({"recipient": "Y"}))
    assert task is not None and task.status is TaskStatus.DECIDED
    assert task.outcome is DecisionOutcome.APPROVED and task.edits_json == '{"recipient": "Y"}'
    decision = changes[-1].decision
    assert decision is not None and decision.decided_by == ("ada",)
    assert json.loads(decision.edits_json or "") == {"recipient": "Y"}
    # The run asks again (a replay re-sends its OpenTask): the decision comes back, edits too.
    _, again = fold(call_task(), edit({"recipient": "Y"}), call_task())
    resent = again[-1].decision
    assert resent is not None and resent.edits_json == decision.edits_json


@pytest.mark.parametrize(
    ("task", "command", "fragment"),
    [
        (call_task(), edit({"iban": "Y"}), "'iban': not an argument of the proposed call"),
        (call_task(), edit({}), "non-empty JSON object"),
        (call_task(), edit(["recipient"]), "non-empty JSON object"),
        (call_task(), edit({"recipient": "Y"}, approve=False), "come with an approval"),
        (call_task(approvals=2), edit({"recipient": "Y"}), "needs 2 approvals"),
        (opened(), edit({"recipient": "Y"}), "takes no edited arguments"),
        (opened(kind=TaskKind.OPERATOR), edit({"recipient": "Y"}), "takes no edited"),
    ],
)
def test_an_edit_the_task_cannot_take_is_invalid(
    task: object, command: DecideTask, fragment: str
) -> None:
    _, (_, change) = fold(task, command)  # type: ignore[arg-type]
    assert change.refused is Refusal.INVALID and fragment in change.reason
    assert change.task is None and change.decision is None


def test_an_edit_does_not_pass_four_eyes() -> None:
    _, (_, change) = fold(call_task(), edit({"recipient": "Y"}, who="ivan"))
    assert change.refused is Refusal.FORBIDDEN and "four-eyes" in change.reason


def test_a_rejection_and_a_plain_approval_carry_no_edits() -> None:
    approve = DecideTask(task_id="run-1/0/1", principal="ada", at_ms=1_600, approve=True)
    task, changes = fold(call_task(), approve)
    assert task is not None and task.edits_json is None
    assert changes[-1].decision is not None and changes[-1].decision.edits_json is None


def test_the_choices_of_a_proposed_call_include_edit() -> None:
    task, _ = fold(call_task())
    assert task is not None and choices_for(task) == CALL_CHOICES
    several, _ = fold(call_task(approvals=2))
    assert several is not None and choices_for(several) == APPROVAL_CHOICES
