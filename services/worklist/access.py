"""Who may see and act on a task (pure): the rules' vocabulary and the visibility checks.

Split from ``decide.py`` (which re-exports all of it): ``Policy`` is what the rules need beyond
a record, ``TaskChange`` their answer, :func:`actor_problem` the refusal of a person claiming or
deciding, :func:`visible_to` whether a person sees a task at all.

Tenants: a task belongs to its run's tenant (``OpenTask.tenant``, written by the executor; a
task from an older writer has none and counts as :data:`~runplane.serving.auth.DEFAULT_TENANT`), a
principal to theirs (``Policy.tenant_of``). Another tenant's task is invisible and answers
NOT_FOUND to a claim or decision, before any role or four-eyes rule — whatever roles the
principal holds, supervisors included.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from runplane.serving.auth import DEFAULT_TENANT
from runplane.wire import ExpiryPolicy, TaskDecision, TaskRecord, TaskStatus

__all__ = [
    "ACTIVE",
    "DEFAULT_CLAIM_TTL_MS",
    "FINAL",
    "Policy",
    "Refusal",
    "TaskChange",
    "actor_problem",
    "refuse",
    "refuse_reason",
    "same_tenant",
    "task_tenant",
    "visible_to",
]

ACTIVE = frozenset({TaskStatus.OPEN, TaskStatus.CLAIMED})
FINAL = frozenset({TaskStatus.DECIDED, TaskStatus.EXPIRED, TaskStatus.CLOSED})
DEFAULT_CLAIM_TTL_MS = 30 * 60 * 1000


class Refusal(enum.StrEnum):
    """Why a command was not applied; the API maps these onto HTTP statuses."""

    NOT_FOUND = "not_found"  # 404
    FORBIDDEN = "forbidden"  # 403: role or four-eyes
    CONFLICT = "conflict"  # 409: claimed by someone else, already decided, not due …
    INVALID = "invalid"  # a malformed command (dead-lettered by the writer)


@dataclass(frozen=True)
class Policy:
    """What the rules need beyond the record: the principals' roles and tenants, the escalation
    role, the
    supervisor role (may release anyone's claim) and the claim lease (None: claims never
    lapse)."""

    roles_of: Callable[[str], frozenset[str]]
    # A principal's tenant (None: unknown, sees nothing); tasks of other tenants do not exist
    # for them. The default puts everyone in the tenant "default" (single-tenant deployments).
    tenant_of: Callable[[str], str | None] = lambda _name: DEFAULT_TENANT
    escalation_role: str = "supervisor"
    supervisor_role: str = "supervisor"
    claim_ttl_ms: int | None = DEFAULT_CLAIM_TTL_MS

    def __post_init__(self) -> None:
        if self.claim_ttl_ms is not None and self.claim_ttl_ms <= 0:
            raise ValueError("the claim lease must be positive (or None for no lease)")


@dataclass(frozen=True)
class TaskChange:
    """The result of one command.

    ``task``: the new record when it changed (None = nothing to write). ``decision``: the
    TaskDecision for the run's inbox when the task reached a decision (or escalated).
    ``refused`` / ``reason``: set when the command was not applied.
    """

    task: TaskRecord | None = None
    decision: TaskDecision | None = None
    refused: Refusal | None = None
    reason: str = ""

    @property
    def result(self) -> str:
        if self.refused is not None:
            return "refused"
        return "applied" if self.task is not None else "unchanged"


def refuse(kind: Refusal, reason: str) -> TaskChange:
    return TaskChange(refused=kind, reason=reason)


def actor_problem(
    task: TaskRecord | None, principal: str, now_ms: int, policy: Policy, verb: str
) -> TaskChange | None:
    """The refusal for ``principal`` acting on ``task`` (claim or decide), or None."""
    if task is None or not same_tenant(task, principal, policy):
        # Another tenant's task answers as a missing one: its id reveals nothing.
        return refuse(Refusal.NOT_FOUND, "no such task")
    t = task.task
    if task.status in FINAL:
        return refuse(Refusal.CONFLICT, f"the task is already {task.status}")
    if t.expires_ms is not None and now_ms >= t.expires_ms:
        return refuse(Refusal.CONFLICT, "the task has expired")
    if principal == t.initiator:
        return refuse(
            Refusal.FORBIDDEN,
            f"four-eyes: {principal} started this run and cannot {verb} its own task",
        )
    if t.role not in policy.roles_of(principal):
        return refuse(Refusal.FORBIDDEN, f"{principal} does not hold the role {t.role!r}")
    if principal in task.approved_by:
        return refuse(
            Refusal.FORBIDDEN,
            f"four-eyes: {principal} already approved this task; "
            "the next approval must come from someone else",
        )
    if task.claimed_by is not None and task.claimed_by != principal:
        return refuse(Refusal.CONFLICT, f"the task is claimed by {task.claimed_by}")
    return None


def refuse_reason(
    task: TaskRecord | None, principal: str, now_ms: int, policy: Policy
) -> TaskChange | None:
    """Whether ``principal`` may act on ``task`` at all (the page's 'may act on' filter)."""
    return actor_problem(task, principal, now_ms, policy, "act on")


def visible_to(task: TaskRecord, principal: str, policy: Policy) -> bool:
    """Whether ``principal`` may see ``task`` at all (list, show): it is of their tenant, and
    they hold its role or the role it escalates to, or they initiated, claimed, approved or
    decided it."""
    if not same_tenant(task, principal, policy):
        return False
    t = task.task
    if principal in (t.initiator, task.claimed_by) or principal in task.approved_by:
        return True
    roles = policy.roles_of(principal)
    if t.role in roles:
        return True
    if task.status is TaskStatus.CLAIMED and policy.supervisor_role in roles:
        return True
    return (
        t.on_expiry is ExpiryPolicy.ESCALATE and (t.escalate_to or policy.escalation_role) in roles
    )


def task_tenant(task: TaskRecord) -> str:
    """The tenant a task belongs to (its run's; the default for tasks written before)."""
    return task.task.tenant or DEFAULT_TENANT


def same_tenant(task: TaskRecord, principal: str, policy: Policy) -> bool:
    return policy.tenant_of(principal) == task_tenant(task)
