"""Carrying out repair orders (``runplane.core.repair``): resume, fork, erase.

An order arrives as a ``Wake`` whose reason starts ``repair:`` on the run's own inbox
partition, so it is serialized with every other message of the run and applied by the run's
one chain writer (``Repair.order``, from the executor's inbox path). The decisions are the core's; this module reads what
they need and queues what they produce in the current group-commit batch (one transaction
with the order's inbox offset, like any step).

The runs an order names are not resident: an ended run keeps no snapshot or results here
(``PartitionState.end``) and a fork is written by the operator's tool after the partition was
restored. So the order re-reads the run's snapshot and result journal from the ``sessions``
and ``results`` tables of its partition (``RunTable.read_run``) — a read of the whole
partition, once per order (an operator action, rare; retention keeps ``results`` to the live runs and recent history).
A refused order is dead-lettered with the reason (``runplane_executor_deadletters_total``
kind ``repair_refused``).

Results retention is an erase too (by ``retention``, ``Repair.expire``): the bodies of ended
runs are tombstoned when their time comes, from the housekeeping turn.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from confluent_kafka import Message

from runplane.core import AgentRegistry, UnknownCapability
from runplane.core import repair as core
from runplane.wire import SessionSnapshot, Wake
from services.executor.metrics import ExecutorMetrics
from services.executor.outbox import Outbox
from services.executor.state import PartitionState, RunTable, SlotKey, results_key
from services.executor.stepping import StepApplier

log = logging.getLogger("services.executor.executor")

REFUSED = "repair_refused"


class Repair:
    """Carrying out repair orders and the results retention."""

    def __init__(
        self,
        registry: AgentRegistry,
        table: RunTable,
        outbox: Outbox,
        steps: StepApplier,
        *,
        metrics: ExecutorMetrics,
        wall_ms: Callable[[], int],
    ) -> None:
        self._registry = registry
        self._table = table
        self._outbox = outbox
        self._steps = steps
        self._metrics = metrics
        self._wall_ms = wall_ms

    def order(self, msg: Message, part: PartitionState, p: int, wake: Wake) -> bool:
        """Apply the repair order ``wake`` carries; False when it carries none."""
        try:
            order = core.parse_order(wake.reason)
        except core.RepairRefused as exc:
            self._outbox.dead_letter(msg, str(exc), REFUSED)
            return True
        if order is None:
            return False
        run_id = wake.session_id
        live = part.sessions.get(run_id)
        if live is not None and order.kind is core.RepairKind.FORK:
            return True  # a restore of the partition found the fork first and runs it
        if live is not None:
            # A live run: nothing to resume or erase.
            self._refuse(msg, order, run_id, f"it is live ({live.status})")
            return True
        try:
            snap, results = self._table.read_run(run_id, p)
        except core.RepairRefused as exc:
            self._refuse(msg, order, run_id, str(exc))
            return True
        why = None if snap is not None else "unknown run"
        if snap is not None and order.kind is not core.RepairKind.FORK:
            why = core.refusal(order.kind, snap)
        if why is not None:
            self._refuse(msg, order, run_id, why)
            return True
        assert snap is not None
        if order.kind is core.RepairKind.ERASE:
            self._erase(run_id, p, snap, order, tuple(results))
            part.keep(run_id)  # nothing left to expire
            return True
        try:
            self._registry.spec(snap.capability)
        except UnknownCapability as exc:
            self._refuse(msg, order, run_id, str(exc))
            return True
        if order.kind is core.RepairKind.RESUME:
            snap = self._resume(run_id, snap, order)
            part.keep(run_id)  # live again: its bodies must not expire
        log.info("repair", extra={"run": run_id, "repair": str(order.kind), "by": order.by})
        part.ended.pop(run_id, None)
        part.sessions[run_id] = snap
        part.results[run_id] = results
        self._steps.rebuild(run_id, p, snap)
        return True

    def expire(self, now_ms: int, limit: int = 256) -> None:
        """Results retention: tombstone the bodies of ended runs whose time has come (an
        erase by ``retention``), a bounded number per housekeeping turn."""
        for p, part in self._table.parts.items():
            for item in part.due(now_ms, limit):
                run_id = item.erased.session_id
                if run_id in part.sessions:
                    continue  # resumed meanwhile (``keep`` drops it; this is the backstop)
                self._erase(run_id, p, item.erased, core.RETENTION, item.slots, now_ms)
                self._metrics.expired.inc()

    def _refuse(self, msg: Message, order: core.RepairOrder, run_id: str, why: str) -> None:
        self._outbox.dead_letter(msg, f"cannot {order.kind} run {run_id}: {why}", REFUSED)

    def _resume(
        self, run_id: str, snap: SessionSnapshot, order: core.RepairOrder
    ) -> SessionSnapshot:
        record, running, update = core.resume(snap, order, self._wall_ms())
        now = time.monotonic()
        self._outbox.record("journal", run_id, record, now)
        self._outbox.record("admission", update.admission_key, update, now)
        self._outbox.record("sessions", run_id, running, now)
        return running

    def _erase(
        self,
        run_id: str,
        p: int,
        snap: SessionSnapshot,
        order: core.RepairOrder,
        slots: Iterable[SlotKey],
        scrubbed_at_ms: int | None = None,
    ) -> int:
        """Tombstone the run's ``slots`` in ``results``, journal RUN_ERASED (so the erasure
        reaches ``audit``) and put the erased snapshot. ``scrubbed_at_ms``: ``snap`` is a
        retention entry's, scrubbed already (``core.scrub``), erased at that time."""
        now = time.monotonic()
        keys = sorted(slots)
        if scrubbed_at_ms is None:
            record, erased = core.erase(snap, order, self._wall_ms(), len(keys))
        else:
            record, erased = core.seal_erasure(snap, order, scrubbed_at_ms, len(keys))
        for era, call_seq in keys:
            self._outbox.tombstone("results", results_key(run_id, era, call_seq), p, now)
        self._outbox.record("journal", run_id, record, now)
        self._outbox.record("sessions", run_id, erased, now)
        by = erased.error.message if erased.error is not None else ""
        log.info("erased bodies", extra={"run": run_id, "bodies": len(keys), "erased": by})
        return len(keys)
