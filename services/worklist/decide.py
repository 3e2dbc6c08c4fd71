"""The worklist's rules, pure: ``decide(task, command, now_ms, policy) -> TaskChange``.

One function per command type folds a command into the task's current TaskRecord (``None``
when the task was never opened). The same function serves twice:

- the single writer (the processor handler) applies it authoritatively to the restored
  ``tasks`` table and commits the new record and any TaskDecision in one transaction;
- the HTTP API runs it against the read model *before* producing a command, so a person gets
  403/404/409 with the reason at once instead of a command the writer would refuse anyway.

Four-eyes lives here and nowhere else:

- the run's initiator can neither claim nor decide its own task;
- a task needing N approvals needs N different principals (an approver cannot approve twice,
  and cannot claim the task again);
- a claim is held by one principal until decided, released, expired or closed; nobody else
  can decide a claimed task;
- a claim is a lease (``Policy.claim_ttl_ms``, default 30 minutes): the writer's tick hands a
  task whose claim outlived it back to OPEN (:func:`lapse_claim`), and a principal with the
  supervisor role (``Policy.supervisor_role``) may release anyone's claim. Either way the
  record says so in ``claim_note``: a person who walked away cannot block a task forever, and
  taking the claim from them leaves a trace;
- the principal must hold the task's role (``Policy.roles_of`` — the writer loads the same
  principals file as the API; names come from authenticated tokens, never from bodies).

Operator tasks (``TaskKind.OPERATOR``: a mutating call whose outcome is in doubt) are not
approved or rejected: ``DecideTask.verdict`` answers them — ``RETRY`` (it did not happen,
perform it again), ``ABANDON`` (give up, record the call failed) or ``APPROVED`` (it happened;
the comment is the observed result as JSON, or empty). The verdict is final (the core opens
operator tasks with one approval) and becomes the TaskDecision's outcome as is. A verdict on
an approval, or approve/reject on an operator task, is ``INVALID``: the run could not tell
what was meant. Role and four-eyes checks are the same as for approvals.

A call approval (a task with ``editable`` arguments, ``ctx.approve_call``) may also be
approved with some arguments changed: ``DecideTask.edits_json``, a non-empty JSON object whose
keys are among the task's ``editable`` arguments. Only with ``approve``, only on a task one
person decides (``approvals == 1``: an edit by the last of several approvers would change what
the others approved). The edits go on the decided record and its TaskDecision (``edits_json``);
the run checks them again and records them as that person's release of those fields. Any other
edit is ``INVALID``.

Visibility (``visible_to``): a principal sees a task only when they hold its role (or the role
it would escalate to), or initiated, claimed or decided it; a supervisor also sees every
claimed task (so a claim left behind can be found and released). The API answers 404 for any
other task, so task ids do not leak to people who could not see them anyway.

Expiry is decided by the writer's clock only: ``ExpireTask.at_ms`` is informational, so a
forged command cannot expire a task before its instant.

JSON a person sends (an operator's observed result) is refused past :data:`MAX_JSON_DEPTH`
levels of nesting: deeper documents cannot be parsed or re-encoded without recursion limits
(a 500 in the API, a crash in a reader), and no real result needs them.

Expiry: a due task proceeds unattended (EXPIRED_PROCEEDED) only when it declares both
``on_expiry=PROCEED`` and ``allow_unattended=true``. ``ESCALATE`` reopens it for
``escalate_to`` (or the deployment's escalation role) without a further expiry. Anything else,
including PROCEED without ``allow_unattended``, is EXPIRED_FAILED — and the comment says which
opt-in was missing, so the record explains itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from runplane.wire import (
    ClaimTask,
    CloseTask,
    DecideTask,
    DecisionOutcome,
    ExpireTask,
    ExpiryPolicy,
    OpenTask,
    ReleaseTask,
    TaskDecision,
    TaskKind,
    TaskRecord,
    TaskStatus,
)
from services.worklist.access import (
    ACTIVE,
    FINAL,
    Policy,
    Refusal,
    TaskChange,
    actor_problem,
    refuse,
)
from services.worklist.answers import (
    parse_json,
)

__all__ = [
    "OPERATOR_VERDICTS",
    "Command",
    "claim_lapses_ms",
    "decide",
    "due_for_expiry",
    "lapse_claim",
    "next_due_ms",
    "op_of",
]

Command = OpenTask | ClaimTask | ReleaseTask | DecideTask | ExpireTask | CloseTask

# The answers to an operator task. APPROVED means "it happened" (the core reads the comment as
# the call's observed result); REJECTED is not offered: it would not say whether it happened.
OPERATOR_VERDICTS = frozenset(
    {DecisionOutcome.RETRY, DecisionOutcome.ABANDON, DecisionOutcome.APPROVED}
)


def op_of(command: Command) -> str:
    return {
        OpenTask: "open",
        ClaimTask: "claim",
        ReleaseTask: "release",
        DecideTask: "decide",
        ExpireTask: "expire",
        CloseTask: "close",
    }[type(command)]


def decide(task: TaskRecord | None, command: Command, now_ms: int, policy: Policy) -> TaskChange:
    """Fold ``command`` into ``task`` (pure). See the module docstring for the rules."""
    if isinstance(command, OpenTask):
        return _open(task, command, now_ms)
    if isinstance(command, ClaimTask):
        return _claim(task, command, now_ms, policy)
    if isinstance(command, ReleaseTask):
        return _release(task, command, now_ms, policy)
    if isinstance(command, DecideTask):
        return _decide(task, command, now_ms, policy)
    if isinstance(command, ExpireTask):
        return _expire(task, command, now_ms, policy)
    return _close(task, command, now_ms)


# --- open ------------------------------------------------------------------------------------


def _open_problem(t: OpenTask) -> str | None:
    for name in ("task_id", "session_id", "question", "capability", "role", "initiator"):
        if not str(getattr(t, name)).strip():
            return f"OpenTask.{name} must not be empty"
    if t.approvals < 1:
        return f"OpenTask.approvals must be >= 1, got {t.approvals}"
    if t.era < 0:
        return f"OpenTask.era must be >= 0, got {t.era}"
    if (
        t.on_expiry is ExpiryPolicy.ESCALATE
        and t.escalate_to is not None
        and not t.escalate_to.strip()
    ):
        return "OpenTask.escalate_to must not be blank"
    return None


def _open(task: TaskRecord | None, cmd: OpenTask, now_ms: int) -> TaskChange:
    problem = _open_problem(cmd)
    if problem:
        return refuse(Refusal.INVALID, problem)
    if task is not None:
        return _asked_again(task, cmd, now_ms)
    return TaskChange(task=TaskRecord(task=cmd, status=TaskStatus.OPEN, updated_ms=now_ms))


def _asked_again(task: TaskRecord, cmd: OpenTask, now_ms: int) -> TaskChange:
    """The run asks for a task it asked for before (a replay re-sends it; a run resumed after
    a quarantine or a failure asks again). What happened to the task since stands, and the run
    gets its answer: a decision already made is sent again (the run may never have read it —
    the engine ignores one it already has); a task withdrawn when the run ended is opened
    again, since the resumed run waits for it. Otherwise (open, claimed) nothing changes."""
    if task.status is TaskStatus.CLOSED:
        reopened = dataclasses.replace(
            task,
            task=cmd,
            status=TaskStatus.OPEN,
            claimed_by=None,
            approved_by=(),
            outcome=None,
            comment="",
            edits_json=None,
            updated_ms=now_ms,
        )
        return TaskChange(task=reopened)
    outcome = task.outcome
    if task.status not in FINAL or outcome is None or outcome is DecisionOutcome.ESCALATED:
        return TaskChange()
    if outcome is DecisionOutcome.APPROVED or task.claimed_by is None:
        by: tuple[str, ...] = tuple(task.approved_by)
    else:
        by = (*task.approved_by, task.claimed_by)
    if task.status is TaskStatus.EXPIRED:
        by = ()
    return TaskChange(decision=_decision(task, outcome, task.comment, by, task.updated_ms))


# --- claim / release -------------------------------------------------------------------------


def _claim(task: TaskRecord | None, cmd: ClaimTask, now_ms: int, policy: Policy) -> TaskChange:
    refused = actor_problem(task, cmd.principal, now_ms, policy, "claim")
    if refused is not None:
        return refused
    assert task is not None
    if task.claimed_by == cmd.principal:
        return TaskChange()  # a re-sent claim: already held
    claimed = dataclasses.replace(
        task, status=TaskStatus.CLAIMED, claimed_by=cmd.principal, updated_ms=now_ms
    )
    return TaskChange(task=claimed)


def _release(task: TaskRecord | None, cmd: ReleaseTask, now_ms: int, policy: Policy) -> TaskChange:
    if task is None:
        return refuse(Refusal.NOT_FOUND, "no such task")
    if task.status in FINAL:
        return refuse(Refusal.CONFLICT, f"the task is already {task.status}")
    if task.claimed_by is None:
        return TaskChange()  # nothing held: releasing again changes nothing
    if task.claimed_by == cmd.principal:
        released = dataclasses.replace(
            task, status=TaskStatus.OPEN, claimed_by=None, updated_ms=now_ms
        )
        return TaskChange(task=released)
    if policy.supervisor_role not in policy.roles_of(cmd.principal):
        return refuse(Refusal.CONFLICT, f"the task is claimed by {task.claimed_by}, not you")
    note = (
        f"released by {cmd.principal} (role {policy.supervisor_role}); "
        f"it was claimed by {task.claimed_by}"
    )
    return TaskChange(task=_reopened(task, note, now_ms))


def _reopened(task: TaskRecord, note: str, now_ms: int) -> TaskRecord:
    return dataclasses.replace(
        task, status=TaskStatus.OPEN, claimed_by=None, claim_note=note, updated_ms=now_ms
    )


def claim_lapses_ms(task: TaskRecord, policy: Policy) -> int | None:
    """When ``task``'s claim lease ends (None: not claimed, or claims never lapse).

    A claimed record is written when the claim is taken and not again until the claim ends,
    so its ``updated_ms`` is the instant the lease started."""
    if task.status is not TaskStatus.CLAIMED or policy.claim_ttl_ms is None:
        return None
    return task.updated_ms + policy.claim_ttl_ms


def lapse_claim(task: TaskRecord, now_ms: int, policy: Policy) -> TaskChange:
    """The writer's tick: hand a claim that outlived its lease back (OPEN, noted)."""
    ends = claim_lapses_ms(task, policy)
    if ends is None or now_ms < ends or task.claimed_by is None:
        return TaskChange()
    assert policy.claim_ttl_ms is not None
    note = (
        f"lapsed: {task.claimed_by} held the claim past the "
        f"{policy.claim_ttl_ms // 1000} s claim lease"
    )
    return TaskChange(task=_reopened(task, note, now_ms))


