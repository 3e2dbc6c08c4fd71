"""How a run ends in the executor: a step that ends it, a StartRun nobody can run, and a
run whose serving raised (a poison pill: failed, not retried by every instance in turn).

A mixin of ``Executor``: these paths close a run's chain and tell admission and the worklist,
through the same outputs as every step.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

from runplane.core import Draft, Runtime, Step, seal
from runplane.kafka.partition import partition_for
from runplane.wire import (
    CloseTask,
    ErrorInfo,
    JournalKind,
    ParkKind,
    RunStatus,
    RunStatusUpdate,
    SessionSnapshot,
    StartRun,
)
from services.executor.outputs import Outputs
from services.executor.state import ENDED, PartitionState

log = logging.getLogger("services.executor.executor")


@dataclass
class Resident:
    """A run's runtime kept in memory between messages."""

    runtime: Runtime
    partition: int
    last_active: float


class RunEnding(Outputs):
    """Ending runs (a mixin of ``Executor``, which owns the state declared here)."""

    _parts: dict[int, PartitionState]
    _residents: dict[str, Resident]
    _npart: int

    def _fail_unstartable(
        self,
        start: StartRun,
        reason: str,
        now_ms: int,
        p: int,
        *,
        error_type: str = "UnknownCapability",
    ) -> None:
        """A StartRun nobody can run: close its chain with RUN_FAILED and tell admission."""
        record = seal(
            Draft(
                session_id=start.session_id,
                seq=1,
                era=0,
                kind=JournalKind.RUN_FAILED,
                stamp_ms=now_ms,
                attrs={"error_type": error_type, "reason": reason[:500]},
            ),
            start.admitted_hash,
        )
        snap = SessionSnapshot(
            session_id=start.session_id,
            capability=start.capability,
            status=RunStatus.FAILED,
            era=0,
            next_seq=2,
            last_hash=record.hash,
            case_id=start.case_id,
            admission_key=start.admission_key,
            tenant=start.tenant,
            initiator=start.initiator,
            input_json=start.input_json,
            error=ErrorInfo(type=error_type, message=reason, retryable=False),
            started_ms=start.admitted_ms,
            updated_ms=now_ms,
        )
        now = time.monotonic()
        self._out("journal", start.session_id, record, now)
        self._out("sessions", start.session_id, snap, now)
        self._out(
            "admission",
            start.admission_key,
            RunStatusUpdate(
                admission_key=start.admission_key,
                run_id=start.session_id,
                status=RunStatus.FAILED,
                updated_ms=now_ms,
                seq=record.seq,
            ),
            now,
        )
        self._parts[p].end(start.session_id, RunStatus.FAILED)
        self._metrics.runs_ended.labels("failed").inc()

    def _ended(self, sid: str, step: Step, previous: SessionSnapshot | None, now: float) -> None:
        status = step.end
        assert status is not None
        self._metrics.runs_ended.labels(str(status).lower()).inc()
        parked = previous.parked_on if previous is not None else None
        decided = any(r.kind is JournalKind.TASK_DECIDED for r in step.records)
        closed = any(isinstance(c, CloseTask) for c in step.commands)
        if (
            parked is not None
            and parked.kind in (ParkKind.TASK, ParkKind.OPERATOR)
            and not decided
            and not closed
        ):
            # The run ended while a person was asked something: withdraw the task.
            close = CloseTask(task_id=parked.ref, reason=f"run {status}", at_ms=self._wall_ms())
            self._out("tasks.commands", parked.ref, close, now)
        res = self._residents.pop(sid, None)
        if res is not None:
            res.runtime.close()
        part = self._parts.get(partition_for(sid, self._npart))
        if part is not None:
            part.end(sid, status)

    def _poisoned(
        self,
        sid: str,
        p: int,
        before: SessionSnapshot | None,
        mark: tuple[int, int],
        exc: Exception,
        where: str,
        *,
        start: StartRun | None = None,
    ) -> None:
        """Serving run ``sid`` raised: undo the half-applied work and fail the run, so that the
        same input cannot crash every instance in turn (a poison pill). The run's chain goes
        on from ``before`` — the last snapshot applied before this work began."""
        log.exception("serving run %s raised (%s); failing the run", sid, where, exc_info=exc)
        self._metrics.poisoned.labels(where).inc()
        self._batch.rollback(mark)
        res = self._residents.pop(sid, None)
        if res is not None:
            res.runtime.close()
        part = self._parts.get(p)
        if part is None:
            return
        reason = f"executor error while serving the run ({where}): {type(exc).__name__}: {exc}"
        if before is None:
            part.sessions.pop(sid, None)
            part.forget_results(sid)
            if start is not None:
                self._fail_unstartable(
                    start, reason, self._wall_ms(), p, error_type="ExecutorError"
                )
            return
        part.ended.pop(sid, None)
        part.sessions[sid] = before
        if before.status not in ENDED:
            self._fail_from(before, p, reason)

    def _fail_from(self, snap: SessionSnapshot, p: int, reason: str) -> None:
        """Close a run's chain with RUN_FAILED after ``snap`` and tell admission and the
        worklist (a task it was parked on is withdrawn)."""
        now_ms = self._wall_ms()
        error = ErrorInfo(type="ExecutorError", message=reason[:1000], retryable=False)
        record = seal(
            Draft(
                session_id=snap.session_id,
                seq=snap.next_seq,
                era=snap.era,
                kind=JournalKind.RUN_FAILED,
                stamp_ms=now_ms,
                attrs={"error_type": error.type, "reason": reason[:500]},
            ),
            snap.last_hash,
        )
        failed = dataclasses.replace(
            snap,
            status=RunStatus.FAILED,
            next_seq=snap.next_seq + 1,
            last_hash=record.hash,
            parked_on=None,
            error=error,
            updated_ms=now_ms,
        )
        now = time.monotonic()
        sid = snap.session_id
        self._out("journal", sid, record, now)
        self._out("sessions", sid, failed, now)
        update = RunStatusUpdate(
            admission_key=snap.admission_key,
            run_id=sid,
            status=RunStatus.FAILED,
            updated_ms=now_ms,
            seq=record.seq,
        )
        self._out("admission", snap.admission_key, update, now)
        parked = snap.parked_on
        if parked is not None and parked.kind in (ParkKind.TASK, ParkKind.OPERATOR):
            close = CloseTask(task_id=parked.ref, reason="run FAILED", at_ms=now_ms)
            self._out("tasks.commands", parked.ref, close, now)
        self._parts[p].end(sid, failed.status)
        self._metrics.runs_ended.labels("failed").inc()
