"""The queue service's processor handler: one queue command in, the queue's row and the
StartRuns of the runs whose turn came out.

Pure: ``handle`` reads the queue from the restored ``queues`` table, applies the command
with :func:`services.queues.decide.apply` and returns the emits the shared transactional
processor commits with the input offset — the new QueueRecord on ``queues`` and one StartRun
per started run on ``runs.inbox`` — so a run is released exactly once: the row that says it
runs and its StartRun are one transaction. ``tick`` lets the rate limit's bucket refill: every
queue of the owned partitions with runs waiting is ticked at the processor's time.

A command whose key is not its queue, or a record that is not a queue command, is bad
input: ``WireError`` → the processor dead-letters it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runplane.core.queues import QueueLimits
from runplane.errors import WireError
from runplane.kafka.handler import Emit, Incoming, State
from runplane.wire import EnterQueue, LeaveQueue, QueueRecord
from services.queues.decide import Outcome, apply, tick
from services.queues.topology import TABLE, TABLES

__all__ = ["QueuesHandler"]

_UNLIMITED = QueueLimits()


class QueuesHandler:
    """The processor handler of the queue service (``tables``: the ``queues`` table)."""

    tables: Mapping[str, str] = TABLES

    def __init__(self, limits: Mapping[str, QueueLimits]) -> None:
        self._limits = dict(limits)

    def limits(self, queue: str) -> QueueLimits:
        return self._limits.get(queue, _UNLIMITED)

    def handle(self, state: State, msg: Incoming, now_ms: int) -> Sequence[Emit]:
        command = msg.value
        if command is None:
            return []  # a tombstone on a command topic asks for nothing
        if not isinstance(command, EnterQueue | LeaveQueue):
            raise WireError(f"{type(command).__name__} is not a queue command")
        if command.queue != msg.key:
            # The table is partitioned by key: a command filed under another key would be
            # applied to the wrong partition's copy of the queue.
            raise WireError(f"record key {msg.key!r} is not its queue {command.queue!r}")
        record = state.get(TABLE, command.queue)
        if record is not None and not isinstance(record, QueueRecord):
            raise WireError(f"table row for {command.queue!r} is not a QueueRecord")
        return _emits(apply(record, command, self.limits(command.queue), now_ms))

    def tick(self, state: State, now_ms: int) -> Sequence[Emit]:
        emits: list[Emit] = []
        for queue, record in list(state.items(TABLE)):
            if isinstance(record, QueueRecord) and record.waiting:
                emits.extend(_emits(tick(record, self.limits(queue), now_ms)))
        return emits


def _emits(outcome: Outcome) -> list[Emit]:
    if outcome.record is None:
        return []
    starts = [Emit("runs.inbox", s.session_id, s) for s in outcome.starts]
    return [Emit(TABLE, outcome.record.queue, outcome.record), *starts]
