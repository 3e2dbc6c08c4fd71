"""What the executor knows about the runs of the partitions it owns, and how it gets it back.

On assignment the executor reads the compacted ``sessions`` and ``results`` topics for its
partitions to the end (the last stable offset under read_committed) before it serves a single
inbox message: the snapshot says where each run is, the result journal is what replay serves.
Runs that already ended keep only their id and final status (``PartitionState.ended``): no
snapshot, no results — nothing replays them — so memory follows the live runs, not the
history. (Their result journal stays on ``results``: it holds the bodies auditors read.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from runplane.core.repair import RETENTION, erase, erased
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


@dataclass(frozen=True)
class Expiring:
    """An ended run whose bodies are tombstoned at ``due_ms`` (results retention): its keys,
    and its snapshot already without bodies (``erased``), so waiting costs little memory."""

    due_ms: int
    erased: SessionSnapshot
    slots: tuple[SlotKey, ...]

    @classmethod
    def of(cls, due_ms: int, snapshot: SessionSnapshot, slots: Iterable[SlotKey]) -> Expiring:
        scrubbed = erase(snapshot, RETENTION, snapshot.updated_ms)
        return cls(due_ms, scrubbed, tuple(sorted(slots)))


@dataclass
class PartitionState:
    """Sessions of one owned partition and the result journal of its unfinished runs."""

    sessions: dict[str, SessionSnapshot] = field(default_factory=dict)
    results: dict[str, dict[SlotKey, ResultEntry]] = field(default_factory=dict)
    # Runs that ended: enough to refuse a message for one or a second StartRun, nothing more.
    ended: dict[str, RunStatus] = field(default_factory=dict)
    # Ended runs whose bodies the retention will tombstone, soonest first: their result keys
    # only, not the bodies (see ``end``).
    expiring: deque[Expiring] = field(default_factory=deque)
    # Whether the executor has parked (or released) the runs of this partition that its agent
    # versions cannot (or can again) serve, once after the restore (services/executor/versions).
    versions_checked: bool = False

    def results_of(self, session_id: str) -> dict[SlotKey, ResultEntry]:
        return self.results.setdefault(session_id, {})

    def forget_results(self, session_id: str) -> None:
        self.results.pop(session_id, None)

    def end(
        self,
        session_id: str,
        status: RunStatus,
        *,
        snapshot: SessionSnapshot | None = None,
        retain_until_ms: int | None = None,
    ) -> None:
        """The run ended: keep its id and status, drop its snapshot and results. With
        ``retain_until_ms``, its result keys wait in ``expiring`` to be tombstoned then."""
        self.sessions.pop(session_id, None)
        results = self.results.pop(session_id, None)
        self.ended[session_id] = status
        if snapshot is not None and retain_until_ms is not None and results:
            self.expiring.append(Expiring.of(retain_until_ms, snapshot, results))

    def due(self, now_ms: int, limit: int) -> list[Expiring]:
        """Up to ``limit`` expiring runs due by ``now_ms`` (taken off the queue)."""
        out: list[Expiring] = []
        while self.expiring and self.expiring[0].due_ms <= now_ms and len(out) < limit:
            out.append(self.expiring.popleft())
        return out

    def keep(self, session_id: str) -> None:
        """The run lives again (resumed): nothing of it expires."""
        self.expiring = deque(e for e in self.expiring if e.erased.session_id != session_id)


def restore_partitions(
    restorer: Restorer,
    serde: Serde,
    sessions_topic: str,
    results_topic: str,
    partitions: Iterable[int],
    *,
    deadline: float | None = None,
    retention_ms: int | None = None,
) -> dict[int, PartitionState]:
    """Read both tables of ``partitions`` to the end (by ``deadline``, ``time.monotonic()``,
    for both together); runs that ended keep no results — with ``retention_ms``, the keys of
    their bodies wait in ``expiring`` until ``updated_ms + retention_ms``."""
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
        old: dict[str, list[SlotKey]] = {}
        for entry in entries.partitions.get(p, {}).values():
            if entry.session_id in state.sessions:
                state.results_of(entry.session_id)[(entry.era, entry.call_seq)] = entry
            elif retention_ms is not None:
                old.setdefault(entry.session_id, []).append((entry.era, entry.call_seq))
        state.expiring = _expiring(snaps.partitions.get(p, {}), old, retention_ms)
        out[p] = state
    return out


def _expiring(
    snaps: dict[str, SessionSnapshot],
    slots: dict[str, list[SlotKey]],
    retention_ms: int | None,
) -> deque[Expiring]:
    if retention_ms is None:
        return deque()
    found = [
        Expiring.of(snap.updated_ms + retention_ms, snap, slots[sid])
        for sid, snap in snaps.items()
        if sid in slots and snap.status in ENDED and not erased(snap)
    ]
    return deque(sorted(found, key=lambda e: e.due_ms))


def _as(cls: type[T], record: object) -> T:
    if not isinstance(record, cls):
        raise WireError(f"expected {cls.__name__}, got {type(record).__name__}")
    return record
