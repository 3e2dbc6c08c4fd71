"""The worklist's processor handler: the single writer of the compacted ``tasks`` topic.

``handle`` reads the task from the restored ``tasks`` table, folds the command in with
:func:`services.worklist.decide.decide`, and returns what the shared transactional processor
commits together with the input offset: the new TaskRecord on ``tasks`` and, when the task was
decided, expired or escalated, the TaskDecision on ``runs.inbox`` (key = the run's session).
``tick`` expires due tasks the same way, and hands back claims that outlived their lease, in
a transaction of its own.

The tick does not walk the table: the ``tasks`` table keeps every task ever opened (it is the
compacted topic restored), while only active tasks can come due. The handler keeps an
in-memory index of the active tasks (their role, for the open-tasks gauge) and of the next
instant each must be looked at (expiry or end of claim lease). It is updated from every record
the handler writes and rebuilt from the table after a rebalance or an aborted transaction; each
due entry is re-read from the table before acting, so a stale entry costs a lookup, never a
wrong write. A task that reaches a final status leaves both.

Delivery guarantee: exactly once per command, by the processor's transaction. A command the
rules refuse (four-eyes, role, a lost race for a claim, a malformed OpenTask) raises
``WireError`` with the reason, and the processor dead-letters it: a refused attempt leaves a
durable trace, and the offset moves on.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence

from runplane.errors import WireError
from runplane.kafka.handler import Emit, Incoming, State
from runplane.wire import (
    ClaimTask,
    CloseTask,
    DecideTask,
    DecisionOutcome,
    ExpireTask,
    OpenTask,
    ReleaseTask,
    TaskRecord,
)
from services.worklist import metrics
from services.worklist.access import ACTIVE, Policy, TaskChange
from services.worklist.decide import (
    Command,
    decide,
    due_for_expiry,
    lapse_claim,
    next_due_ms,
    op_of,
)
from services.worklist.topology import TABLE, TABLES

__all__ = ["COMMAND_TYPES", "WorklistHandler", "emits_for"]

COMMAND_TYPES = (OpenTask, ClaimTask, ReleaseTask, DecideTask, ExpireTask, CloseTask)
_EXPIRY_OUTCOMES = frozenset(
    {DecisionOutcome.EXPIRED_PROCEEDED, DecisionOutcome.EXPIRED_FAILED, DecisionOutcome.ESCALATED}
)


def emits_for(task_id: str, change: TaskChange) -> list[Emit]:
    """The records a task change writes: the task's new version, then the run's decision."""
    emits: list[Emit] = []
    if change.task is not None:
        emits.append(Emit(TABLE, task_id, change.task))
    if change.decision is not None:
        # The decision continues the run's trace (the context its step stored in the task).
        trace = change.task.task.trace_parent if change.task is not None else None
        emits.append(
            Emit("runs.inbox", change.decision.session_id, change.decision, trace_parent=trace)
        )
    return emits


class WorklistHandler:
    """The processor handler of the worklist (``tables``: the ``tasks`` table)."""

    tables: Mapping[str, str] = TABLES

    def __init__(self, policy: Policy, gauge_every_ms: int = 5_000) -> None:
        self._policy = policy
        self._gauge_every_ms = gauge_every_ms
        self._last_gauge = -gauge_every_ms
        self._roles_seen: set[str] = set()
        # Active tasks only (see the module docstring): task id -> role, and task id -> the
        # next instant the tick must look at it. ``_stale``: rebuild from the table first.
        self._active: dict[str, str] = {}
        self._due: dict[str, int] = {}
        self._stale = True

    # --- the active index ------------------------------------------------------------------

    def _track(self, task_id: str, record: TaskRecord | None) -> None:
        if record is None or record.status not in ACTIVE:
            self._active.pop(task_id, None)
            self._due.pop(task_id, None)
            return
        self._active[task_id] = record.task.role
        due = next_due_ms(record, self._policy)
        if due is None:
            self._due.pop(task_id, None)
        else:
            self._due[task_id] = due

    def _rebuild(self, state: State) -> None:
        self._active.clear()
        self._due.clear()
        for task_id, row in state.items(TABLE):
            if isinstance(row, TaskRecord) and row.status in ACTIVE:
                self._track(task_id, row)
        self._stale = False

    def on_assign(self, partitions: Sequence[int]) -> None:
        self._stale = True  # restored rows arrived without passing through the handler

    def on_revoke(self, partitions: Sequence[int]) -> None:
        self._stale = True

    def on_abort(self) -> None:
        self._stale = True  # what was tracked from the aborted batch never happened

    def due_count(self) -> int:
        """How many tasks the tick is watching (tests, benchmarks)."""
        return len(self._due)

    # --- commands --------------------------------------------------------------------------

    def handle(self, state: State, msg: Incoming, now_ms: int) -> Sequence[Emit]:
        command = msg.value
        if command is None:
            return []  # a tombstone on a command topic asks for nothing
        if not isinstance(command, COMMAND_TYPES):
            raise WireError(f"{type(command).__name__} is not a task command")
        if command.task_id != msg.key:
            # The table is partitioned by key: a command filed under another key would be
            # applied to the wrong partition's copy of the task.
            raise WireError(f"record key {msg.key!r} is not its task_id {command.task_id!r}")
        return self._apply(state, command, now_ms)

    def _apply(self, state: State, command: Command, now_ms: int) -> list[Emit]:
        current = state.get(TABLE, command.task_id)
        if current is not None and not isinstance(current, TaskRecord):
            raise WireError(f"table row for {command.task_id!r} is not a TaskRecord")
        change = decide(current, command, now_ms, self._policy)
        metrics.COMMANDS.labels(op_of(command), change.result).inc()
        if change.refused is not None:
            raise WireError(f"{op_of(command)} refused ({change.refused}): {change.reason}")
        self._observe(change, now_ms)
        if change.task is not None:
            self._track(command.task_id, change.task)
        return emits_for(command.task_id, change)

    @staticmethod
    def _observe(change: TaskChange, now_ms: int) -> None:
        decision = change.decision
        if decision is None or change.task is None:
            return
        if decision.outcome in _EXPIRY_OUTCOMES:
            metrics.EXPIRIES.labels(str(decision.outcome)).inc()
        if decision.outcome is not DecisionOutcome.ESCALATED:
            waited = max(0, now_ms - change.task.task.opened_ms) / 1000
            metrics.DECISION_SECONDS.labels(str(decision.outcome)).observe(waited)

    def tick(self, state: State, now_ms: int) -> Sequence[Emit]:
        """Expire due tasks and lapse overdue claims (their records and decisions commit in
        the tick's transaction). Walks only the active tasks that have something due."""
        if self._stale:
            self._rebuild(state)
        self._refresh_gauge(state)
        emits: list[Emit] = []
        for task_id, due in list(self._due.items()):
            if due > now_ms:
                continue
            row = state.get(TABLE, task_id)
            if not isinstance(row, TaskRecord) or row.status not in ACTIVE:
                self._track(task_id, None)  # gone or final since it was indexed
                continue
            emits.extend(self._due_now(state, task_id, row, now_ms))
        return emits

    def _due_now(self, state: State, task_id: str, row: TaskRecord, now_ms: int) -> list[Emit]:
        if due_for_expiry(row, now_ms):
            try:
                return self._apply(state, ExpireTask(task_id=task_id, at_ms=now_ms), now_ms)
            except WireError:
                self._track(task_id, row)
                return []
        change = lapse_claim(row, now_ms, self._policy)
        if change.task is None:
            self._track(task_id, row)  # indexed from an older version: re-read when it is due
            return []
        metrics.COMMANDS.labels("lapse", change.result).inc()
        self._track(task_id, change.task)
        return emits_for(task_id, change)

    def _refresh_gauge(self, state: State) -> None:
        mono = int(time.monotonic() * 1000)
        if mono - self._last_gauge < self._gauge_every_ms:
            return
        self._last_gauge = mono
        # The index, checked against the table (drops what another handler's state holds in
        # tests, or a version that never committed).
        for task_id in list(self._active):
            row = state.get(TABLE, task_id)
            self._track(task_id, row if isinstance(row, TaskRecord) else None)
        counts = Counter(self._active.values())
        # Roles that dropped to zero must read 0, not keep their last value.
        for role in self._roles_seen | set(counts):
            metrics.TASKS_OPEN.labels(role).set(counts.get(role, 0))
        self._roles_seen |= set(counts)
