"""Effect family: live calls (generations and tools), which the executor performs.

A live call is announced (EFFECT_ANNOUNCED) and handed to the executor as a ``LiveCall``;
its outcome comes back through ``Runtime.complete``. Announce before act: the executor commits
the announce before the call leaves, except for an in-process ``@tool`` that mutates nothing
and is safe to repeat (``EffectDecl.announce_rides``), whose announce rides with its outcome.
"""

from __future__ import annotations

import dataclasses
import math

from runplane.core.agents import EffectDecl, Recovery
from runplane.core.effect import Effect
from runplane.core.engine.decode import serve
from runplane.core.engine.sinkgate import gate
from runplane.core.engine.state import Run
from runplane.core.engine.values import InFlight, LiveCall
from runplane.core.engine.vocab import (
    GENERATION_DECL,
    SUSPEND,
    Resolution,
    Slot,
    Wait,
    WaitKind,
)
from runplane.wire import ErrorInfo, JournalKind, RunStatus

__all__ = ["deadline", "decl_for", "idempotency_key", "live", "live_target", "request_live"]


def decl_for(run: Run, effect: Effect) -> EffectDecl:
    """The declaration a call is performed under: the agent's, the tool's, or the default
    (mutating, ``requires_operator``), with the call's own overrides."""
    if effect.family == "generation":
        return GENERATION_DECL
    tool = str(effect.options.get("tool", effect.name))
    offered = run.tools.get(tool)
    base = run.spec.decl_for(tool) or offered or EffectDecl(tool)
    # Where the call runs is the executor's knowledge: an agent cannot declare its way out
    # of announcing first.
    in_process = offered is not None and offered.in_process
    mutating = effect.options.get("mutating")
    recovery = effect.options.get("recovery")
    if mutating is None and recovery is None and base.in_process == in_process:
        return base
    return dataclasses.replace(
        base,
        mutating=base.mutating if mutating is None else bool(mutating),
        recovery=recovery if recovery is not None else base.recovery,
        in_process=in_process,
    )


def live(run: Run, slot: Slot) -> Resolution:
    """A fresh slot: announce the call and ask the executor to perform it."""
    effect, call_seq, witness = slot
    try:
        decl = decl_for(run, effect)
    except ValueError as exc:
        # Recorded, not just raised: a replay must find this slot taken by the same failure.
        error = ErrorInfo(type="InvalidDeclaration", message=str(exc)[:500], retryable=False)
        entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, error=error)
        return serve(run.rec, effect, entry)
    refused = gate(run, slot, decl)  # before the announce: a refused call is never performed
    if refused is not None:
        return refused
    recovery = decl.effective_recovery
    run.rec.seal(  # seal, not at(): one call fewer on the hot path
        JournalKind.EFFECT_ANNOUNCED,
        call_seq=call_seq,
        family=effect.family,
        name=effect.name,
        witness=witness,
        attrs={"recovery": str(recovery), "mutating": "true" if decl.mutating else "false"},
    )
    # The announce's stamp rides with the call in flight: a doubt waits out its timeout
    # from there (``deadline``), the journal's instant, never one the agent hands it.
    run.in_flight = InFlight(
        run.era, call_seq, effect.family, effect.name, witness, recovery, announced_ms=run.now
    )
    return request_live(run, slot, decl, announce_first=not decl.announce_rides)


def live_target(effect: Effect) -> str:
    """Who performs a live call: the model provider of a generation, else the tool."""
    if effect.family == "generation":
        return str(effect.request["provider"])
    return str(effect.options.get("tool", effect.name))


def request_live(run: Run, slot: Slot, decl: EffectDecl, *, announce_first: bool) -> Resolution:
    """Hand the call to the executor and wait for its outcome (no record of its own)."""
    effect, call_seq, witness = slot
    target = live_target(effect)
    call = LiveCall(
        run.session_id,
        run.era,
        call_seq,
        effect.family,
        effect.name,
        target,
        effect.request,
        witness,
        decl.mutating,
        decl.effective_recovery,
        decl.retry,
        decl.timeout_s,
        announce_first,
        idempotency_key(run, effect, call_seq, decl),
        _deadline_of(run, call_seq, decl),
    )
    run.rec.out.live.append(call)
    run.pending_live = call
    run.waiting = tuple.__new__(Wait, (WaitKind.LIVE, slot, decl, None))  # hot: see driver
    run.status = RunStatus.RUNNING
    return SUSPEND


def deadline(announced_ms: int, decl: EffectDecl) -> int:
    """The instant after which no attempt of a call started at ``announced_ms`` can still be
    on its way from the executor: every attempt's timeout and the longest backoff between
    them (an attempt after one that provably did not reach the peer may be sent late; the
    live-call runner sends none after this instant)."""
    retry = decl.retry
    budget_s = retry.max_attempts * decl.timeout_s + (retry.max_attempts - 1) * retry.max_backoff_s
    return announced_ms + math.ceil(budget_s * 1000)


def waits_out(decl: EffectDecl) -> bool:
    """Whether a doubt about a call under ``decl`` waits out its timeout before it is probed
    (a mutation that reconciles: a probe cannot see a request still in flight)."""
    return decl.mutating and decl.effective_recovery is Recovery.RECONCILE


def _deadline_of(run: Run, call_seq: int, decl: EffectDecl) -> int | None:
    if not decl.mutating:  # the hot path: a read has no deadline to keep
        return None
    flight = run.in_flight
    if flight is None or (flight.era, flight.call_seq) != (run.era, call_seq):
        return None
    if not flight.announced_ms or not waits_out(decl):
        return None
    return deadline(flight.announced_ms, decl)


def idempotency_key(run: Run, effect: Effect, call_seq: int, decl: EffectDecl) -> str | None:
    """The key a tool call is performed (and probed) under; see ``LiveCall``."""
    if effect.family != "tool":
        return None
    explicit = effect.request.get("idempotency_key")
    if explicit is not None:
        return str(explicit)
    if not decl.mutating:
        return None
    flight = run.in_flight
    here = flight is not None and (flight.era, flight.call_seq) == (run.era, call_seq)
    origin = flight.origin if here and flight is not None else f"{run.era}/{call_seq}"
    return f"{run.session_id}/{origin}"