# --- decide ----------------------------------------------------------------------------------


def _comment_after(task: TaskRecord, principal: str, comment: str) -> str:
    """Single-approval tasks pass the comment through untouched (an operator's APPROVED
    comment is the call's result as JSON); multi-approval tasks keep each person's line."""
    if task.task.approvals == 1:
        return comment
    if not comment.strip():
        return task.comment
    line = f"{principal}: {comment}"
    return f"{task.comment}\n{line}" if task.comment else line


def _decision(
    task: TaskRecord, outcome: DecisionOutcome, comment: str, by: Sequence[str], now_ms: int
) -> TaskDecision:
    t = task.task
    return TaskDecision(
        session_id=t.session_id,
        task_id=t.task_id,
        era=t.era,
        call_seq=t.call_seq,
        outcome=outcome,
        comment=comment,
        decided_by=tuple(by),
        decided_ms=now_ms,
        edits_json=task.edits_json if outcome is DecisionOutcome.APPROVED else None,
    )


def _kind_problem(task: TaskRecord, cmd: DecideTask) -> str | None:
    """Why ``cmd`` is the wrong kind of answer for ``task`` (approval vs operator), or None."""
    if cmd.edits_json is not None:
        return _edit_problem(task, cmd)
    if task.task.kind is not TaskKind.OPERATOR:
        if cmd.verdict is not None:
            return f"{cmd.verdict} is an operator verdict; an approval task is approved or rejected"
        return None
    if cmd.verdict is None:
        return (
            "an operator task is answered with a verdict: retry (it did not happen), "
            "abandon (record it failed) or happened (with the observed result) — "
            "approve/reject would not say whether the call took effect"
        )
    if cmd.verdict not in OPERATOR_VERDICTS:
        return f"{cmd.verdict} is not an operator verdict (RETRY, ABANDON or APPROVED)"
    if cmd.verdict is DecisionOutcome.APPROVED and cmd.comment.strip():
        try:
            parse_json(cmd.comment)
        except ValueError as exc:
            return f"the observed result of a call that happened must be JSON: {exc}"
    return None


