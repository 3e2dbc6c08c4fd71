"""What the executor knows about the runs of the partitions it owns, and how it gets it back.

On assignment the executor reads the compacted ``sessions`` and ``results`` topics for its
partitions to the end (the last stable offset under read_committed) before it serves a single
inbox message: the snapshot says where each run is, the result journal is what replay serves.
Runs that already ended keep only their id and final status (``PartitionState.ended``): no
snapshot, no results — nothing replays them — so memory follows the live runs, not the
history. (Their result journal stays on ``results``: it holds the bodies auditors read.)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from runplane.errors import WireError
from runplane.kafka.restore import Restorer
from runplane.wire import ResultEntry, RunStatus, Serde, SessionSnapshot

ENDED = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED})
WAITING = frozenset({RunStatus.AWAITING_HUMAN, RunStatus.PARKED})

T = TypeVar("T")
SlotKey = tuple[int, int]  # (era, call_seq)


def results_key(session_id: str, era: int, call_seq: int) -> str:
    """The ``results`` record key (the topic is partitioned by session, not by this key)."""
    return f"{session_id}/{era}/{call_seq}"


@dataclass
class PartitionState:
    """Sessions of one owned partition and the result journal of its unfinished runs."""

    sessions: dict[str, SessionSnapshot] = field(default_factory=dict)
    results: dict[str, dict[SlotKey, ResultEntry]] = field(default_factory=dict)
    # Runs that ended: enough to refuse a message for one or a second StartRun, nothing more.
    ended: dict[str, RunStatus] = field(default_factory=dict)

    def results_of(self, session_id: str) -> dict[SlotKey, ResultEntry]:
        return self.results.setdefault(session_id, {})

    def forget_results(self, session_id: str) -> None:
        self.results.pop(session_id, None)

    def end(self, session_id: str, status: RunStatus) -> None:
        """The run ended: keep its id and status, drop its snapshot and results."""
        self.sessions.pop(session_id, None)
        self.results.pop(session_id, None)
        self.ended[session_id] = status


def restore_partitions(
    restorer: Restorer,
    serde: Serde,
    sessions_topic: str,
    results_topic: str,
    partitions: Iterable[int],
    *,
    deadline: float | None = None,
) -> dict[int, PartitionState]:
    """Read both tables of ``partitions`` to the end (by ``deadline``, ``time.monotonic()``,
    for both together); runs that ended keep no results."""
    wanted = sorted(set(partitions))
    snaps = restorer.restore(
        sessions_topic,
        wanted,
        lambda data: _as(SessionSnapshot, serde.decode("sessions", data)),
        deadline=deadline,
    )
    entries = restorer.restore(
        results_topic,
        wanted,
        lambda data: _as(ResultEntry, serde.decode("results", data)),
        deadline=deadline,
    )
    out: dict[int, PartitionState] = {}
    for p in wanted:
        state = PartitionState()
        for sid, snap in snaps.partitions.get(p, {}).items():
            if snap.status in ENDED:
                state.ended[sid] = snap.status
            else:
                state.sessions[sid] = snap
        for entry in entries.partitions.get(p, {}).values():
            if entry.session_id in state.sessions:
                state.results_of(entry.session_id)[(entry.era, entry.call_seq)] = entry
        out[p] = state
    return out


def _as(cls: type[T], record: object) -> T:
    if not isinstance(record, cls):
        raise WireError(f"expected {cls.__name__}, got {type(record).__name__}")
    return record
