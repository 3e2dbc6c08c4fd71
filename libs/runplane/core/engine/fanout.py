"""Effect family: fan-out inside one run — branches dispatched together, applied in ready order.

A ready set of plan nodes is issued as consecutive **branch** effects (``Op.BRANCH``), one per
node, in deterministic ready order (the plan's ``waves``: by node id), then one **join**
(``Op.JOIN``). Each branch takes its own slot — its own journal slice, keyed
``session/era/call_seq`` with the node id inside the request (and so inside the witness):
branches never collide, and a replay that assigned a node elsewhere diverges loudly.

- A branch does not wait: a live branch (a tool or a generation) is announced and handed to
  the executor as a ``LiveCall`` at once, so the calls of one ready set are in flight
  together; a commission branch sends its child's ``AdmissionRequest`` (``commission``).
- Outcomes may come back in any order. They are **applied in ready order**: an outcome is
  held until every earlier branch's is recorded, so the chain and the result journal are
  the same for every completion order, and the result journal never has a gap a replay
  would stop at. The join is recorded last, with every branch's outcome and provenance.
- Nothing races: there is no first-wins-cancel-the-rest, which would abandon an announced
  effect with no terminal record.
- A crash mid-fan-out: replay serves every recorded branch from its slice and re-dispatches
  the rest. An outcome held in memory (a live branch finished out of order) is lost with the
  process and performed again — which is why a live branch must be non-mutating
  (``FanOutRefused`` otherwise; mutating work fans out as commissions, which admission
  deduplicates). A mutating node alone in its ready set is an ordinary call (``solo``). A child's result is a signal, buffered in the run's snapshot until applied.

A commission branch is dispatched by ``commission`` (the registry asks it first), which builds
on this module: here a branch only names the signal that brings its outcome and how that
signal reads (``Branch.read``), so this module knows nothing of children.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runplane.core.agents import EffectDecl
from runplane.core.engine.decode import serve
from runplane.core.engine.sinkgate import gate, result_label
from runplane.core.engine.state import Mark, Run
from runplane.core.engine.tools import decl_for, idempotency_key, live, live_target
from runplane.core.engine.values import LiveCall, Outcome
from runplane.core.engine.vocab import SUSPEND, Rejected, Resolution, Slot, Value, Wait, WaitKind
from runplane.wire import JournalKind, RunStatus, Signal

__all__ = ["Branch", "branch", "held_refusal", "hold", "join", "on_outcome", "pending_call"]


@dataclass
class Branch:
    """A dispatched branch whose outcome is not applied yet. ``signal``: for a commission,
    the name of the signal that brings the child's result, and ``read`` its outcome and the
    attrs to journal with it; ``outcome``: held until every earlier branch is applied."""

    slot: Slot
    call: LiveCall | None = None
    signal: str | None = None
    read: Callable[[Signal], tuple[Outcome, dict[str, str]]] | None = None
    outcome: Outcome | None = None
    attrs: dict[str, str] = field(default_factory=dict)  # journaled with the outcome


def branch(run: Run, slot: Slot) -> Resolution:
    """A fresh branch slot: dispatch it without waiting (the join waits for all)."""
    effect, call_seq, witness = slot
    decl = decl_for(run, effect)
    if decl.mutating and effect.options.get("solo"):
        # A ready set of one: an ordinary call (announce first, in-doubt recovery), awaited
        # here; the join that follows finds it recorded.
        return live(run, slot)
    if decl.mutating:
        # Held like any outcome, not recorded at once: results are applied in ready order.
        refusal = Outcome.failure(
            "FanOutRefused",
            f"{effect.name} is mutating: a live branch may be performed again after a crash; "
            "fan out mutations as commissions",
        )
        return hold(run, Branch(slot, outcome=refusal))
    gated = held_refusal(run, slot, decl)
    if gated is not None:
        return hold(run, Branch(slot, outcome=gated[0], attrs=gated[1]))
    node = str(effect.request.get("node", ""))
    run.rec.seal(
        JournalKind.EFFECT_ANNOUNCED,
        call_seq=call_seq,
        family=effect.family,
        name=effect.name,
        witness=witness,
        attrs={"recovery": str(decl.effective_recovery), "mutating": "false", "node": node},
    )
    target = live_target(effect)
    call = LiveCall(
        run.session_id,
        run.era,
        call_seq,
        effect.family,
        effect.name,
        target,
        _inner_request(effect.request),
        witness,
        False,
        decl.effective_recovery,
        decl.retry,
        decl.timeout_s,
        # Announce before act, as for every live call: only an in-process read may ride.
        not decl.announce_rides,
        idempotency_key(run, effect, call_seq, decl),
    )
    run.rec.out.live.append(call)
    run.branches[call_seq] = Branch(slot, call=call)
    run.status = RunStatus.RUNNING
    return Value(None)


def hold(run: Run, held: Branch) -> Resolution:
    """Keep a dispatched branch whose outcome comes later (or is known now and waits its turn
    in ready order), and go on to the next effect: the join waits for all."""
    run.branches[held.slot.call_seq] = held
    return _advance(run, Value(None))


def held_refusal(
    run: Run, slot: Slot, decl: EffectDecl, payload: Any = None
) -> tuple[Outcome, dict[str, str]] | None:
    """The sink gate (``sinkgate.gate``) on a branch: None when it may go out, else the
    refusal and its journal attrs. The gate records a refusal at the slot at once; here that
    is undone and the failure held instead, to be applied in ready order like every outcome —
    a recorded slot ahead of an open one would be a gap that stops a replay."""
    mark = Mark.take(run)
    if gate(run, slot, decl, payload) is None:
        return None
    entry = run.rec.results.get((run.era, slot.call_seq))
    record = next((r for r in reversed(run.rec.out.records) if r.call_seq == slot.call_seq), None)
    mark.restore(run)
    if entry is None or entry.error is None:  # pragma: no cover - the gate records a failure
        return Outcome.failure("SinkRefused", "refused by the sink gate"), {}
    attrs = {} if record is None else {k: v for k, v in record.attrs.items() if k != "node"}
    return Outcome(ok=False, error=entry.error), attrs


def _inner_request(request: Any) -> dict[str, Any]:
    """What the performer sees: the call's own request, without the plan's node id."""
    return {k: v for k, v in request.items() if k != "node"}


def join(run: Run, slot: Slot) -> Resolution:
    """Wait until every branch of the request is applied, then record the join."""
    if _joined(run, slot):
        return _record_join(run, slot)
    run.waiting = Wait(WaitKind.FANOUT, slot)
    run.status = RunStatus.RUNNING
    return SUSPEND


def on_outcome(
    run: Run, call_seq: int, outcome: Outcome, attrs: dict[str, str] | None = None
) -> Resolution | Rejected:
    """The outcome of branch ``call_seq`` (a live call performed, a child ended)."""
    held = run.branches.get(call_seq)
    if held is None or held.outcome is not None:
        return Rejected(f"no branch outstanding at call_seq {call_seq}")
    held.outcome = outcome
    held.attrs.update(attrs or {})
    return _advance(run, SUSPEND)


def pending_call(run: Run) -> LiveCall | None:
    """A live branch still being performed (the runtime is not idle while one is)."""
    return next(
        (b.call for b in run.branches.values() if b.call is not None and b.outcome is None), None
    )


def _advance(run: Run, otherwise: Resolution) -> Resolution:
    """Apply held outcomes in ready order, as far as no earlier branch is missing; then the
    join, if it waits and is complete."""
    for call_seq in sorted(run.branches):
        held = run.branches[call_seq]
        if held.outcome is None and held.signal is not None and held.read is not None:
            buffered = _take_buffered(run, held.signal)
            if buffered is not None:
                held.outcome, attrs = held.read(buffered)
                held.attrs.update(attrs)
        if held.outcome is None:
            break
        o = held.outcome
        run.rec.result(
            held.slot,
            JournalKind.EFFECT_RECORDED,
            value=o.value,
            error=o.error,
            attempts=o.attempts,
            cost=o.cost,
            # Raised to what the call sent (the gate's flow label), as for any live call.
            label=result_label(run, call_seq, o.label),
            attrs={"node": str(held.slot.effect.request.get("node", "")), **held.attrs},
        )
        del run.branches[call_seq]
    wait = run.waiting
    if wait is not None and wait.kind is WaitKind.FANOUT and _joined(run, wait.slot):
        run.waiting = None
        return _record_join(run, wait.slot)
    return otherwise


def _take_buffered(run: Run, name: str) -> Signal | None:
    """The signal named ``name`` that arrived before its branch could be applied, if any,
    taken out of the run's buffer (the snapshot kept it until now)."""
    for i, signal in enumerate(run.pending):
        if signal.name == name:
            del run.pending[i]
            return signal
    return None


def _branch_seqs(slot: Slot) -> range:
    """The join's branches are the slots just before it, one per node (``planrun`` issues
    them back to back, in ready order, and nothing else between)."""
    return range(slot.call_seq - len(slot.effect.request["nodes"]), slot.call_seq)


def _joined(run: Run, slot: Slot) -> bool:
    return all((run.era, cs) in run.rec.results for cs in _branch_seqs(slot))


def _record_join(run: Run, slot: Slot) -> Resolution:
    """The join's value: each node's outcome and journaled provenance, by node id."""
    out: dict[str, Any] = {}
    for node, cs in zip(slot.effect.request["nodes"], _branch_seqs(slot), strict=True):
        entry = run.rec.results[(run.era, cs)]
        item: dict[str, Any] = {"provenance": list(entry.label.provenance)}
        if entry.ok:
            item["ok"] = True
            item["value"] = None if entry.value_json is None else json.loads(entry.value_json)
        else:
            assert entry.error is not None
            item["ok"] = False
            item["error"] = {"type": entry.error.type, "message": entry.error.message}
        out[node] = item
    entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, value=out)
    return serve(run.rec, slot.effect, entry)
