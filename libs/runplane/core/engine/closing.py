"""Effect family: closing the run's case (``ctx.close_case()``) — a request to the cases
service, asked and answered like the other case commands (``engine/cases.py``).

The cases service refuses to close a case while any obligation is OPEN or WARNED; the refusal
reaches the agent as ``CaseRefused`` with the reason (meet or cancel the obligation first).
Closing a closed case is accepted ("already closed"). The reply is journaled as the call's
result, so a replay never asks again.
"""

from __future__ import annotations

from runplane.core.engine.cases import ask_case, no_case
from runplane.core.engine.state import Run
from runplane.core.engine.vocab import Resolution, Slot
from runplane.wire import CloseCase

__all__ = ["close_case"]


def close_case(run: Run, slot: Slot) -> Resolution:
    """Ask the cases service to close the run's case; the run waits for its answer."""
    if run.case_id is None:
        return no_case(run)
    call_seq = slot.call_seq
    command = CloseCase(
        case_id=run.case_id,
        request_id=f"{run.session_id}/{run.era}/{call_seq}",
        reply_to=run.session_id,
        era=run.era,
        call_seq=call_seq,
    )
    return ask_case(run, slot, command)