def _edit_problem(task: TaskRecord, cmd: DecideTask) -> str | None:
    """Why ``cmd``'s edits cannot be taken on ``task``, or None (see the module docstring)."""
    t = task.task
    if not t.editable:
        return "the task is no proposed call: it takes no edited arguments"
    if not cmd.approve or cmd.verdict is not None:
        return "edited arguments come with an approval"
    if t.approvals > 1:
        return f"a call that needs {t.approvals} approvals is approved or rejected as proposed"
    try:
        edits = parse_json(cmd.edits_json or "")
    except ValueError as exc:
        return f"the edited arguments must be JSON: {exc}"
    if not isinstance(edits, dict) or not edits:
        return "the edited arguments are a non-empty JSON object: argument name to new value"
    unknown = sorted(set(edits) - set(t.editable))
    if unknown:
        return (
            f"{', '.join(map(repr, unknown))}: not an argument of the proposed call "
            f"(editable: {', '.join(t.editable)})"
        )
    return None


def _decide(task: TaskRecord | None, cmd: DecideTask, now_ms: int, policy: Policy) -> TaskChange:
    refused = actor_problem(task, cmd.principal, now_ms, policy, "decide")
    if refused is not None:
        return refused
    assert task is not None
    problem = _kind_problem(task, cmd)
    if problem is not None:
        return refuse(Refusal.INVALID, problem)
    if cmd.verdict is not None:
        return _operator_verdict(task, cmd, cmd.verdict, now_ms)
    comment = _comment_after(task, cmd.principal, cmd.comment)
    if not cmd.approve:
        by = (*task.approved_by, cmd.principal)
        final = dataclasses.replace(
            task,
            status=TaskStatus.DECIDED,
            claimed_by=cmd.principal,  # on a decided task: who made the final decision
            outcome=DecisionOutcome.REJECTED,
            comment=comment,
            updated_ms=now_ms,
        )
        return TaskChange(final, _decision(final, DecisionOutcome.REJECTED, comment, by, now_ms))
    approved_by = (*task.approved_by, cmd.principal)
    if len(approved_by) < task.task.approvals:
        # Not enough eyes yet: record this approval and put the task back for the next person.
        partial = dataclasses.replace(
            task,
            status=TaskStatus.OPEN,
            claimed_by=None,
            approved_by=approved_by,
            comment=comment,
            updated_ms=now_ms,
        )
        return TaskChange(task=partial)
    final = dataclasses.replace(
        task,
        status=TaskStatus.DECIDED,
        claimed_by=cmd.principal,
        approved_by=approved_by,
        outcome=DecisionOutcome.APPROVED,
        comment=comment,
        edits_json=cmd.edits_json,
        updated_ms=now_ms,
    )
    return TaskChange(
        final, _decision(final, DecisionOutcome.APPROVED, comment, approved_by, now_ms)
    )


