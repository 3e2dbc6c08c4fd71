"""Carrying out repair orders (``runplane.core.repair``): resume, fork, erase.

A mixin of ``Executor``. An order arrives as a ``Wake`` whose reason starts ``repair:`` on
the run's own inbox partition, so it is serialized with every other message of the run and
applied by the run's one chain writer. The decisions are the core's; this module reads what
they need and queues what they produce in the current group-commit batch (one transaction
with the order's inbox offset, like any step).

The runs an order names are not resident: an ended run keeps no snapshot or results here
(``PartitionState.end``) and a fork is written by the operator's tool after the partition was
restored. So the order re-reads the run's snapshot and result journal from the ``sessions``
and ``results`` tables of its partition — a read of the whole partition, once per order
(an operator action, rare; retention keeps ``results`` to the live runs and recent history).
A refused order is dead-lettered with the reason (``runplane_executor_deadletters_total``
kind ``repair_refused``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import replace

from confluent_kafka import Message

from runplane.core import AgentRegistry, UnknownCapability
from runplane.core import repair as core
from runplane.errors import WireError
from runplane.kafka.loop import TxnLoop
from runplane.wire import ResultEntry, SessionSnapshot, Wake
from services.executor.batch import Out
from services.executor.ending import Resident, RunEnding
from services.executor.state import PartitionState, SlotKey, restore_partitions, results_key

log = logging.getLogger("services.executor.executor")

REFUSED = "repair_refused"


class RunRepair(RunEnding):
    """Repair orders (a mixin of ``Executor``, which owns the state and methods used here)."""

    _registry: AgentRegistry
    _loop: TxnLoop

    def _rebuild(self, sid: str, p: int, snap: SessionSnapshot) -> Resident | None:
        raise NotImplementedError  # Executor._rebuild

    def _repair(self, msg: Message, part: PartitionState, p: int, wake: Wake) -> bool:
        """Apply the repair order ``wake`` carries; False when it carries none."""
        try:
            order = core.parse_order(wake.reason)
        except core.RepairRefused as exc:
            self._dead_letter(msg, str(exc), REFUSED)
            return True
        if order is None:
            return False
        sid = wake.session_id
        live = part.sessions.get(sid)
        if live is not None and order.kind is core.RepairKind.FORK:
            return True  # a restore of the partition found the fork first and runs it
        if live is not None:
            # A live run: nothing to resume or erase.
            self._dead_letter(
                msg, f"cannot {order.kind} run {sid}: it is live ({live.status})", REFUSED
            )
            return True
        try:
            snap, results = self._read_session(sid, p)
        except core.RepairRefused as exc:
            self._dead_letter(msg, f"cannot {order.kind} run {sid}: {exc}", REFUSED)
            return True
        why = None if snap is not None else "unknown run"
        if snap is not None and order.kind is not core.RepairKind.FORK:
            why = core.refusal(order.kind, snap)
        if why is not None:
            self._dead_letter(msg, f"cannot {order.kind} run {sid}: {why}", REFUSED)
            return True
        assert snap is not None
        if order.kind is core.RepairKind.ERASE:
            self._erase(sid, p, core.erase(snap, order, self._wall_ms()), tuple(results))
            part.keep(sid)  # nothing left to expire
            return True
        try:
            self._registry.spec(snap.capability)
        except UnknownCapability as exc:
            self._dead_letter(msg, f"cannot {order.kind} run {sid}: {exc}", REFUSED)
            return True
        if order.kind is core.RepairKind.RESUME:
            snap = self._resume(sid, snap, order)
            part.keep(sid)  # live again: its bodies must not expire
        log.info("repair", extra={"run": sid, "repair": str(order.kind), "by": order.by})
        part.ended.pop(sid, None)
        part.sessions[sid] = snap
        part.results[sid] = results
        self._rebuild(sid, p, snap)
        return True

    def _resume(self, sid: str, snap: SessionSnapshot, order: core.RepairOrder) -> SessionSnapshot:
        record, running, update = core.resume(snap, order, self._wall_ms())
        now = time.monotonic()
        self._out("journal", sid, record, now)
        self._out("admission", update.admission_key, update, now)
        self._out("sessions", sid, running, now)
        return running

    def _erase(self, sid: str, p: int, erased: SessionSnapshot, slots: Iterable[SlotKey]) -> int:
        """Tombstone the run's ``slots`` in ``results`` and put its ``erased`` snapshot."""
        now = time.monotonic()
        topic = self._topic["results"]
        n = 0
        for era, call_seq in sorted(slots):
            n += 1
            key = results_key(sid, era, call_seq).encode("utf-8")
            self._batch.add(Out(topic, key, None, p), now)
        self._out("sessions", sid, erased, now)
        by = erased.error.message if erased.error is not None else ""
        log.info("erased bodies", extra={"run": sid, "bodies": n, "erased": by})
        return n

    def _restore_tables(self, numbers: list[int], deadline: float) -> dict[int, PartitionState]:
        """Both tables of the assigned partitions, with the ended runs the retention will
        expire (``state.restore_partitions``)."""
        return restore_partitions(
            self._loop.restorer,
            self._serde,
            self._topic["sessions"],
            self._topic["results"],
            numbers,
            deadline=deadline,
            retention_ms=self.settings.retention_ms,
        )

    def _expire(self, now_ms: int, limit: int = 256) -> None:
        """Results retention: tombstone the bodies of ended runs whose time has come (an
        erase by ``retention``), a bounded number per housekeeping turn."""
        for p, part in self._parts.items():
            for item in part.due(now_ms, limit):
                sid = item.erased.session_id
                if sid in part.sessions:
                    continue  # resumed meanwhile (``keep`` drops it; this is the backstop)
                self._erase(sid, p, replace(item.erased, updated_ms=now_ms), item.slots)
                self._metrics.expired.inc()

    def _read_session(
        self, sid: str, p: int
    ) -> tuple[SessionSnapshot | None, dict[SlotKey, ResultEntry]]:
        """The run's latest snapshot and its result journal, read from the tables."""
        restorer = self._loop.restorer
        snaps = restorer.restore(
            self._topic["sessions"], [p], lambda data: self._serde.decode("sessions", data)
        ).partitions.get(p, {})
        snap = snaps.get(sid)
        prefix = f"{sid}/"
        # Kept as bytes: only this run's rows are decoded, not the whole partition's.
        rows = restorer.restore(self._topic["results"], [p], bytes).partitions
        results: dict[SlotKey, ResultEntry] = {}
        for key, data in rows.get(p, {}).items():
            if not key.startswith(prefix):
                continue
            try:
                entry = self._serde.decode("results", data)
            except WireError as exc:
                # Never replay without it: the call would be made again.
                raise core.RepairRefused(f"its body at {key} is unreadable: {exc}") from exc
            if isinstance(entry, ResultEntry):
                results[(entry.era, entry.call_seq)] = entry
        return (snap if isinstance(snap, SessionSnapshot) else None), results
