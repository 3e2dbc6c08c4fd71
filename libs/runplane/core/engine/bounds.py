"""Enforcing a run's stated limits (``runplane.core.limits``) where the engine writes.

Result bodies are bounded in the recorder (``ResultTooLarge``) and an output in ``ends.finish``;
this module bounds the history and the signals a run buffers. Each refusal is typed, and
where the agent sees it, it is recorded at the slot, so a replay raises it again at the same
place instead of consulting a limit that may have changed since.
"""

from __future__ import annotations

from runplane.core.effect import Op
from runplane.core.engine.decode import serve
from runplane.core.engine.ends import fail
from runplane.core.engine.state import Run
from runplane.core.engine.vocab import SUSPEND, Rejected, Resolution, Slot
from runplane.core.limits import HISTORY_GRACE
from runplane.wire import ErrorInfo, JournalKind, Signal

__all__ = ["history_too_long", "refuse_buffering"]

# Ops still served past the history limit: the way out of a long history.
_WAY_OUT = frozenset({Op.CONTINUE_AS_NEW})


def history_too_long(run: Run, slot: Slot) -> Resolution | None:
    """A fresh effect of a run whose journal reached ``max_journal_records``: the effect fails
    with ``HistoryTooLong`` (the agent may continue as new); past the grace, the run fails.
    None for the way out (continue-as-new): served by its family as usual."""
    limit = run.limits.max_journal_records
    if slot.effect.op in _WAY_OUT:
        return None
    error = ErrorInfo(
        type="HistoryTooLong",
        message=f"the run's journal reached {run.rec.next_seq} records (max_journal_records "
        f"{limit}): continue as new",
        retryable=False,
    )
    if run.rec.next_seq >= limit + HISTORY_GRACE:
        fail(run, error)
        return SUSPEND
    return serve(
        run.rec, slot.effect, run.rec.result(slot, JournalKind.EFFECT_RECORDED, error=error)
    )


def refuse_buffering(run: Run, signal: Signal) -> Rejected | None:
    """Why a signal nobody waits for yet cannot be buffered: every buffered signal rides in
    every snapshot of the run, which Kafka must carry in one message."""
    limits = run.limits
    if len(run.pending) >= limits.max_buffered_signals:
        return Rejected(
            f"{limits.max_buffered_signals} signals already buffered and not awaited; "
            f"refused {signal.name!r}",
            "signals_full",
        )
    held = sum(len(s.payload_json) for s in run.pending) + len(signal.payload_json)
    if held > limits.max_buffered_bytes:
        return Rejected(
            f"buffered signals would hold {held} bytes (max_buffered_bytes "
            f"{limits.max_buffered_bytes}); refused {signal.name!r}",
            "signals_full",
        )
    return None
