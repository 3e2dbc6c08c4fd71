"""Idempotency keys the engine derives, a live call in doubt at its own slot, bounded signals.

Review M2: a mutating tool call that names no key is performed under ``<session>/<origin>``
(origin = era/call_seq of its first announce) — the same for its probe, and the same in a
later era the doubt is carried into. Before, the probe got ``None`` ("never happened" → the
charge was applied again) and the executor's fallback key changed with the era.
Review M4: ``Runtime.in_doubt`` runs the declared recovery at the same era and slot; a
checkpointed run no longer restarts an era (re-paying its generations) on a live doubt.
Review minor 9: buffered signals are bounded.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from runplane.core import (
    AgentRegistry,
    AgentSpec,
    Durability,
    EffectDecl,
    LiveCall,
    Outcome,
    Recovery,
    Runtime,
    StepCtx,
)
from runplane.core.chain import run_admitted
from runplane.core.engine import MAX_BUFFERED_SIGNALS
from runplane.core.gate import FieldRule, SinkDecl, sinks
from runplane.core.verify import verify_chain
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import JournalKind, RunStatus, Signal, StartRun, Wake

CHARGE = EffectDecl("charge", mutating=True, recovery=Recovery.RECONCILE, probe="get_charge")


class Billing:
    """Applies a charge once per key; the probe looks a charge up by key."""

    def __init__(self) -> None:
        self.applied: dict[str, dict[str, Any]] = {}
        self.calls: Counter[str | None] = Counter()
        self.probed: list[str | None] = []

    def tools(self) -> dict[str, Any]:
        return {"charge": self.charge, "get_charge": self.get_charge}

    def charge(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        self.calls[key] += 1
        if key is None:  # a peer that cannot deduplicate applies every call
            return {"charged": args["amount"], "n": sum(self.calls.values())}
        return self.applied.setdefault(key, {"charged": args["amount"], "key": key})

    def get_charge(self, args: dict[str, Any], key: str | None) -> Any:
        self.probed.append(key)
        return None if key is None else self.applied.get(key)


def _spec(fn: Any, durability: Durability) -> AgentSpec:
    # The runs here read a model before they charge: declared a sink whose amount carries no
    # authority, or the gate would refuse the stand-in (unattributed bytes carry the context).
    open_charge = SinkDecl("tool://charge", protected=(FieldRule("$.amount", trusted=False),))
    return AgentRegistry().register(
        AgentSpec("t", sinks(open_charge)(fn), durability, None, {"charge": CHARGE}), lint=False
    )


def _crash_after_first_charge() -> Any:
    fired: list[LiveCall] = []

    def hook(phase: str, call: LiveCall) -> bool:
        if phase == "after_act" and call.target == "charge" and not fired:
            fired.append(call)
            return True
        return False

    return hook


def test_the_probe_of_a_keyless_charge_looks_it_up_under_the_key_it_was_made_with() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        return await ctx.tool("charge", {"amount": 5})

    billing = Billing()
    driver = Driver(
        _spec(agent, Durability.REPLAYABLE),
        tools=billing.tools(),
        crash_hook=_crash_after_first_charge(),
    )
    run = driver.run("t", {}, session_id="s-1")
    assert run.status is RunStatus.COMPLETED, run.error
    assert list(billing.calls) == ["s-1/0/0"]  # derived from the call's position
    assert billing.probed == ["s-1/0/0"]  # the same key reached the probe
    assert sum(billing.calls.values()) == 1  # found applied: not charged again
    assert run.output == {"charged": 5, "key": "s-1/0/0"}


def test_a_doubt_carried_into_a_new_era_keeps_its_key() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        text = (await ctx.generate("scripted", "m", "hi")).text
        await ctx.checkpoint({"text": text})
        return await ctx.tool("charge", {"amount": 7})

    billing = Billing()
    provider = ScriptedProvider(["one", "two", "three"])
    driver = Driver(
        _spec(agent, Durability.CHECKPOINTED),
        tools=billing.tools(),
        providers={"scripted": provider},
        crash_hook=_crash_after_first_charge(),
    )
    run = driver.run("t", {}, session_id="s-2")
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.snapshot.era == 1  # restored from the checkpoint in a new era ...
    assert sum(billing.calls.values()) == 1  # ... and the charge still applied once
    (key,) = billing.calls
    assert key == "s-2/0/2" and billing.probed == [key]


def _start(fn: Any, durability: Durability) -> tuple[Runtime, Any]:
    admitted = run_admitted(
        "r-9",
        capability="t",
        admission_key="k9",
        tenant="default",
        initiator="u",
        input_json="{}",
        now_ms=1,
    )
    start = StartRun(
        session_id="r-9",
        capability="t",
        input_json="{}",
        case_id=None,
        admission_key="k9",
        tenant="default",
        initiator="u",
        admitted_hash=admitted.hash,
        admitted_ms=1,
    )
    rt, step = Runtime.start(_spec(fn, durability), start, now_ms=2)
    return rt, (admitted, step)


def test_a_live_doubt_in_a_checkpointed_run_is_recovered_at_its_slot_without_a_new_era() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        text = (await ctx.generate("scripted", "m", "hi")).text
        await ctx.checkpoint({"text": text})
        return await ctx.tool("charge", {"amount": 3})

    rt, (admitted, step) = _start(agent, Durability.CHECKPOINTED)
    records = [admitted, *step.records]
    (gen,) = step.live_calls
    step = rt.complete(
        gen.call_seq,
        Outcome.success({"text": "t", "tokens_in": 1, "tokens_out": 1, "cost_units": 0.0}),
        now_ms=3,
    )
    records += step.records
    (charge,) = step.live_calls
    assert charge.announce_first and charge.idempotency_key == "r-9/0/2"
    step = rt.in_doubt(charge.call_seq, now_ms=4)
    records += step.records
    # Unanswered within its timeout: in doubt, and the probe waits out the call's deadline.
    assert [r.kind for r in step.records] == [
        JournalKind.EFFECT_IN_DOUBT,
        JournalKind.RUN_PARKED,
    ]
    assert not step.live_calls and charge.deadline_ms is not None
    assert int(step.records[1].attrs["wake_at"]) == charge.deadline_ms
    due = charge.deadline_ms
    step = rt.deliver(Wake(session_id="r-9", reason="timer", sent_ms=due), now_ms=due)
    records += step.records
    assert [r.kind for r in step.records] == [JournalKind.EFFECT_ANNOUNCED]
    (probe,) = step.live_calls
    assert (probe.family, probe.era, probe.call_seq) == ("probe", 0, charge.call_seq)
    assert probe.idempotency_key == charge.idempotency_key
    step = rt.complete(probe.call_seq, Outcome.success({"charged": 3}), now_ms=due + 1)
    records += step.records
    assert rt.status is RunStatus.COMPLETED and rt.era == 0
    assert not any(r.kind is JournalKind.RUN_RESTORED for r in records)
    assert verify_chain(records).ok


def test_in_doubt_for_a_call_that_is_not_outstanding_is_rejected() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        return await ctx.wait_signal("go")

    rt, _ = _start(agent, Durability.REPLAYABLE)
    step = rt.in_doubt(0, now_ms=3)
    assert step.rejected is not None and not step.records


def test_buffered_signals_are_bounded() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        return await ctx.wait_signal("never-sent")

    rt, _ = _start(agent, Durability.REPLAYABLE)
    for i in range(MAX_BUFFERED_SIGNALS):
        step = rt.deliver(
            Signal(session_id="r-9", name="noise", payload_json=str(i), sent_ms=10), now_ms=10 + i
        )
        assert step.rejected is None
    step = rt.deliver(
        Signal(session_id="r-9", name="noise", payload_json="x", sent_ms=10), now_ms=999
    )
    assert step.rejected is not None and step.rejected_kind == "signals_full" and not step.records
    assert len(rt.snapshot().pending_signals) == MAX_BUFFERED_SIGNALS
