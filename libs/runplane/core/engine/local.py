"""Effect family: local effects — observations and checkpoints.

``observe`` computes a value in the agent's process once and journals it; ``checkpoint``
journals the run's position (a checkpointed run restores from the last one). Signals are the
``signal`` family.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runplane.core.engine.decode import error_info, serve
from runplane.core.engine.state import Run
from runplane.core.engine.vocab import Resolution, Slot
from runplane.wire import JournalKind

__all__ = ["checkpoint", "decode_checkpoint", "observe"]


def observe(run: Run, slot: Slot) -> Resolution:
    fn: Callable[[], Any] = slot.effect.options["fn"]
    try:
        value = fn()
    except Exception as exc:
        entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, error=error_info(exc))
    else:
        entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, value=value)
    return serve(run.rec, slot.effect, entry)


def checkpoint(run: Run, slot: Slot) -> Resolution:
    state = slot.effect.request["state"]
    entry = run.rec.result(slot, JournalKind.CHECKPOINT_REPORTED, value=state)
    if entry.ok:
        run.checkpoint_json = entry.value_json
    return serve(run.rec, slot.effect, entry)


def decode_checkpoint(_effect: Any, _raw: Any) -> None:
    """A checkpoint gives the agent nothing back."""
    return None
