"""The queue service, the pure part: one command on a queue's record in, the new record and
the StartRuns to send out.

The rules are ``runplane.core.queues`` (``arrive``, ``end``, ``tick``); this module moves a
queue between its wire form (``QueueRecord``, a row of the compacted ``queues`` topic, the
waiting runs' StartRuns inside it) and the core's ``QueueState``, so the handler stays a
lookup and an emit. A queue the deployment declares no limits for (``QueueLimits()``) starts
every run at once: a policy that names a queue in admission's copy and not in the queue
service's loses no run (docs/decisions.md 33).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runplane.core.queues import QueueDecision, QueueEntry, QueueLimits, QueueState
from runplane.core.queues import arrive as core_arrive
from runplane.core.queues import end as core_end
from runplane.core.queues import tick as core_tick
from runplane.wire import EnterQueue, LeaveQueue, QueueRecord, StartRun, TenantId
from runplane.wire import QueueEntry as WireEntry

__all__ = ["Outcome", "apply", "from_record", "tick", "to_record"]

QueueCommand = EnterQueue | LeaveQueue


@dataclass(frozen=True)
class Outcome:
    """What one input did: the queue's new record (None: unchanged), the StartRuns to send,
    in order, and the core's outcome word (a metric label, a test's assertion)."""

    record: QueueRecord | None
    starts: tuple[StartRun, ...]
    outcome: str


def from_record(record: QueueRecord | None) -> tuple[QueueState, dict[str, StartRun]]:
    """The core's state of a queue's row, and the StartRuns of its waiting runs by run id."""
    if record is None:
        return QueueState(), {}
    starts = {e.run_id: e.start for e in record.waiting if e.start is not None}
    state = QueueState(
        running=tuple(_core(e) for e in record.running),
        waiting=tuple(_core(e) for e in record.waiting),
        next_arrival=record.next_arrival,
        tokens_milli=record.tokens_milli,
        refilled_ms=record.refilled_ms,
        ended=tuple(record.ended),
    )
    return state, starts


def to_record(
    queue: str, state: QueueState, starts: Mapping[str, StartRun], now_ms: int
) -> QueueRecord:
    """A queue's row: its waiting runs carry their StartRuns, its running ones do not."""
    return QueueRecord(
        queue=queue,
        running=tuple(_wire(e, None) for e in state.running),
        waiting=tuple(_wire(e, starts.get(e.run_id)) for e in state.waiting),
        next_arrival=state.next_arrival,
        tokens_milli=state.tokens_milli,
        refilled_ms=state.refilled_ms,
        ended=state.ended,
        updated_ms=now_ms,
    )


def apply(
    record: QueueRecord | None, command: QueueCommand, limits: QueueLimits, now_ms: int
) -> Outcome:
    """One command on a queue: a run arrives (EnterQueue) or ends (LeaveQueue)."""
    state, starts = from_record(record)
    if isinstance(command, EnterQueue):
        start = command.start
        starts = {**starts, start.session_id: start}
        d = core_arrive(state, limits, start.session_id, start.tenant, command.priority, now_ms)
    else:
        d = core_end(state, limits, command.run_id, now_ms)
    return _outcome(command.queue, d, starts, now_ms)


def tick(record: QueueRecord, limits: QueueLimits, now_ms: int) -> Outcome:
    """Time passed: the runs the rate limit now allows start."""
    state, starts = from_record(record)
    return _outcome(record.queue, core_tick(state, limits, now_ms), starts, now_ms)


def _outcome(queue: str, d: QueueDecision, starts: Mapping[str, StartRun], now_ms: int) -> Outcome:
    if d.outcome == "duplicate" or (d.outcome == "ticked" and not d.start):
        return Outcome(None, (), d.outcome)  # nothing changed: no row is rewritten
    sent = tuple(starts[e.run_id] for e in d.start)
    return Outcome(to_record(queue, d.state, starts, now_ms), sent, d.outcome)


def _core(e: WireEntry) -> QueueEntry:
    return QueueEntry(e.run_id, e.tenant, e.priority, e.arrival)


def _wire(e: QueueEntry, start: StartRun | None) -> WireEntry:
    return WireEntry(
        run_id=e.run_id,
        tenant=TenantId(e.tenant),
        priority=e.priority,
        arrival=e.arrival,
        start=start,
    )
