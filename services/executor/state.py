"""The run table: what the executor knows about the runs of the partitions it owns, and how
it gets it back.

``RunTable`` holds the owned partitions (``PartitionState``: snapshots, result journals, ended
runs), the runtimes kept in memory (``Resident``), the queue of RUNNING runs an assignment
found and the loop rebuilds a few per turn, and every read of the two tables. On assignment
the executor reads the compacted ``sessions`` and ``results`` topics for its
partitions to the end (the last stable offset under read_committed) before it serves a single
inbox message: the snapshot says where each run is, the result journal is what replay serves.
Runs that already ended keep only their id and final status (``PartitionState.ended``): no
snapshot, no results — nothing replays them — so memory follows the live runs, not the
history. (Their result journal stays on ``results``: it holds the bodies auditors read.)
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from runplane.core import Runtime
from runplane.core.repair import RETENTION, RepairRefused, erased, scrub
from runplane.errors import ChainError, WireError
from runplane.kafka.loop import TxnLoop
from runplane.kafka.partition import partition_for
from runplane.kafka.restore import Restorer
from runplane.wire import ResultEntry, RunStatus, Serde, SessionSnapshot
from services.executor.metrics import ExecutorMetrics
from services.executor.timerindex import TimedSessions

ENDED = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED})
WAITING = frozenset({RunStatus.AWAITING_HUMAN, RunStatus.PARKED})

log = logging.getLogger(__name__)

T = TypeVar("T")
SlotKey = tuple[int, int]  # (era, call_seq)


def results_key(session_id: str, era: int, call_seq: int) -> str:
    """The ``results`` record key (the topic is partitioned by session, not by this key)."""
    return f"{session_id}/{era}/{call_seq}"


@dataclass
class Resident:
    """A run's runtime kept in memory between messages."""

    runtime: Runtime
    partition: int
    last_active: float


@dataclass(frozen=True)
class Expiring:
    """An ended run whose bodies are tombstoned at ``due_ms`` (results retention): its keys,
    and its snapshot already without bodies (``erased``), so waiting costs little memory."""

    due_ms: int
    erased: SessionSnapshot
    slots: tuple[SlotKey, ...]

    @classmethod
    def of(cls, due_ms: int, snapshot: SessionSnapshot, slots: Iterable[SlotKey]) -> Expiring:
        scrubbed = scrub(snapshot, RETENTION, snapshot.updated_ms)
        return cls(due_ms, scrubbed, tuple(sorted(slots)))


class SlotTaken(ChainError):
    """A result entry for a slot (session, era, call_seq) that already holds another call's
    entry (another witness): refused before it is produced. ``results`` is compacted on the
    slot, so writing it would silently replace the body the chain recorded; the run's serving
    fails instead (the executor's poison path: RUN_FAILED with this reason), and the chain
    verifier names any second record of the slot ``duplicate_slot``."""


