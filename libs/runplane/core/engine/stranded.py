"""A stranded run: no deployed version of its line can serve it (``runplane.core.versions``).

Such a run is neither failed nor forgotten. The executor owning its partition *parks* it:
RUN_PARKED (``parked_on version:<v>``) is journaled, so ``runplane runs show``, the runs UI
and ``runplane agents list`` say why it does not move, and its snapshot becomes PARKED with
``stranded_json`` keeping the status and timer it had. Inbox records that arrive for it
meanwhile are *held* in the snapshot, raw (``held_json``), in arrival order — nothing is
dead-lettered, nothing is applied. When an executor hosting its line takes the partition (or
the next record arrives there) the run is *released*: the status and timer come back, a
record restates what it waits for (RUN_PARKED, or RUN_RESUMED when it was running), and the
held records are served in order before anything newer.

While stranded the run is out of reach of everything but that gate: PARKED is never rebuilt
on restore and without its timer (``timeouts.TIMER``) no timer fires, so no runtime can write a snapshot that
forgets what is held. Pure: snapshots in, steps and snapshots out.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace

from runplane.core.canonical import canonical_json
from runplane.core.chain import Draft, seal
from runplane.core.engine.step import Step, snapshot_at_start
from runplane.core.engine.timeouts import TIMER
from runplane.core.limits import Limits
from runplane.wire import (
    DeadLetter,
    JournalKind,
    JournalRecord,
    ParkKind,
    RunStatus,
    SessionSnapshot,
    StartRun,
)

__all__ = [
    "Stranded",
    "held_of",
    "hold",
    "park_stranded",
    "release_stranded",
    "strand_unstarted",
    "stranded_of",
]

# How the engine names a wait in RUN_PARKED's ``parked_on`` (engine/signals, approvals, …).
_PARK_PREFIX = {
    ParkKind.TASK: "task",
    ParkKind.OPERATOR: "task",
    ParkKind.SIGNAL: "signal",
    ParkKind.CASE_REPLY: "case",
    ParkKind.WAKE: "timer",
}
_MAX_REASON = 500


@dataclass(frozen=True)
class Stranded:
    """What ``SessionSnapshot.stranded_json`` holds: the version the run waits for, and the
    status and timer it had before it was parked on it. ``unstarted``: its StartRun is what is
    held — nothing of the run is journaled past admission's seq 0."""

    version: str
    status: RunStatus
    wake_at_ms: int | None
    unstarted: bool = False

    def __post_init__(self) -> None:
        if not self.version:
            raise ValueError("a stranded run names the version it waits for")

    def to_json(self) -> str:
        data: dict[str, object] = {
            "version": self.version,
            "status": str(self.status),
            "wake_at_ms": self.wake_at_ms,
        }
        if self.unstarted:
            data["unstarted"] = True
        return canonical_json(data)

    @classmethod
    def from_json(cls, text: str) -> Stranded:
        data = json.loads(text)
        return cls(
            str(data["version"]),
            RunStatus(data["status"]),
            data.get("wake_at_ms"),
            bool(data.get("unstarted", False)),
        )


def stranded_of(snapshot: SessionSnapshot) -> Stranded | None:
    return None if snapshot.stranded_json is None else Stranded.from_json(snapshot.stranded_json)


def held_of(snapshot: SessionSnapshot) -> tuple[DeadLetter, ...]:
    """The inbox records held for a stranded run, in arrival order (each with its source
    coordinates, raw key and value: the DeadLetter shape, though it is not one)."""
    if snapshot.held_json is None:
        return ()
    return tuple(
        DeadLetter(
            source_topic=h["topic"],
            partition=h["partition"],
            offset=h["offset"],
            service="executor",
            reason=h["reason"],
            key=_unb64(h["key"]),
            value=_unb64(h["value"]),
            at_ms=h["at_ms"],
        )
        for h in json.loads(snapshot.held_json)
    )


def can_hold(snapshot: SessionSnapshot, raw_bytes: int, limits: Limits) -> bool:
    """Whether one more inbox record of ``raw_bytes`` (key and value) may be held for
    ``snapshot``'s stranded run. Held records ride in its snapshot, one Kafka message, so the
    run's buffered-signal limits bound them: their count, and their bytes as base64 in
    ``held_json``; past either the executor dead-letters the record with the reason."""
    grown = len(snapshot.held_json or "") + (raw_bytes * 4) // 3 + _HELD_FRAMING
    return (
        len(held_of(snapshot)) < limits.max_buffered_signals and grown <= limits.max_buffered_bytes
    )


_HELD_FRAMING = 200  # a held entry's JSON around its base64 key and value


