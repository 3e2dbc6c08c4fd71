"""What a person can do on the worklist, shared by the HTTP API and the web page.

Every action takes the :class:`~runplane.serving.auth.Principal` the request authenticated as — never
a name from a body — checks it with the same pure rules the single writer runs, sends the
command through the :class:`~services.worklist.gateway.Gateway` and answers with the record
the writer produced, or an :class:`ActionError` carrying the HTTP status and the reason.

A person sees only the tasks :func:`~services.worklist.decide.visible_to` allows; any other
task — shown, claimed, released or decided — is answered exactly like a task that does not
exist (404), so its id, question and proposed answer do not leak.

Lists are answered from the read model's indexes (``index.py``), a page at a time: ``limit``
tasks and a cursor for the next page, never a scan of every task ever opened.

A supervisor may release anyone's claim (the record notes it); the release is confirmed when
the claim its holder had is gone.

Decisions are :class:`Choice` values: approve/reject for approvals (and edit, for a proposed
call: approve it with some arguments changed); retry, abandon or happened (with the observed
result) for operator tasks. The pure rules refuse the wrong kind (422).
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from runplane.errors import WireError
from runplane.serving.auth import Principal
from runplane.wire import (
    ClaimTask,
    DecideTask,
    DecisionOutcome,
    ReleaseTask,
    TaskKind,
    TaskRecord,
    TaskStatus,
)
from services.worklist import metrics
from services.worklist.access import Policy, Refusal, TaskChange, refuse_reason, visible_to
from services.worklist.decide import decide
from services.worklist.gateway import Sent
from services.worklist.index import Cursor, dimensions, index_key, member, merged, segments, task_of

__all__ = [
    "ActionError",
    "Choice",
    "Filter",
    "TaskPage",
    "Worklist",
    "choices_for",
    "result_comment",
]

_STATUS = {
    Refusal.NOT_FOUND: 404,
    Refusal.FORBIDDEN: 403,
    Refusal.CONFLICT: 409,
    Refusal.INVALID: 422,
}

HumanCommand = ClaimTask | ReleaseTask | DecideTask
C = TypeVar("C", ClaimTask, ReleaseTask, DecideTask)


class Choice(enum.StrEnum):
    """What a person answers (the API's ``decision``, the page's buttons, the CLI's argument)."""

    APPROVE = "approve"
    REJECT = "reject"
    RETRY = "retry"  # operator: it did not happen, perform it again
    ABANDON = "abandon"  # operator: give up, record the call failed
    HAPPENED = "happened"  # operator: it took effect; the comment is its observed result
    EDIT = "edit"  # a proposed call: approve it with the arguments given changed

    @property
    def verdict(self) -> DecisionOutcome | None:
        """The operator verdict this choice stands for; None for approve/reject."""
        return _VERDICTS.get(self)


_VERDICTS = {
    Choice.RETRY: DecisionOutcome.RETRY,
    Choice.ABANDON: DecisionOutcome.ABANDON,
    Choice.HAPPENED: DecisionOutcome.APPROVED,
}
APPROVAL_CHOICES = (Choice.APPROVE, Choice.REJECT)
OPERATOR_CHOICES = (Choice.RETRY, Choice.HAPPENED, Choice.ABANDON)
CALL_CHOICES = (Choice.APPROVE, Choice.EDIT, Choice.REJECT)


def choices_for(task: TaskRecord) -> tuple[Choice, ...]:
    """The answers ``task``'s kind takes (a proposed call one person decides: edit too)."""
    if task.task.kind is TaskKind.OPERATOR:
        return OPERATOR_CHOICES
    return CALL_CHOICES if task.task.editable and task.task.approvals == 1 else APPROVAL_CHOICES


def result_comment(result: object) -> str:
    """The wire comment of a 'happened' verdict: the observed result as compact JSON (empty
    for no result, which the run records as null)."""
    if result is None:
        return ""
    # allow_nan=False: NaN is not JSON, and the run's reader must be able to parse this.
    return json.dumps(
        result, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


class ActionError(Exception):
    """An action refused: ``status`` is the HTTP status, ``message`` says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Store(Protocol):
    """The read model: records by id, and the sorted indexes of ``index.py``."""

    def get(self, task_id: str) -> TaskRecord | None: ...
    def get_many(self, task_ids: Sequence[str]) -> list[TaskRecord | None]: ...
    def scan(self, key: str, after: str, n: int) -> Sequence[str]: ...


class Sender(Protocol):
    def send(self, command: HumanCommand) -> Sent: ...
    def await_applied(self, sent: Sent, done: Callable[[], bool] | None = None) -> None: ...


@dataclass(frozen=True)
class Filter:
    """``GET /api/tasks`` filters; None means any. ``actionable``: only what I may act on.
    ``cursor``: where the page starts (a previous page's ``cursor``; None = the first page).
    ``active``: only OPEN/CLAIMED tasks (True) or only finished ones (False)."""

    status: TaskStatus | None = None
    role: str | None = None
    case_id: str | None = None
    actionable: bool = False
    limit: int = 200
    cursor: str | None = None
    active: bool | None = None


@dataclass(frozen=True)
class TaskPage:
    """One page of a list; ``cursor`` is None when nothing follows."""

    tasks: list[TaskRecord] = field(default_factory=list)
    cursor: str | None = None


def _chunks(items: Iterator[str], n: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


Clock = Callable[[], int]


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Worklist:
    """The actions; ``store`` is the read model, ``sender`` the way to the writer."""

    def __init__(
        self, store: Store, sender: Sender, policy: Policy, *, clock: Clock = _wall_ms
    ) -> None:
        self._store = store
        self._sender = sender
        self.policy = policy
        self._clock = clock

    def now_ms(self) -> int:
        return self._clock()

    # --- reading -----------------------------------------------------------------------------

    def list(self, who: Principal, f: Filter) -> list[TaskRecord]:
        """The first page's tasks (see :meth:`page`)."""
        return self.page(who, f).tasks

    def page(self, who: Principal, f: Filter) -> TaskPage:
        """Up to ``f.limit`` tasks ``who`` may see, oldest open first (who has waited longest),
        then finished work newest first; ValueError for a cursor this API did not make."""
        now = self._clock()
        groups = segments(f.status, True if f.actionable else f.active)
        start = Cursor.decode(f.cursor) if f.cursor else Cursor(0, "")
        out: list[TaskRecord] = []
        batch = min(max(f.limit, 50), 500)
        for seg in range(start.segment, len(groups)):
            statuses = groups[seg]
            after = start.after if seg == start.segment else ""
            members = merged(self._keys(who, statuses, f), self._store.scan, after, batch)
            for chunk in _chunks(members, batch):
                records = self._store.get_many([task_of(m) for m in chunk])
                for m, task in zip(chunk, records, strict=True):
                    # The index and the record moved together, but between our two reads the
                    # task may have moved on: take it only where it is now.
                    if task is None or task.status not in statuses or member(task) != m:
                        continue
                    if self._matches(who, task, f, now):
                        out.append(task)
                        if len(out) == f.limit:
                            return TaskPage(out, Cursor(seg, m).encode())
        return TaskPage(out, None)

    def _keys(self, who: Principal, statuses: tuple[TaskStatus, ...], f: Filter) -> Sequence[str]:
        roles = self.policy.roles_of(who.name)

        def dims(status: TaskStatus) -> Sequence[str]:
            # Every task of a role is in that role's index: with a role filter that index is
            # the whole candidate set (visibility is still checked per record).
            if f.role is not None:
                return [f"role:{f.role}"]
            return dimensions(
                who.name,
                roles,
                status,
                escalation_role=self.policy.escalation_role,
                supervisor_role=self.policy.supervisor_role,
            )

        return [index_key(status, d) for status in statuses for d in dims(status)]

    def _matches(self, who: Principal, task: TaskRecord, f: Filter, now: int) -> bool:
        if not visible_to(task, who.name, self.policy):
            return False
        if f.status is not None and task.status is not f.status:
            return False
        if f.role is not None and task.task.role != f.role:
            return False
        if f.case_id is not None and task.task.case_id != f.case_id:
            return False
        return not (f.actionable and self.why_not(who, task, now) is not None)

    def show(self, who: Principal, task_id: str) -> TaskRecord:
        task = self._visible(who.name, task_id)
        if task is None:
            raise ActionError(404, f"no task {task_id!r}")
        return task

    def _visible(self, name: str, task_id: str) -> TaskRecord | None:
        """The task, or None when it does not exist *or* ``name`` may not see it (one answer
        for both, so existence does not leak)."""
        task = self._store.get(task_id)
        return task if task is not None and visible_to(task, name, self.policy) else None

    def why_not(self, who: Principal, task: TaskRecord, now_ms: int | None = None) -> str | None:
        """None when ``who`` may act on ``task`` now, else the reason."""
        refusal = refuse_reason(
            task, who.name, self._clock() if now_ms is None else now_ms, self.policy
        )
        return None if refusal is None else refusal.reason

    # --- acting ------------------------------------------------------------------------------

    def claim(self, who: Principal, task_id: str) -> TaskRecord:
        cmd = _build(ClaimTask, task_id=task_id, principal=who.name, at_ms=self._clock())
        return self._act(
            "claim", cmd, lambda t: t.claimed_by == who.name or who.name in t.approved_by
        )

    def release(self, who: Principal, task_id: str) -> TaskRecord:
        """Give your claim back — or, as a supervisor, take back anyone's (noted on the task)."""
        cmd = _build(ReleaseTask, task_id=task_id, principal=who.name, at_ms=self._clock())
        current = self._visible(who.name, task_id)
        holder = None if current is None else current.claimed_by
        return self._act("release", cmd, lambda t: t.claimed_by is None or t.claimed_by != holder)

    def decide(
        self,
        who: Principal,
        task_id: str,
        choice: Choice,
        comment: str = "",
        edits: Mapping[str, Any] | None = None,
    ) -> TaskRecord:
        """Decide: approve/reject an approval, or give an operator task its verdict (for
        HAPPENED, ``comment`` is the observed result, see :func:`result_comment`). EDIT
        approves a proposed call with ``edits`` (argument name → new value) changed."""
        if (choice is Choice.EDIT) != (edits is not None):
            raise ActionError(422, "edited arguments come with the decision 'edit', and only then")
        approve = choice in (Choice.APPROVE, Choice.HAPPENED, Choice.EDIT)
        cmd = _build(
            DecideTask,
            task_id=task_id,
            principal=who.name,
            at_ms=self._clock(),
            approve=approve,
            comment=comment,
            verdict=choice.verdict,
            edits_json=None if edits is None else result_comment(dict(edits)),
        )
        if choice in (Choice.APPROVE, Choice.EDIT):
            return self._act("decide", cmd, lambda t: who.name in t.approved_by)
        return self._act(
            "decide",
            cmd,
            lambda t: t.status is TaskStatus.DECIDED and t.claimed_by == who.name,
        )

    def _act(
        self, action: str, cmd: HumanCommand, shows: Callable[[TaskRecord], bool]
    ) -> TaskRecord:
        try:
            return self._act_checked(cmd, shows)
        except ActionError as exc:
            metrics.API_REQUESTS.labels(action, str(exc.status)).inc()
            raise

    def _act_checked(self, cmd: HumanCommand, shows: Callable[[TaskRecord], bool]) -> TaskRecord:
        action = type(cmd).__name__.removesuffix("Task").lower()
        # An invisible task is refused as "no such task" before any rule can say more.
        current = self._visible(cmd.principal, cmd.task_id)
        change = decide(current, cmd, self._clock(), self.policy)
        _raise_refusal(change)
        if change.task is None:
            assert current is not None
            metrics.API_REQUESTS.labels(action, "200").inc()
            return current  # nothing to change (e.g. claiming what you already hold)
        sent = self._sender.send(cmd)

        predicted = change.task.updated_ms

        def visible() -> bool:
            # A shortcut only: the read model already shows the outcome this command asks for.
            t = self._store.get(cmd.task_id)
            return t is not None and t.updated_ms >= predicted and shows(t)

        self._sender.await_applied(sent, visible)
        after = self._store.get(cmd.task_id)
        if after is not None and shows(after):
            metrics.API_REQUESTS.labels(action, "200").inc()
            return after
        # The writer refused it: someone else's command got there first. Say why, from the
        # record as it is now.
        again = decide(after, cmd, self._clock(), self.policy)
        _raise_refusal(again)
        raise ActionError(409, "the task changed while your request was on its way; reload it")


def _build(kind: type[C], **fields: Any) -> C:
    """The command, or a 422 when a field cannot go on the wire (the record validates itself)."""
    try:
        return kind(**fields)
    except WireError as exc:
        raise ActionError(422, str(exc)) from exc


def _raise_refusal(change: TaskChange) -> None:
    if change.refused is not None:
        raise ActionError(_STATUS[change.refused], change.reason)
