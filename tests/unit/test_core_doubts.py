"""Calls in doubt stay in doubt until their declared recovery resolves them, however many
times the run crashes and in whichever era (issue 3, "the durable core").

Each scenario is deterministic: a crash hook that fires at named calls, tools that count
invocations per idempotency key, a peer (``Peer``) that applies a charge once per key.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
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
from runplane.core.engine import InFlight
from runplane.core.gate import FieldRule, SinkDecl, sinks
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import JournalKind, ResultEntry, RunStatus, SessionSnapshot, TaskKind

Hook = Callable[[str, LiveCall], bool]


class Peer:
    """A billing peer: ``charge`` applies once per idempotency key and counts every call;
    ``get_charge`` (the probe) answers truthfully, unless told to be unreachable."""

    def __init__(self) -> None:
        self.applied: dict[str, dict[str, Any]] = {}
        self.invocations: Counter[str] = Counter()
        self.probes = 0
        self.probe_down = False

    def tools(self) -> dict[str, Any]:
        return {
            "charge": self.charge,
            "get_charge": self.get_charge,
            "notify": self.notify,
            "get_note": self.get_note,
        }

    def charge(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        assert key is not None
        self.invocations[f"charge:{key}"] += 1
        return self.applied.setdefault(
            f"charge:{key}", {"charged": int(args["amount"]), "key": key}
        )

    def notify(self, args: dict[str, Any], key: str | None) -> dict[str, Any]:
        assert key is not None
        self.invocations[f"notify:{key}"] += 1
        return self.applied.setdefault(f"notify:{key}", {"sent": str(args["text"])})

    def get_charge(self, args: dict[str, Any], key: str | None) -> Any:
        self.probes += 1
        if self.probe_down:
            raise ConnectionError("billing unreachable")
        return self.applied.get(f"charge:{key}")

    def get_note(self, args: dict[str, Any], key: str | None) -> Any:
        return self.applied.get(f"notify:{key}")


RECONCILED = (
    EffectDecl("charge", mutating=True, recovery=Recovery.RECONCILE, probe="get_charge"),
    EffectDecl("notify", mutating=True, recovery=Recovery.RECONCILE, probe="get_note"),
)


# The runs here read a model before they charge and notify, so the sink gate would refuse
# both stand-ins (what the gate cannot attribute carries what the run has read): declared as
# sinks whose fields carry no authority, which is what these stand-ins are.
OPEN_SINKS = (
    SinkDecl("tool://charge", protected=(FieldRule("$.amount", trusted=False),)),
    SinkDecl("tool://notify", protected=(FieldRule("$.text", trusted=False),)),
)


def _spec(
    fn: Any, durability: Durability, effects: tuple[EffectDecl, ...] = RECONCILED
) -> AgentSpec:
    return AgentRegistry().register(
        AgentSpec("t", sinks(*OPEN_SINKS)(fn), durability, None, {e.name: e for e in effects}),
        lint=False,
    )


async def drafted_charge(ctx: StepCtx, input: Any) -> Any:
    """A checkpointed agent whose model answers differently on re-execution: the note it
    sends before the charge differs from era to era, the charge does not."""
    draft = await ctx.generate("scripted", "m", "write the customer a note")
    await ctx.tool("notify", {"text": draft.text}, idempotency_key=f"note:{draft.text}")
    return await ctx.tool("charge", {"amount": 5}, idempotency_key="charge-1")


def _crash_at(*points: tuple[str, str, int]) -> tuple[Hook, list[tuple[str, str, int]]]:
    """Crash once at each (phase, tool target, era) point."""
    pending = list(points)
    fired: list[tuple[str, str, int]] = []

    def hook(phase: str, call: LiveCall) -> bool:
        point = (phase, call.target, call.era)
        if point in pending:
            pending.remove(point)
            fired.append(point)
            return True
        return False

    return hook, fired


def _charges(peer: Peer) -> int:
    return peer.invocations["charge:charge-1"]


def test_a_doubt_survives_a_second_crash_before_the_new_era_reaches_the_call() -> None:
    """The reported case: the charge is applied, then the run crashes before its outcome is
    recorded (in doubt). The next era sends a different note first — a mutating call, so its
    announce is committed — and crashes again before it reaches the charge. Before the fix that
    commit dropped the doubt, and the third era charged again."""
    peer = Peer()
    hook, fired = _crash_at(("after_act", "charge", 0), ("before_act", "notify", 1))
    provider = ScriptedProvider(["draft A", "draft B"])  # era 0: A, era 1: B, era 2: A again
    driver = Driver(
        _spec(drafted_charge, Durability.CHECKPOINTED),
        tools=peer.tools(),
        providers={"scripted": provider},
        crash_hook=hook,
    )
    run = driver.run("t", {}, session_id="run-d")

    assert fired == [("after_act", "charge", 0), ("before_act", "notify", 1)]
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.snapshot.era == 2
    assert _charges(peer) == 1  # never charged twice
    assert run.output == {"charged": 5, "key": "charge-1"}
    assert peer.probes == 1  # the third era reconciled instead of charging
    # The doubt was journaled as a fact when the crash was found, naming the announce's slot.
    doubts = [
        r
        for r in run.journal
        if r.kind is JournalKind.EFFECT_IN_DOUBT and r.name == "tool://charge"
    ]
    assert (doubts[0].era, doubts[0].call_seq) == (0, 2)
    reconciled = [e for e in run.results.values() if e.name == "tool://charge"]
    assert len(reconciled) == 1 and reconciled[0].era == 2
    assert driver.verify(run.session_id).ok


async def one_charge(ctx: StepCtx, input: Any) -> Any:
    return await ctx.tool("charge", {"amount": 7}, idempotency_key="charge-1")


def _operator_spec(durability: Durability) -> AgentSpec:
    # Undeclared: mutating, requires_operator.
    return _spec(one_charge, durability, ())


def test_a_retry_verdict_is_announced_before_the_call_is_performed_again() -> None:
    """The operator says RETRY; the process dies after performing the call, before its outcome
    is durable. The verdict's step (with a fresh announce) was committed first, so the restored
    run finds the call in doubt again and asks again — it does not perform it a third time."""
    for durability in (Durability.REPLAYABLE, Durability.CHECKPOINTED):
        peer = Peer()
        hook, _ = _crash_at(("after_act", "charge", 0))
        driver = Driver(_operator_spec(durability), tools=peer.tools(), crash_hook=hook)
        run = driver.run("t", {}, session_id="run-r")
        assert (
            run.status is RunStatus.AWAITING_HUMAN
            and run.task is not None
            and run.task.kind is TaskKind.OPERATOR
        )
        first_task = run.task.task_id
        retried_era = run.snapshot.era
        driver.crash_hook, fired = _crash_at(("after_act", "charge", retried_era))
        run = driver.decide("run-r", "RETRY")
        assert fired, durability
        assert _charges(peer) == 2  # the original and the operator's retry; not a third
        assert run.status is RunStatus.AWAITING_HUMAN, (durability, run.error)
        assert (
            run.task is not None and run.task.task_id != first_task
        )  # a new question, not the decided one
        announces = [
            r
            for r in run.journal
            if r.kind is JournalKind.EFFECT_ANNOUNCED and r.attrs.get("verdict") == "retry"
        ]
        assert len(announces) == 1, durability
        run = driver.decide(
            "run-r", "APPROVED", comment=json.dumps({"charged": 7, "key": "charge-1"})
        )
        assert run.status is RunStatus.COMPLETED and _charges(peer) == 2
        assert driver.verify("run-r").ok


def test_a_retry_verdict_lost_before_its_commit_is_decided_again_without_a_call() -> None:
    peer = Peer()
    hook, _ = _crash_at(("after_act", "charge", 0))
    driver = Driver(_operator_spec(Durability.REPLAYABLE), tools=peer.tools(), crash_hook=hook)
    driver.run("t", {}, session_id="run-l")
    driver.crash_hook, fired = _crash_at(("before_act", "charge", 0))
    run = driver.decide("run-l", "RETRY")
    # The verdict's step was committed before the call; the crash came before the call: the
    # restored run finds the call in doubt and asks again; nothing was performed.
    assert fired and _charges(peer) == 1
    assert run.status is RunStatus.AWAITING_HUMAN and run.task is not None
    run = driver.decide("run-l", "RETRY")
    assert run.status is RunStatus.COMPLETED and _charges(peer) == 2
    assert driver.verify("run-l").ok


def test_a_checkpointed_run_restored_while_parked_on_an_operator_task_asks_again_and_withdraws_the_old_task() -> (
    None
):
    peer = Peer()
    hook, _ = _crash_at(("after_act", "charge", 0))
    driver = Driver(_operator_spec(Durability.CHECKPOINTED), tools=peer.tools(), crash_hook=hook)
    run = driver.run("t", {}, session_id="run-o")
    assert run.task is not None
    old_task = run.task.task_id
    for _ in range(2):  # restarted twice while the operator has not answered
        driver.crash("run-o")
        run = driver.wake("run-o")
        assert run.status is RunStatus.AWAITING_HUMAN and _charges(peer) == 1
    assert old_task in driver.closed_tasks
    assert len(run.open_tasks) == 1 and run.task is not None and run.task.task_id != old_task
    run = driver.decide("run-o", "APPROVED", comment=json.dumps({"charged": 7, "key": "charge-1"}))
    assert run.status is RunStatus.COMPLETED and _charges(peer) == 1
    assert run.output == {"charged": 7, "key": "charge-1"}
    assert driver.verify("run-o").ok


def test_a_crash_during_the_probe_probes_again_and_never_charges_twice() -> None:
    for durability in (Durability.REPLAYABLE, Durability.CHECKPOINTED):
        peer = Peer()
        # The restore commits its wait for the charge's deadline before the probe asks, so a
        # checkpointed run comes back in a new era after each crash (1, then 2); a replayable
        # one stays in era 0.
        era = 1 if durability is Durability.CHECKPOINTED else 0
        hook, fired = _crash_at(
            ("after_act", "charge", 0),
            ("before_act", "get_charge", era),
            ("after_act", "get_charge", 2 * era),
        )
        driver = Driver(_spec(one_charge, durability), tools=peer.tools(), crash_hook=hook)
        run = driver.run("t", {}, session_id="run-p")
        assert len(fired) == 3, (durability, fired)
        assert run.status is RunStatus.COMPLETED and _charges(peer) == 1, durability
        assert (
            peer.probes == 2
        )  # the first probe never ran (crash before it); the second was lost; the third answered
        assert driver.verify("run-p").ok


def test_an_unreachable_probe_escalates_to_an_operator_and_a_repeat_gets_a_new_task_id() -> None:
    """Replayable: the probe fails → operator task; RETRY performs; a crash after the act →
    in doubt again → the probe fails again → a second operator task, with a new id (the
    worklist ignores an OpenTask for an id it has seen, which would strand the run)."""
    peer = Peer()
    peer.probe_down = True
    hook, _ = _crash_at(("after_act", "charge", 0))
    driver = Driver(_spec(one_charge, Durability.REPLAYABLE), tools=peer.tools(), crash_hook=hook)
    run = driver.run("t", {}, session_id="run-u")
    assert run.task is not None and run.task.kind is TaskKind.OPERATOR
    first = run.task.task_id
    driver.crash_hook, _ = _crash_at(("after_act", "charge", 0))
    run = driver.decide("run-u", "RETRY")
    assert run.task is not None and run.task.task_id != first
    assert len(set(driver.tasks_opened)) == len(driver.tasks_opened) == 2
    peer.probe_down = False
    run = driver.decide("run-u", "APPROVED", comment="")
    assert run.status is RunStatus.COMPLETED and _charges(peer) == 2


def test_in_flight_reads_snapshots_written_before_doubts_were_carried() -> None:
    old = '{"call_seq":3,"era":1,"family":"tool","name":"tool://charge","recovery":"reconcile","witness":"w"}'
    flight = InFlight.from_json(old)
    assert (flight.era, flight.call_seq, flight.origin, flight.asks) == (1, 3, "1/3", 0)
    assert InFlight.from_json(flight.to_json()) == flight
    # What a snapshot without carried doubts holds is unchanged, byte for byte.
    assert flight.to_json() == old


def test_the_committed_snapshot_alone_carries_the_doubt_to_any_later_restore() -> None:
    """What era 1 committed before its crash names the charge from era 0; a restore from that
    snapshot — in any process, any number of times — probes before it could charge."""
    peer = Peer()
    provider = ScriptedProvider(["draft A", "draft B"])
    spec = _spec(drafted_charge, Durability.CHECKPOINTED)
    inner, _ = _crash_at(("after_act", "charge", 0), ("before_act", "notify", 1))
    seen: list[tuple[SessionSnapshot, dict[tuple[int, int], ResultEntry]]] = []

    def hook(phase: str, call: LiveCall) -> bool:
        crash = inner(phase, call)
        if crash and call.era == 1:
            session = driver.sessions["run-x"]
            assert session.snapshot is not None
            seen.append((session.snapshot, dict(session.results)))
        return crash

    driver = Driver(spec, tools=peer.tools(), providers={"scripted": provider}, crash_hook=hook)
    driver.run("t", {}, session_id="run-x")
    ((snapshot, results),) = seen
    assert snapshot.era == 1 and snapshot.doubts_json is not None
    carried = json.loads(snapshot.doubts_json)
    assert [(d["era"], d["call_seq"], d["name"]) for d in carried] == [(0, 2, "tool://charge")]
    later = 1_800_000_000_000  # past the charge's deadline: the probe need not wait
    for _ in range(2):
        runtime, step = Runtime.restore(spec, snapshot, results, now_ms=later)
        while step.live_calls and step.live_calls[0].family == "generation":
            call = step.live_calls[0]
            step = runtime.complete(
                call.call_seq,
                Outcome.success(
                    {"text": "draft A", "tokens_in": 1, "tokens_out": 1, "cost_units": 0.0}
                ),
                now_ms=later + 1,
            )
        # Era 2 sends the era-0 note again (served from the log) and reaches the charge: a probe.
        assert [(c.family, c.target) for c in step.live_calls] == [("probe", "get_charge")]
        assert runtime.era == 2


async def draft_then_charge(ctx: StepCtx, input: Any) -> Any:
    draft = await ctx.generate("scripted", "m", "how much?")
    return await ctx.tool(
        "charge", {"amount": len(draft.text)}, idempotency_key=f"charge:{draft.text}"
    )


def test_a_doubt_the_run_never_reaches_again_is_named_when_the_run_ends() -> None:
    """The re-executed generation answers differently, so the new era charges another amount
    (another key) and never asks for the call in doubt: its end record names it for an
    operator, and the terminal snapshot keeps it."""
    peer = Peer()
    hook, _ = _crash_at(("after_act", "charge", 0))
    driver = Driver(
        _spec(draft_then_charge, Durability.CHECKPOINTED),
        tools=peer.tools(),
        providers={"scripted": ScriptedProvider(["one", "three"])},
        crash_hook=hook,
    )
    run = driver.run("t", {}, session_id="run-n")
    assert run.status is RunStatus.COMPLETED
    assert peer.invocations == Counter({"charge:charge:one": 1, "charge:charge:three": 1})
    end = run.journal[-1]
    assert end.kind is JournalKind.RUN_COMPLETED and end.attrs["in_doubt"] == "0/1"
    assert run.snapshot.doubts_json is not None and [
        (d["era"], d["call_seq"]) for d in json.loads(run.snapshot.doubts_json)
    ] == [(0, 1)]