@dataclass
class PartitionState:
    """Sessions of one owned partition and the result journal of its unfinished runs."""

    # Indexed by when their timers are due (``timerindex``): the timer turn pops what has come.
    sessions: TimedSessions = field(default_factory=TimedSessions)
    results: dict[str, dict[SlotKey, ResultEntry]] = field(default_factory=dict)
    # Runs that ended: enough to refuse a message for one or a second StartRun, nothing more.
    ended: dict[str, RunStatus] = field(default_factory=dict)
    # Ended runs whose bodies the retention will tombstone, soonest first: their result keys
    # only, not the bodies (see ``end``).
    expiring: deque[Expiring] = field(default_factory=deque)
    # Whether the executor has parked (or released) the runs of this partition that its agent
    # versions cannot (or can again) serve, once after the restore (services/executor/versions).
    versions_checked: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.sessions, TimedSessions):  # handed a plain dict: index it
            indexed = TimedSessions()
            for run_id, snapshot in self.sessions.items():
                indexed[run_id] = snapshot
            self.sessions = indexed

    def results_of(self, session_id: str) -> dict[SlotKey, ResultEntry]:
        return self.results.setdefault(session_id, {})

    def forget_results(self, session_id: str) -> None:
        self.results.pop(session_id, None)

    def put_result(self, entry: ResultEntry) -> None:
        """Hold ``entry`` as its slot's result; ``SlotTaken`` when the slot holds another
        call's (another request witness). The same call's entry again is no conflict."""
        results = self.results_of(entry.session_id)
        slot = (entry.era, entry.call_seq)
        held = results.get(slot)
        if held is not None and held.request_witness != entry.request_witness:
            raise SlotTaken(
                f"slot {entry.era}/{entry.call_seq} of run {entry.session_id} holds the result "
                f"of {held.family} {held.name!r} (witness {held.request_witness[:12]}…); "
                f"refused {entry.family} {entry.name!r} (witness {entry.request_witness[:12]}…)"
            )
        results[slot] = entry

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
        same=_same_call,
    )
    for key in sorted(entries.conflicts):
        # Two calls' results under one slot in the log: the newest is held, as compaction
        # would keep it; the chain (duplicate_slot, body_digest_mismatch) names the break.
        log.error("results holds two calls' results for one slot", extra={"key": key})
    out: dict[int, PartitionState] = {}
    for p in wanted:
        state = PartitionState()
        for run_id, snap in snaps.partitions.get(p, {}).items():
            if snap.status in ENDED:
                state.ended[run_id] = snap.status
            else:
                state.sessions[run_id] = snap
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
        Expiring.of(snap.updated_ms + retention_ms, snap, slots[run_id])
        for run_id, snap in snaps.items()
        if run_id in slots and snap.status in ENDED and not erased(snap)
    ]
    return deque(sorted(found, key=lambda e: e.due_ms))


def _same_call(held: ResultEntry, row: ResultEntry) -> bool:
    """Whether a results row may replace the slot's row: the same call (request witness)."""
    return held.request_witness == row.request_witness


def _as(cls: type[T], record: object) -> T:
    if not isinstance(record, cls):
        raise WireError(f"expected {cls.__name__}, got {type(record).__name__}")
    return record