def _operator_verdict(
    task: TaskRecord, cmd: DecideTask, verdict: DecisionOutcome, now_ms: int
) -> TaskChange:
    # Final at once; ``claimed_by`` names who decided, as for a rejection. The comment passes
    # through untouched: for APPROVED the core reads it as the call's observed result.
    final = dataclasses.replace(
        task,
        status=TaskStatus.DECIDED,
        claimed_by=cmd.principal,
        outcome=verdict,
        comment=cmd.comment,
        updated_ms=now_ms,
    )
    by = (*task.approved_by, cmd.principal)
    return TaskChange(final, _decision(final, verdict, cmd.comment, by, now_ms))


# --- expire / close --------------------------------------------------------------------------


def _expire(task: TaskRecord | None, cmd: ExpireTask, now_ms: int, policy: Policy) -> TaskChange:
    if task is None:
        return refuse(Refusal.NOT_FOUND, "no such task")
    if task.status in FINAL:
        return TaskChange()  # decided (or closed) before it expired: nothing to do
    t = task.task
    if t.expires_ms is None:
        return refuse(Refusal.CONFLICT, "the task has no expiry")
    # The writer's clock only: cmd.at_ms comes off the wire, and trusting it would let anyone
    # who can produce to tasks.commands expire a task early.
    if now_ms < t.expires_ms:
        return refuse(Refusal.CONFLICT, f"the task is not due until {t.expires_ms}")
    if t.on_expiry is ExpiryPolicy.PROCEED and t.allow_unattended:
        return _expired(
            task,
            DecisionOutcome.EXPIRED_PROCEEDED,
            "expired; proceeded unattended (on_expiry=PROCEED, allow_unattended=true)",
            now_ms,
        )
    if t.on_expiry is ExpiryPolicy.ESCALATE:
        return _escalate(task, t.escalate_to or policy.escalation_role, now_ms)
    why = (
        "on_expiry=PROCEED without allow_unattended=true, so it did not proceed"
        if t.on_expiry is ExpiryPolicy.PROCEED
        else f"on_expiry={t.on_expiry}"
    )
    return _expired(task, DecisionOutcome.EXPIRED_FAILED, f"expired; {why}", now_ms)


