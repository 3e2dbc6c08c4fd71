"""How a run ends: completed, failed or quarantined — one end record each, sealed here.

Ending closes the coroutine, withdraws what the run waited on (a carried task), and names in
the end record the calls still in doubt that nobody resolved.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from runplane.core.agents import Recovery
from runplane.core.canonical import canonical_json
from runplane.core.chain import request_witness
from runplane.core.engine.eras import withdraw_carried
from runplane.core.engine.state import Run
from runplane.wire import ErrorInfo, JournalKind, RunStatus

__all__ = ["fail", "finish", "quarantine"]


def finish(run: Run, output: Any) -> None:
    """The agent returned ``output``."""
    run.coro = None
    if run.max_slot.get(run.era, -1) >= run.cursor:
        at = run.cursor
        quarantine(
            run,
            f"non-determinism at era {run.era} call_seq {at}: history has {run.slot_desc(at)}, agent returned instead",
        )
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
    run.status = RunStatus.COMPLETED
    _clear_waits(run)
    run.rec.seal(
        JournalKind.RUN_COMPLETED,
        attrs={
            "output_digest": request_witness(json.loads(run.output_json)),
            **_unresolved(run),
        },
    )


def fail(run: Run, error: ErrorInfo) -> None:
    """The run failed with ``error`` (the agent raised, or the engine could not serve it)."""
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
    withdraw_carried(run, f"run {run.status}")
    run.waiting = None
    run.pending_live = None
    run.parked = None