class RunTable:
    """The runs of the partitions this executor owns, their resident runtimes, and the reads
    of the ``sessions`` and ``results`` tables that bring them back.

    ``parts``, ``residents`` and ``to_rebuild`` are read directly by the loop and its
    collaborators (the hot path reads them once per message); what changes several of them
    together is a method here."""

    def __init__(
        self,
        loop: TxnLoop,
        serde: Serde,
        topics: Mapping[str, str],
        *,
        partitions: int,
        retention_ms: int | None,
        wall_ms: Callable[[], int],
        metrics: ExecutorMetrics,
    ) -> None:
        self._loop = loop  # for its restorer, which exists once the loop started
        self._serde = serde
        self._sessions_topic = topics["sessions"]
        self._results_topic = topics["results"]
        self._retention_ms = retention_ms
        self._wall_ms = wall_ms
        self._metrics = metrics
        self.parts: dict[int, PartitionState] = {}
        self.residents: dict[str, Resident] = {}
        # RUNNING runs an assignment found, rebuilt by the loop a few per turn (``restore``).
        self.to_rebuild: deque[tuple[str, int]] = deque()
        # The input topic's partition count (read from its metadata at start): what
        # ``partition_for`` needs to place a run.
        self.partitions = partitions

    def partition_of(self, session_id: str) -> int:
        return partition_for(session_id, self.partitions)

    # ------------------------------------------------------------------ assignment
    def restore(self, numbers: list[int], deadline: float) -> None:
        """Read both tables of the assigned partitions to the end (with the ended runs the
        retention will expire) and queue their RUNNING runs for rebuilding.

        Rebuilt by the loop after this returns, a few per turn — not here: a rebalance
        callback that replays every run of its partitions counts against
        max.poll.interval.ms. A message for one of them meanwhile rebuilds it on demand."""
        self.parts.update(
            restore_partitions(
                self._loop.restorer,
                self._serde,
                self._sessions_topic,
                self._results_topic,
                numbers,
                deadline=deadline,
                retention_ms=self._retention_ms,
            )
        )
        for p in numbers:
            for run_id, snap in self.parts[p].sessions.items():
                if snap.status is RunStatus.RUNNING:
                    self.to_rebuild.append((run_id, p))

    def drop(self, numbers: set[int]) -> None:
        """Forget the partitions ``numbers`` (revoked, or void after an abort)."""
        for run_id, res in list(self.residents.items()):
            if res.partition in numbers:
                res.runtime.close()
                del self.residents[run_id]
        for p in numbers:
            self.parts.pop(p, None)

    def close(self) -> None:
        for res in self.residents.values():
            res.runtime.close()
        self.residents.clear()

    # ------------------------------------------------------------------ residents
    def evict(self, session_id: str) -> None:
        """Close the run's runtime, if resident; its snapshot stays (it is rebuilt on demand)."""
        res = self.residents.pop(session_id, None)
        if res is not None:
            res.runtime.close()

    def evict_idle(self, now: float, grace_s: float) -> int:
        """Evict the residents the engine says may leave memory after ``grace_s`` idle."""
        evicted = 0
        for run_id, res in list(self.residents.items()):
            if res.runtime.evictable(now - res.last_active, grace_s):
                res.runtime.close()
                del self.residents[run_id]
                evicted += 1
        return evicted

    def census(self) -> tuple[int, int, int]:
        """(resident, parked, evicted) live runs: in memory, waiting on the outside world,
        and neither (rebuilt when a message comes)."""
        parked = evicted = 0
        for part in self.parts.values():
            for run_id, snap in part.sessions.items():
                if snap.status in ENDED or run_id in self.residents:
                    continue
                if snap.status in WAITING:
                    parked += 1
                else:
                    evicted += 1
        return len(self.residents), parked, evicted

    # ------------------------------------------------------------------ ends and reads
    def end(self, session_id: str, status: RunStatus) -> None:
        """The run ended (its final snapshot was just put): keep its id and status only; with
        results retention, its bodies are tombstoned after ``retention_ms``."""
        self._metrics.runs_ended.labels(str(status).lower()).inc()
        self.evict(session_id)
        part = self.parts.get(self.partition_of(session_id))
        if part is not None:
            ms = self._retention_ms
            until = None if ms is None else self._wall_ms() + ms
            final = part.sessions.get(session_id)
            part.end(session_id, status, snapshot=final, retain_until_ms=until)

    def read_run(
        self, session_id: str, p: int
    ) -> tuple[SessionSnapshot | None, dict[SlotKey, ResultEntry]]:
        """The run's latest snapshot and its result journal, read from the tables (a whole
        partition read: for a repair order, rare). ``RepairRefused`` when one of its bodies
        is unreadable: never replay without it, the call would be made again."""
        restorer = self._loop.restorer
        snaps = restorer.restore(
            self._sessions_topic, [p], lambda data: self._serde.decode("sessions", data)
        ).partitions.get(p, {})
        snap = snaps.get(session_id)
        prefix = f"{session_id}/"
        # Kept as bytes: only this run's rows are decoded, not the whole partition's.
        rows = restorer.restore(self._results_topic, [p], bytes).partitions
        results: dict[SlotKey, ResultEntry] = {}
        for key, data in rows.get(p, {}).items():
            if not key.startswith(prefix):
                continue
            try:
                entry = self._serde.decode("results", data)
            except WireError as exc:
                raise RepairRefused(f"its body at {key} is unreadable: {exc}") from exc
            if isinstance(entry, ResultEntry):
                results[(entry.era, entry.call_seq)] = entry
        return (snap if isinstance(snap, SessionSnapshot) else None), results