def _expired(task: TaskRecord, outcome: DecisionOutcome, comment: str, now_ms: int) -> TaskChange:
    final = dataclasses.replace(
        task,
        status=TaskStatus.EXPIRED,
        claimed_by=None,
        outcome=outcome,
        comment=comment,
        updated_ms=now_ms,
    )
    return TaskChange(final, _decision(final, outcome, comment, (), now_ms))


def _escalate(task: TaskRecord, role: str, now_ms: int) -> TaskChange:
    # Reopened for the escalation role with no further expiry: escalating again would loop,
    # and failing it later would undo the point of asking someone more senior.
    t = task.task
    comment = f"expired; escalated from role {t.role!r} to {role!r}"
    reopened_task = dataclasses.replace(
        t, role=role, expires_ms=None, on_expiry=ExpiryPolicy.FAIL, escalate_to=None
    )
    reopened = dataclasses.replace(
        task,
        task=reopened_task,
        status=TaskStatus.OPEN,
        claimed_by=None,
        outcome=DecisionOutcome.ESCALATED,
        comment=comment,
        updated_ms=now_ms,
    )
    return TaskChange(reopened, _decision(reopened, DecisionOutcome.ESCALATED, comment, (), now_ms))


def _close(task: TaskRecord | None, cmd: CloseTask, now_ms: int) -> TaskChange:
    if task is None or task.status in FINAL:
        return TaskChange()  # the run ended with no open task here: nothing to close
    closed = dataclasses.replace(
        task, status=TaskStatus.CLOSED, claimed_by=None, comment=cmd.reason, updated_ms=now_ms
    )
    return TaskChange(task=closed)


# --- the tick --------------------------------------------------------------------------------


def due_for_expiry(task: TaskRecord, now_ms: int) -> bool:
    """True when ``task`` is still active and past its expiry instant."""
    exp = task.task.expires_ms
    return task.status in ACTIVE and exp is not None and now_ms >= exp


def next_due_ms(task: TaskRecord, policy: Policy) -> int | None:
    """The next instant the tick must look at ``task`` (its expiry or the end of its claim
    lease, whichever is first); None when nothing will ever be due (final, or no expiry and
    no lease)."""
    if task.status not in ACTIVE:
        return None
    due = [d for d in (task.task.expires_ms, claim_lapses_ms(task, policy)) if d is not None]
    return min(due) if due else None
