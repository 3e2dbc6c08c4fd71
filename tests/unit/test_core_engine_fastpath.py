"""The engine's hot-path shortcuts keep the contracts of what they replaced.

``Step.snapshot`` is built lazily from state captured at flush; records are sealed without a
``Draft``; a freshly recorded value reaches the agent without a second decode. Each test here
compares with the slow form (``Runtime.snapshot()`` at the time, ``chain.seal(Draft)``, a
fresh ``json.loads``), so a shortcut that drifts fails.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from runplane.core import (
    AgentRegistry,
    AgentSpec,
    Durability,
    EffectDecl,
    Outcome,
    Recovery,
    Runtime,
    StepCtx,
    run_admitted,
)
from runplane.core.chain import Draft, seal
from runplane.core.verify import verify_chain
from runplane.wire import JournalRecord, RunStatus, Signal, StartRun, to_dict

_SEEN: list[Any] = []


async def _agent(ctx: StepCtx, input: Any) -> Any:
    first = await ctx.tool("instant", {"i": 1})
    _SEEN.append(first)
    first["mutated"] = True  # the agent owns what it was given: the record must not change
    second = await ctx.tool("instant", {"i": 2})
    _SEEN.append(second)
    got = await ctx.wait_signal("go")
    return {"first": first, "second": second, "got": got}


def _spec() -> AgentSpec:
    decl = EffectDecl("instant", mutating=False, recovery=Recovery.RETRY)
    return AgentRegistry().register(
        AgentSpec("fast", _agent, Durability.REPLAYABLE, None, {"instant": decl}), lint=False
    )


def _start(session_id: str) -> tuple[StartRun, JournalRecord]:
    admitted = run_admitted(
        session_id,
        capability="fast",
        admission_key="k",
        tenant="t",
        initiator="i",
        input_json="{}",
        now_ms=1,
    )
    start = StartRun(
        session_id=session_id,
        capability="fast",
        input_json="{}",
        admission_key="k",
        tenant="t",
        initiator="i",
        admitted_hash=admitted.hash,
        admitted_ms=1,
    )
    return start, admitted


def _drive() -> tuple[Runtime, list[Any], list[Any], JournalRecord]:
    """Run to the end, noting each step and the runtime's own snapshot right after it."""
    _SEEN.clear()
    start, admitted = _start("s-fast")
    rt, step = Runtime.start(_spec(), start, now_ms=2)
    steps, at_flush = [step], [rt.snapshot()]
    now = 3
    while step.live_calls:
        call = step.live_calls[0]
        step = rt.complete(
            call.call_seq,
            Outcome.success({"echo": call.request["args"]["i"], "pi": 3.25}),
            now_ms=now,
        )
        steps.append(step)
        at_flush.append(rt.snapshot())
        now += 1
    step = rt.deliver(
        Signal(session_id="s-fast", name="go", payload_json='{"x": [1, 2.0]}', sent_ms=now),
        now_ms=now,
    )
    steps.append(step)
    at_flush.append(rt.snapshot())
    return rt, steps, at_flush, admitted


def test_a_step_snapshot_read_late_is_the_runtime_snapshot_at_its_flush() -> None:
    rt, steps, at_flush, _ = _drive()
    assert rt.status is RunStatus.COMPLETED
    # Read only now, after the runtime moved on: each must still say what was true then.
    snaps = [step.snapshot for step in steps]
    assert [to_dict(s) for s in snaps] == [to_dict(s) for s in at_flush]
    assert len({s.next_seq for s in snaps}) == len(snaps)  # they really differ step to step
    assert snaps[1].in_flight_json is not None and snaps[-1].in_flight_json is None
    assert all(step.snapshot is snap for step, snap in zip(steps, snaps, strict=True))  # built once


def test_pending_signals_are_captured_not_shared() -> None:
    async def waits_late(ctx: StepCtx, input: Any) -> Any:
        await ctx.tool("instant", {"i": 0})
        return await ctx.wait_signal("go")

    decl = EffectDecl("instant", mutating=False, recovery=Recovery.RETRY)
    spec = AgentRegistry().register(
        AgentSpec("fast", waits_late, Durability.REPLAYABLE, None, {"instant": decl}), lint=False
    )
    start, _ = _start("s-sig")
    rt, first = Runtime.start(spec, start, now_ms=2)
    buffered = rt.deliver(
        Signal(session_id="s-sig", name="go", payload_json="1", sent_ms=3), now_ms=3
    )
    done = rt.complete(
        first.live_calls[0].call_seq, Outcome.success(None), now_ms=4
    )  # consumes the buffered signal
    assert done.end is RunStatus.COMPLETED
    assert [s.name for s in buffered.snapshot.pending_signals] == ["go"]
    assert done.snapshot.pending_signals == ()


def test_records_are_what_seal_of_a_draft_makes_and_the_chain_verifies() -> None:
    _, steps, _, admitted = _drive()
    records = [admitted] + [r for step in steps for r in step.records]
    results = {(e.era, e.call_seq): e for step in steps for e in step.results}
    assert verify_chain(records, results).ok
    for prev, record in itertools.pairwise(records):
        draft = Draft(
            session_id=record.session_id,
            seq=record.seq,
            era=record.era,
            kind=record.kind,
            stamp_ms=record.stamp_ms,
            call_seq=record.call_seq,
            family=record.family,
            name=record.name,
            request_witness=record.request_witness,
            body_digest=record.body_digest,
            label=record.label,
            cost=record.cost,
            attrs=record.attrs,
        )
        assert seal(draft, prev.hash) == record


def test_the_agent_gets_the_decoded_record_once_and_mutating_it_changes_nothing() -> None:
    rt, steps, _, _ = _drive()
    first_entry = rt.results[(0, 0)]
    assert json.loads(first_entry.value_json or "null") == {
        "echo": 1,
        "pi": 3.25,
    }  # not the agent's mutation
    assert _SEEN[0] == {"echo": 1, "pi": 3.25, "mutated": True}
    assert _SEEN[0] is not _SEEN[1] and _SEEN[1] == {"echo": 2, "pi": 3.25}
    # A replay decodes from the record: the same values, fresh objects.
    _SEEN.clear()
    snapshot = steps[-1].snapshot
    from runplane.core import replay_history

    report = replay_history(_spec(), snapshot, dict(rt.results))
    assert report.live_calls == 0 and report.divergence is None
    assert report.output == {
        "first": {"echo": 1, "pi": 3.25, "mutated": True},
        "second": {"echo": 2, "pi": 3.25},
        "got": {"x": [1, 2]},
    }
