"""How a run ends: completed, failed or quarantined — one end record each, sealed here.

Ending closes the coroutine, withdraws what the run waited on (a carried task), and names in
the end record the calls still in doubt that nobody resolved.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from typing import Any

from runplane.core.agents import Recovery
from runplane.core.canonical import canonical_json
from runplane.core.chain import Draft, request_witness, seal
from runplane.core.engine.operated import CANCEL
from runplane.core.engine.state import Run
from runplane.core.engine.step import Command, Step, snapshot_at_start
from runplane.core.engine.tasks import carried_tasks, waited_tasks, withdraw_open
from runplane.core.engine.values import OpenRequest
from runplane.core.limits import too_large
from runplane.wire import (
    CloseTask,
    ErrorInfo,
    JournalKind,
    JournalRecord,
    RunStatus,
    RunStatusUpdate,
    SessionSnapshot,
    StartRun,
)

__all__ = [
    "cancelled",
    "fail",
    "fail_from_snapshot",
    "fail_unstartable",
    "finish",
    "quarantine",
]


def finish(run: Run, output: Any, attrs: dict[str, str] | None = None) -> None:
    """The agent returned ``output`` (``attrs``: more for the end record, e.g. the successor
    of a continue-as-new)."""
    run.coro = None
    if run.max_slot.get(run.era, -1) >= run.cursor:
        at = run.cursor
        quarantine(
            run,
            f"non-determinism at era {run.era} call_seq {at}: history has {run.slot_desc(at)}, agent returned instead",
        )
        return
    if CANCEL.of(run) is not None:
        cancelled(run)  # however the agent ended after a cancel, the run ends cancelled
        return
    try:
        run.output_json = canonical_json(output)
    except (TypeError, ValueError) as exc:
        fail(
            run,
            ErrorInfo(
                type="NotJsonValue",
                message=f"agent output is not canonical JSON: {exc}",
                retryable=False,
            ),
        )
        return
    oversized = too_large(run.output_json, run.rec.max_result_bytes)
    if oversized is not None:  # the snapshot carrying it could not be written
        run.output_json = None
        fail(run, oversized)
        return
    run.status = RunStatus.COMPLETED
    _clear_waits(run)
    run.rec.seal(
        JournalKind.RUN_COMPLETED,
        attrs={
            "output_digest": request_witness(json.loads(run.output_json)),
            **_unresolved(run),
            **(attrs or {}),
        },
    )


def fail(run: Run, error: ErrorInfo) -> None:
    """The run failed with ``error`` (the agent raised, or the engine could not serve it)."""
    if CANCEL.of(run) is not None:
        cancelled(run)
        return
    _close_coro(run)
    run.status = RunStatus.FAILED
    run.error = error
    _clear_waits(run)
    run.rec.seal(
        JournalKind.RUN_FAILED,
        attrs={"error_type": error.type, "reason": error.message[:500], **_unresolved(run)},
    )


def quarantine(run: Run, reason: str) -> None:
    """Stop the run: its history and its code disagree, or its chain was found broken."""
    _close_coro(run)
    run.status = RunStatus.QUARANTINED
    run.error = ErrorInfo(type="NonDeterminismError", message=reason, retryable=False)
    _clear_waits(run)
    run.rec.out.live.clear()
    run.rec.seal(JournalKind.RUN_QUARANTINED, attrs={"reason": reason[:500]})


def cancelled(run: Run) -> None:
    """End a run an operator cancelled (``engine.cancel``): RUN_CANCELLED, status FAILED
    with error type ``RunCancelled``; what it waited on is withdrawn, its timeout dropped."""
    request = CANCEL.of(run)
    assert request is not None
    _close_coro(run)
    run.status = RunStatus.FAILED
    run.error = ErrorInfo(type="RunCancelled", message=request.reason, retryable=False)
    _clear_waits(run)
    run.drop_timeout()
    run.rec.seal(
        JournalKind.RUN_CANCELLED,
        attrs={"reason": request.reason, "cancelled_by": request.by, **_unresolved(run)},
    )


def _unresolved(run: Run) -> dict[str, str]:
    """Doubts the run ended without asking again (a re-executed generation took another
    path): nobody knows whether they took effect, so the end record names them for an
    operator (the terminal snapshot keeps them too). A retry-recovery call is left out: it
    is safe to repeat by declaration, so there is nothing to check."""
    unsure = [d.origin for d in run.doubts if d.recovery is not Recovery.RETRY]
    return {"in_doubt": ",".join(unsure)} if unsure else {}


def _close_coro(run: Run) -> None:
    coro, run.coro = run.coro, None
    if coro is not None:
        # An agent's `finally` raising must not stop the end of the run.
        with contextlib.suppress(Exception):
            coro.close()


def _clear_waits(run: Run) -> None:
    # Every task the run has open: the one it waits on (each seat of a panel) and a carried one.
    withdraw_open(run, f"run {run.status}")
    run.waiting = None
    run.pending_live = None
    run.parked = None


# -- ending a run the engine cannot serve (the executor's failure paths) -----------------------
def fail_unstartable(
    start: StartRun, reason: str, *, now_ms: int, error_type: str = "UnknownCapability"
) -> Step:
    """A StartRun nobody can run (no such capability, or serving it crashed before its first
    step was applied): close its chain with RUN_FAILED at seq 1 and tell admission."""
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
    snapshot = snapshot_at_start(
        start,
        status=RunStatus.FAILED,
        next_seq=2,
        last_hash=record.hash,
        now_ms=now_ms,
        error=ErrorInfo(type=error_type, message=reason, retryable=False),
    )
    return _failed_step(record, snapshot, (_failed_update(snapshot, record, now_ms),))


def fail_from_snapshot(snapshot: SessionSnapshot, reason: str, *, now_ms: int) -> Step:
    """Close a run's chain with RUN_FAILED after ``snapshot`` (serving it raised in the
    executor), tell admission, and withdraw a task it was parked on."""
    error = ErrorInfo(type="ExecutorError", message=reason[:1000], retryable=False)
    record = seal(
        Draft(
            session_id=snapshot.session_id,
            seq=snapshot.next_seq,
            era=snapshot.era,
            kind=JournalKind.RUN_FAILED,
            stamp_ms=now_ms,
            attrs={"error_type": error.type, "reason": reason[:500]},
        ),
        snapshot.last_hash,
    )
    failed = replace(
        snapshot,
        status=RunStatus.FAILED,
        next_seq=snapshot.next_seq + 1,
        last_hash=record.hash,
        parked_on=None,
        error=error,
        updated_ms=now_ms,
    )
    commands: list[Command] = [_failed_update(failed, record, now_ms)]
    parked = snapshot.parked_on
    asked = (
        OpenRequest.from_json(snapshot.open_request_json) if snapshot.open_request_json else None
    )
    for task_id in waited_tasks(parked, asked) + carried_tasks(parked, asked):
        commands.append(CloseTask(task_id=task_id, reason="run FAILED", at_ms=now_ms))
    return _failed_step(record, failed, tuple(commands))


def _failed_update(
    snapshot: SessionSnapshot, record: JournalRecord, now_ms: int
) -> RunStatusUpdate:
    return RunStatusUpdate(
        admission_key=snapshot.admission_key,
        run_id=snapshot.session_id,
        status=RunStatus.FAILED,
        tenant=snapshot.tenant,
        updated_ms=now_ms,
        seq=record.seq,
    )


def _failed_step(
    record: JournalRecord, snapshot: SessionSnapshot, commands: tuple[Command, ...]
) -> Step:
    return Step(
        records=(record,),
        results=(),
        commands=commands,
        live_calls=(),
        _state=snapshot,
        parked_on=None,
        end=RunStatus.FAILED,
        replayed=0,
    )
