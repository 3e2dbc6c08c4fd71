"""Effect family: continue-as-new — end the run and start its successor with a fresh history.

``ctx.continue_as_new(input)`` records, at its slot, the successor's run id; emits the
successor's seq 0 (RUN_ADMITTED on its own chain, its attrs naming the predecessor) and its
StartRun, as commands of the same step; and ends the run RUN_COMPLETED with
``continued_as`` in its end record and ``{"continued_as": id}`` as its output. One
transaction carries all of it, so the successor starts exactly when the predecessor ends.

The successor is the platform's, not an emitter's: same capability, tenant, initiator and
case, admission key ``<predecessor's key>/next`` (so a chain of successors is readable from
the keys, and a replay of the step mints the same ids), run id derived from the predecessor's
(``<run id>.n<k>`` with k counting the generations). It does not pass through admission — no
emitter signed it and its input comes from a run already admitted — so its admission key has
no claim (``runplane signal`` resolves it by run id).
"""

from __future__ import annotations

import contextlib
from typing import Final

from runplane.core.canonical import canonical_json
from runplane.core.chain import run_start
from runplane.core.effect import EffectError
from runplane.core.engine.ends import finish
from runplane.core.engine.sinkgate import carried_input_label, successor_bounds
from runplane.core.engine.state import Run
from runplane.core.engine.vocab import SUSPEND, Resolution, Slot, Throw
from runplane.wire import JournalKind

__all__ = ["continue_as_new", "successor_id"]

_GENERATION: Final = ".n"


def successor_id(run_id: str) -> str:
    """``r-abc`` → ``r-abc.n1``; ``r-abc.n1`` → ``r-abc.n2``: one id per generation."""
    base, sep, gen = run_id.rpartition(_GENERATION)
    if sep and gen.isdigit():
        return f"{base}{_GENERATION}{int(gen) + 1}"
    return f"{run_id}{_GENERATION}1"


def continue_as_new(run: Run, slot: Slot) -> Resolution:
    try:
        input_json = canonical_json(slot.effect.request["input"])
    except (TypeError, ValueError) as exc:
        return Throw(EffectError("InvalidRequest", f"the successor's input is not JSON: {exc}"))
    if len(input_json) > run.limits.max_result_bytes:
        return Throw(
            EffectError("ResultTooLarge", "the successor's input is over max_result_bytes")
        )
    new_id = successor_id(run.session_id)
    value = {"continued_as": new_id}
    run.rec.result(slot, JournalKind.EFFECT_RECORDED, value=value, attrs={"continued_as": new_id})
    admitted, start = run_start(
        new_id,
        capability=run.spec.capability,
        admission_key=f"{run.admission_key}/next",
        tenant=run.tenant,
        initiator=run.initiator,
        input_json=input_json,
        now_ms=run.now,
        case_id=run.case_id,
        # The successor's first record names its predecessor and the hash of the record that
        # named the successor, so an auditor walks the chain of generations both ways.
        attrs={"continued_from": run.session_id, "predecessor_hash": run.rec.last_hash},
        # A successor stays bounded as its predecessor (sharing its allotment, if any).
        delegation_json=successor_bounds(run),
        # ...and its input carries what the predecessor had read: a conversation handed over
        # (an agent loop's checkpoint) does not come back as a trusted admission input.
        input_label_json=carried_input_label(run),
    )
    # The slot's value is served only on a replay (replay_history): the live run ends here.
    run.rec.out.commands.extend((admitted, start))
    coro, run.coro = run.coro, None
    if coro is not None:
        with contextlib.suppress(Exception):  # an agent's `finally` must not stop the end
            coro.close()
    finish(run, value, {"continued_as": new_id})
    return SUSPEND
