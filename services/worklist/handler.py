"""The worklist's processor handler: the single writer of the compacted ``tasks`` topic.

``handle`` reads the task from the restored ``tasks`` table, folds the command in with
:func:`services.worklist.decide.decide`, and returns what the shared transactional processor
commits together with the input offset: the new TaskRecord on ``tasks`` and, when the task was
decided, expired or escalated, the TaskDecision on ``runs.inbox`` (key = the run's session).
``tick`` expires due tasks the same way, in a transaction of its own.

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
from runplane.kafka.processor import Emit, Incoming, State
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
from services.worklist.decide import ACTIVE, Command, Policy, Verdict, decide, due_for_expiry, op_of
from services.worklist.topology import TABLE, TABLES

__all__ = ["COMMAND_TYPES", "WorklistHandler", "emits_for"]

COMMAND_TYPES = (OpenTask, ClaimTask, ReleaseTask, DecideTask, ExpireTask, CloseTask)
_EXPIRY_OUTCOMES = frozenset(
    {DecisionOutcome.EXPIRED_PROCEEDED, DecisionOutcome.EXPIRED_FAILED, DecisionOutcome.ESCALATED}
)


def emits_for(task_id: str, verdict: Verdict) -> list[Emit]:
    """The records a verdict writes: the task's new version, then the run's decision."""
    emits: list[Emit] = []
    if verdict.task is not None:
        emits.append(Emit(TABLE, task_id, verdict.task))
    if verdict.decision is not None:
        emits.append(Emit("runs.inbox", verdict.decision.session_id, verdict.decision))
    return emits


class WorklistHandler:
    """The processor handler of the worklist (``tables``: the ``tasks`` table)."""

    tables: Mapping[str, str] = TABLES

    def __init__(self, policy: Policy, gauge_every_ms: int = 5_000) -> None:
        self._policy = policy
        self._gauge_every_ms = gauge_every_ms
        self._last_gauge = -gauge_every_ms
        self._roles_seen: set[str] = set()

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
        verdict = decide(current, command, now_ms, self._policy)
        metrics.COMMANDS.labels(op_of(command), verdict.result).inc()
        if verdict.refused is not None:
            raise WireError(f"{op_of(command)} refused ({verdict.refused}): {verdict.reason}")
        self._observe(verdict, now_ms)
        return emits_for(command.task_id, verdict)

    @staticmethod
    def _observe(verdict: Verdict, now_ms: int) -> None:
        decision = verdict.decision
        if decision is None or verdict.task is None:
            return
        if decision.outcome in _EXPIRY_OUTCOMES:
            metrics.EXPIRIES.labels(str(decision.outcome)).inc()
        if decision.outcome is not DecisionOutcome.ESCALATED:
            waited = max(0, now_ms - verdict.task.task.opened_ms) / 1000
            metrics.DECISION_SECONDS.labels(str(decision.outcome)).observe(waited)

    def tick(self, state: State, now_ms: int) -> Sequence[Emit]:
        """Expire due tasks (their records and decisions commit in the tick's transaction)."""
        emits: list[Emit] = []
        for task_id, row in list(state.items(TABLE)):
            if isinstance(row, TaskRecord) and due_for_expiry(row, now_ms):
                try:
                    emits.extend(
                        self._apply(state, ExpireTask(task_id=task_id, at_ms=now_ms), now_ms)
                    )
                except WireError:
                    continue  # not expirable after all (e.g. no expiry): nothing to write
        self._refresh_gauge(state)
        return emits

    def _refresh_gauge(self, state: State) -> None:
        mono = int(time.monotonic() * 1000)
        if mono - self._last_gauge < self._gauge_every_ms:
            return
        self._last_gauge = mono
        counts = Counter(
            row.task.role
            for _, row in state.items(TABLE)
            if isinstance(row, TaskRecord) and row.status in ACTIVE
        )
        # Roles that dropped to zero must read 0, not keep their last value.
        for role in self._roles_seen | set(counts):
            metrics.TASKS_OPEN.labels(role).set(counts.get(role, 0))
        self._roles_seen |= set(counts)