def _held_json(letters: Iterable[DeadLetter]) -> str | None:
    # JSON with base64, as the snapshot's other *_json fields: a snapshot stays exportable
    # as JSON (runplane journal export), which raw bytes would not be.
    held = [
        {
            "topic": h.source_topic,
            "partition": h.partition,
            "offset": h.offset,
            "reason": h.reason,
            "key": _b64(h.key),
            "value": _b64(h.value),
            "at_ms": h.at_ms,
        }
        for h in letters
    ]
    return canonical_json(held) if held else None


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def park_stranded(
    snapshot: SessionSnapshot,
    version: str,
    why: str,
    *,
    now_ms: int,
    held: tuple[DeadLetter, ...] = (),
) -> Step:
    """Park a run that no deployed version can serve: RUN_PARKED (``parked_on
    version:<version>``, ``reason`` ``why``) after ``snapshot``, and the snapshot PARKED,
    timer off, with ``held`` records kept. ``ValueError`` for a run already stranded (its
    park is journaled once: later records are only held)."""
    if snapshot.stranded_json is not None:
        raise ValueError(f"run {snapshot.session_id} is already parked on its version")
    attrs = {"parked_on": f"version:{version}", "reason": why[:_MAX_REASON]}
    if snapshot.parked_on is not None:
        attrs["waits_for"] = _wait_name(snapshot)  # still its wait, once it is served again
    stranded = Stranded(version, snapshot.status, TIMER.read(snapshot))
    parked = replace(
        TIMER.into(snapshot, None),
        status=RunStatus.PARKED,
        stranded_json=stranded.to_json(),
        held_json=_held_json((*held_of(snapshot), *held)),
    )
    return _appended(parked, JournalKind.RUN_PARKED, attrs, now_ms)


def strand_unstarted(
    start: StartRun, version: str, letter: DeadLetter, *, now_ms: int
) -> SessionSnapshot:
    """A run whose (pinned) StartRun no deployed version serves: a PARKED snapshot holding
    that StartRun, at the chain's handover (next seq 1 after admission's RUN_ADMITTED).
    Nothing is journaled — seq 1 is the runtime's to write when the StartRun is served — so
    the run index shows it admitted; ``agents list`` counts it parked."""
    stranded = Stranded(version, RunStatus.ADMITTED, None, unstarted=True)
    return snapshot_at_start(
        start,
        status=RunStatus.PARKED,
        next_seq=1,
        last_hash=start.admitted_hash,
        now_ms=now_ms,
        stranded_json=stranded.to_json(),
        held_json=_held_json((letter,)),
        delegation_json=start.delegation_json,  # a commissioned child stays bounded meanwhile
    )


def hold(snapshot: SessionSnapshot, letter: DeadLetter) -> SessionSnapshot:
    """A stranded run's snapshot with one more inbox record held (journaled: nothing — the
    record is not applied yet; it is when the run is released)."""
    if snapshot.stranded_json is None:
        raise ValueError(f"run {snapshot.session_id} is not stranded: serve the record")
    return replace(snapshot, held_json=_held_json((*held_of(snapshot), letter)))


def release_stranded(snapshot: SessionSnapshot, served_by: str, *, now_ms: int) -> Step:
    """A version of the run's line (``served_by``) is deployed: the status and timer it had
    come back, and a record restates where it is — RUN_PARKED on its wait again (so the run
    index shows it waiting for its person, not for a version), or RUN_RESUMED when it had no
    wait. The snapshot holds nothing any more: the caller serves ``held_of(snapshot)`` next, in
    order, before anything else — in the same commit, so a crash loses neither."""
    stranded = stranded_of(snapshot)
    if stranded is None or stranded.unstarted:
        raise ValueError(f"run {snapshot.session_id} is not a started run parked on its version")
    attrs = {"reason": "version_deployed", "version": served_by, "was_parked_on": stranded.version}
    kind = JournalKind.RUN_RESUMED
    if snapshot.parked_on is not None:
        kind = JournalKind.RUN_PARKED
        attrs["parked_on"] = _wait_name(snapshot)
        if snapshot.parked_on.kind in (ParkKind.TASK, ParkKind.OPERATOR):
            attrs["task_id"] = snapshot.parked_on.ref
    released = replace(
        TIMER.into(snapshot, stranded.wake_at_ms),
        status=stranded.status,
        stranded_json=None,
        held_json=None,
    )
    return _appended(released, kind, attrs, now_ms)


def _wait_name(snapshot: SessionSnapshot) -> str:
    parked = snapshot.parked_on
    assert parked is not None
    return f"{_PARK_PREFIX[parked.kind]}:{parked.ref}"


def _appended(
    snapshot: SessionSnapshot, kind: JournalKind, attrs: dict[str, str], now_ms: int
) -> Step:
    """One record sealed at ``snapshot``'s chain tip, and the snapshot moved past it."""
    draft = Draft(snapshot.session_id, snapshot.next_seq, snapshot.era, kind, now_ms, attrs=attrs)
    record = seal(draft, snapshot.last_hash)
    after = replace(
        snapshot, next_seq=snapshot.next_seq + 1, last_hash=record.hash, updated_ms=now_ms
    )
    return _step(record, after)


def _step(record: JournalRecord, snapshot: SessionSnapshot) -> Step:
    """A step built around a snapshot (as ``ends.fail_from_snapshot`` does): one record, the
    snapshot written with it, nothing else."""
    return Step(
        records=(record,),
        results=(),
        commands=(),
        live_calls=(),
        _state=snapshot,
        parked_on=snapshot.parked_on,
        end=None,
        replayed=0,
    )
