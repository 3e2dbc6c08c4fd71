"""Runs no deployed agent version can serve (runplane.core.versions), kept out of the executor.

A run recorded on a version whose line this executor does not host is *parked*, not failed
(``runplane.core.engine.stranded``): RUN_PARKED ``parked_on version:<v>`` is journaled (what
``runplane runs show``, the runs UI and ``agents list`` show), the snapshot goes PARKED, and
inbox records that arrive for it are *held* in the snapshot — in the transaction that commits
their offsets, so none is lost and none is applied. The executor parks its stranded runs as
soon as it has restored a partition (``VersionGate.check``, from the housekeeping turn), not
only when a record arrives, so an operator sees them right after a deploy.

When an executor hosting the line owns the partition, the run is *released* — by that same
check after restore, or by the next record for it, whichever comes first: its status and timer
come back, and the held records are served in arrival order through the ordinary inbox path,
then the record in hand. All of it lands in one group commit: nothing between the release and
the last held record can commit on its own, so a crash redoes the release rather than losing
a held record. Checked before a record is served, so nothing of a held record is applied.

A StartRun pinned to a line this executor does not host (admission checks a pin against what
it knows is deployed, so this is a roll's race) is held too, in a snapshot made for it
(``strand_unstarted``: nothing journaled, seq 1 stays the runtime's); released, it is served
and the run starts on the newest version of its line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import Message

from runplane.core import AgentRegistry, UnknownCapability
from runplane.core.engine import (
    apply_step,
    can_hold,
    held_of,
    hold,
    park_stranded,
    release_stranded,
    strand_unstarted,
    stranded_of,
)
from runplane.core.limits import Limits
from runplane.core.versions import VersionNotDeployed
from runplane.kafka.deadletter import dead_letter
from runplane.kafka.txn import TxnAbortable, TxnFatal
from runplane.wire import DeadLetter, Record, RunStatus, SessionSnapshot, StartRun
from services.executor.ending import RunEnds
from services.executor.metrics import ExecutorMetrics
from services.executor.outbox import Outbox, RunSink
from services.executor.state import ENDED, PartitionState, RunTable
from services.executor.topology import SERVICE

__all__ = ["VersionGate", "not_deployed"]

log = logging.getLogger("services.executor.executor")


def not_deployed(registry: AgentRegistry, run: SessionSnapshot | StartRun) -> str | None:
    """Why no deployed version can serve ``run`` (its line is gone), or None."""
    try:
        registry.spec_for(run.capability, run.agent_version)
    except VersionNotDeployed as exc:
        return f"version_not_deployed: {run.capability} {exc}; the run stays parked"
    except UnknownCapability:
        return None
    return None


def as_message(letter: DeadLetter) -> Message:
    """A held record as the consumer gave it (its coordinates kept, so a dead letter it
    earns when served names where it came from)."""
    return Message(
        topic=letter.source_topic,
        partition=letter.partition,
        offset=letter.offset,
        key=letter.key,
        value=letter.value,
    )


class VersionGate:
    """Parking, holding and releasing stranded runs.

    ``serve`` is the executor's inbox path (``Executor.on_message``): a released run's held
    records go through it in arrival order, exactly as if they arrived now."""

    def __init__(
        self,
        registry: AgentRegistry,
        table: RunTable,
        outbox: Outbox,
        ends: RunEnds,
        *,
        serve: Callable[[Message], None],
        limits: Limits,
        metrics: ExecutorMetrics,
        wall_ms: Callable[[], int],
    ) -> None:
        self._registry = registry
        self._table = table
        self._outbox = outbox
        self._ends = ends
        self._serve = serve
        self._limits = limits
        self._metrics = metrics
        self._wall_ms = wall_ms

    def unservable(self, msg: Message, part: PartitionState, record: Record) -> bool:
        """True when ``record`` was held here for a stranded run (a pinned StartRun of a line
        not deployed too). A stranded run whose line is served again is released first (its
        held records served), and False is returned."""
        run_id = getattr(record, "session_id", "")
        if isinstance(record, StartRun):
            known = (
                run_id in part.sessions or run_id in part.ended
            )  # a duplicate: _start_run refuses it
            why = None if known else not_deployed(self._registry, record)
            if why is not None:
                self._hold_start(msg, record, why)
            return why is not None
        snap = part.sessions.get(run_id)
        if snap is None or run_id in self._table.residents:
            return False
        why = not_deployed(self._registry, snap)
        if why is None:
            if snap.stranded_json is not None:
                self._guarded(snap, msg.partition() or 0, None)
            return False
        raw = len(msg.value() or b"") + len(msg.key() or b"")
        if snap.stranded_json is not None and not can_hold(snap, raw, self._limits):
            # Held records ride in the run's snapshot, one Kafka message: past the run's
            # buffered-signal limits a record is dead-lettered with the reason instead, so a
            # flood for a stranded run cannot grow its snapshot past what Kafka carries.
            self._outbox.dead_letter(
                msg, f"held records full for a stranded run: {why}", "held_full"
            )
            return True
        letter = dead_letter(msg, f"held: {why}", SERVICE, at_ms=self._wall_ms())
        self._strand(snap, msg.partition() or 0, why, letter)
        return True

    def check(self) -> None:
        """Once per restored partition: park its stranded runs, release those this executor
        can serve again (the registry of a process never changes, so once is enough)."""
        for p, part in self._table.parts.items():
            if part.versions_checked:
                continue
            part.versions_checked = True
            for run_id, snap in list(part.sessions.items()):
                if snap.status in ENDED or run_id in self._table.residents:
                    continue
                why = not_deployed(self._registry, snap)
                if why is not None and snap.stranded_json is None:
                    self._guarded(snap, p, why)
                elif why is None and snap.stranded_json is not None:
                    self._guarded(snap, p, None)

    def _guarded(self, snap: SessionSnapshot, p: int, why: str | None) -> None:
        """Park (``why``) or release (None) one run; what raises fails that run, as a timer's
        does, not the executor."""
        mark = self._outbox.mark()
        try:
            if why is None:
                self._release(snap, p)
            else:
                self._strand(snap, p, why, None)
        except (TxnAbortable, TxnFatal):
            raise
        except Exception as exc:
            self._ends.poisoned(snap.session_id, p, snap, mark, exc, "versions")

    def _strand(self, snap: SessionSnapshot, p: int, why: str, letter: DeadLetter | None) -> None:
        out = RunSink(self._outbox, self._table, snap.session_id, p)
        if snap.stranded_json is not None:
            assert letter is not None
            out.put_snapshot(hold(snap, letter))
            self._metrics.stranded.labels("held").inc()
            return
        log.warning("run %s parked: %s", snap.session_id, why)
        version = snap.agent_version or "none"
        held = () if letter is None else (letter,)
        step = park_stranded(snap, version, why, now_ms=self._wall_ms(), held=held)
        self._metrics.stranded.labels("parked").inc()
        if held:
            self._metrics.stranded.labels("held").inc()
        apply_step(step, out)

    def _hold_start(self, msg: Message, start: StartRun, why: str) -> None:
        """A pinned StartRun no deployed version serves: held in a snapshot made for it."""
        log.warning("run %s not started, held: %s", start.session_id, why)
        now_ms = self._wall_ms()
        letter = dead_letter(msg, f"held: {why}", SERVICE, at_ms=now_ms)
        stub = strand_unstarted(start, start.agent_version or "none", letter, now_ms=now_ms)
        RunSink(self._outbox, self._table, start.session_id, msg.partition() or 0).put_snapshot(
            stub
        )
        self._metrics.stranded.labels("parked").inc()
        self._metrics.stranded.labels("held").inc()

    def _release(self, snap: SessionSnapshot, p: int) -> None:
        served_by = self._registry.spec_for(snap.capability, snap.agent_version).version
        log.info("run %s released: version %s serves it", snap.session_id, served_by)
        self._metrics.stranded.labels("released").inc()
        stranded = stranded_of(snap)
        if stranded is not None and stranded.unstarted:
            # Nothing of it was journaled: its held StartRun, served next, starts it (and
            # its snapshot replaces this one in the same commit).
            self._table.parts[p].sessions.pop(snap.session_id, None)
        else:
            step = release_stranded(snap, served_by or "none", now_ms=self._wall_ms())
            out = RunSink(self._outbox, self._table, snap.session_id, p)
            apply_step(step, out)
        for letter in held_of(snap):
            self._serve(as_message(letter))
        after = self._table.parts[p].sessions.get(snap.session_id)
        if after is not None and after.status is RunStatus.RUNNING:
            # It was running (a call in flight when its line went): rebuild it, as a restore
            # does for RUNNING runs, so its in-doubt call is resolved without waiting for a
            # record.
            self._table.to_rebuild.append((snap.session_id, p))
