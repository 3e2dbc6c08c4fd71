"""The engine's tiers, waits, recoveries and ends, through the in-memory driver."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

import examples.triage  # noqa: F401  (registers "triage")
from runplane.core import (
    REGISTRY,
    AgentRegistry,
    AgentSpec,
    Durability,
    EffectDecl,
    EffectError,
    Recovery,
    StepCtx,
    derive_random,
    evictable,
    replay_history,
    session_seed,
)
from runplane.testing import Driver, FakeClock, ScriptedProvider
from runplane.wire import JournalKind, ParkKind, RunStatus, TaskKind


def _spec(
    fn: Any, durability: Durability = Durability.REPLAYABLE, effects: tuple[EffectDecl, ...] = ()
) -> AgentSpec:
    return AgentRegistry().register(
        AgentSpec("t", fn, durability, None, {e.name: e for e in effects}), lint=False
    )


def test_clock_is_logical_and_random_is_derived_identically_on_replay() -> None:
    async def agent(ctx: StepCtx, input: Any) -> dict[str, Any]:
        a, b = ctx.now(), ctx.now()
        r = ctx.random()
        echoed = await ctx.tool("echo", {"r": r})
        c = ctx.now()
        return {"a": a, "b": b, "c": c, "r": r, "echoed": echoed, "n": ctx.randint(1, 6)}

    spec = _spec(agent, effects=(EffectDecl("echo", mutating=False),))
    driver = Driver(
        spec, tools={"echo": lambda args, key: args["r"]}, clock=FakeClock(1_000, step_ms=10)
    )
    run = driver.run("t", {}, session_id="s-1")
    out = run.output
    assert out["a"] == out["b"] == run.snapshot.started_ms  # no call between: same value
    assert out["c"] == run.results[(0, 1)].stamp_ms > out["a"]  # the recorded call's stamp
    assert out["r"] == derive_random(session_seed("s-1"), 0) and 0 <= out["r"] < 1
    assert 1 <= out["n"] <= 6
    report = replay_history(spec, run.snapshot, dict(run.results))
    assert report.output == out and report.live_calls == 0


def test_observe_is_computed_once_and_served_from_the_record() -> None:
    computed: list[int] = []

    async def agent(ctx: StepCtx, input: Any) -> Any:
        value = await ctx.observe("host", lambda: computed.append(1) or "host-a")
        await ctx.wait_signal("go")
        return value

    spec = _spec(agent)
    driver = Driver(spec)
    run = driver.run("t", {})
    driver.crash(run.session_id)
    run = driver.signal(run.session_id, "go", {"x": 1})
    assert run.output == "host-a" and computed == [1]


def test_signals_sent_early_are_kept_and_consumed_in_order() -> None:
    async def agent(ctx: StepCtx, input: Any) -> list[Any]:
        first = await ctx.tool("slow", {})
        return [first, await ctx.wait_signal("s"), await ctx.wait_signal("s")]

    spec = _spec(agent, effects=(EffectDecl("slow", mutating=False),))
    driver = Driver(spec, tools={"slow": lambda a, k: 0})
    run = driver.run("t", {})
    assert run.snapshot.parked_on is not None and run.snapshot.parked_on.kind is ParkKind.SIGNAL
    run = driver.signal(run.session_id, "s", 1)
    assert run.status is RunStatus.PARKED
    run = driver.signal(run.session_id, "s", 2)
    assert run.output == [0, 1, 2]


def test_a_buffered_signal_survives_a_rebuild() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        decision = await ctx.approval("go?", {}, role="r")
        return [decision.approved, await ctx.wait_signal("later")]

    driver = Driver(_spec(agent))
    run = driver.run("t", {})
    run = driver.signal(run.session_id, "later", "early")  # arrives while parked on the task
    assert [s.name for s in run.snapshot.pending_signals] == ["later"]
    driver.crash(run.session_id)
    run = driver.decide(run.session_id, "APPROVED")
    assert run.output == [True, "early"]


def _operator_setup() -> tuple[Driver, dict[str, int], str]:
    calls = {"n": 0}

    def pay(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        calls["n"] += 1
        return {"paid": True}

    async def agent(ctx: StepCtx, input: Any) -> Any:
        try:
            return await ctx.tool("pay", {"amount": 5}, idempotency_key="k")
        except EffectError as exc:
            return {"failed": exc.type}

    crashed: list[bool] = []

    def crash_once(phase: str, call: Any) -> bool:
        if phase == "after_act" and not crashed:
            crashed.append(True)
            return True
        return False

    # Undeclared tool: mutating, requires_operator.
    driver = Driver(_spec(agent), tools={"pay": pay}, crash_hook=crash_once)
    run = driver.run("t", {})
    return driver, calls, run.session_id


def test_requires_operator_parks_on_an_operator_task() -> None:
    driver, calls, sid = _operator_setup()
    run = driver.view(sid)
    assert calls["n"] == 1
    assert run.status is RunStatus.AWAITING_HUMAN
    assert (
        run.task is not None
        and run.task.kind is TaskKind.OPERATOR
        and run.task.task_id.endswith("/operator")
    )
    assert JournalKind.EFFECT_IN_DOUBT in [r.kind for r in run.journal]


@pytest.mark.parametrize(
    ("verdict", "comment", "output", "performed"),
    [
        ("APPROVED", '{"paid": "by operator"}', {"paid": "by operator"}, 1),
        ("RETRY", "", {"paid": True}, 2),
        ("ABANDON", "charged by phone", {"failed": "EffectAbandoned"}, 1),
    ],
)
def test_operator_verdicts_resume_the_run(
    verdict: str, comment: str, output: Any, performed: int
) -> None:
    driver, calls, sid = _operator_setup()
    run = driver.decide(sid, verdict, comment=comment)
    assert run.status is RunStatus.COMPLETED and run.output == output
    assert calls["n"] == performed
    assert driver.verify(sid).ok


def test_except_exception_cannot_swallow_a_quarantine() -> None:
    async def original(ctx: StepCtx, input: Any) -> Any:
        await ctx.tool("t", {"v": 1})
        await ctx.wait_signal("go")
        return "done"

    async def changed(ctx: StepCtx, input: Any) -> Any:
        try:
            await ctx.tool("t", {"v": 2})  # a different request than history recorded
        except Exception:
            return "swallowed"
        await ctx.wait_signal("go")
        return "done"

    decl = (EffectDecl("t", mutating=False),)
    driver = Driver(_spec(original, effects=decl), tools={"t": lambda a, k: a["v"]})
    run = driver.run("t", {})
    driver.agents = AgentRegistry([_spec(changed, effects=decl)])  # a redeploy with new code
    driver.crash(run.session_id)
    run = driver.signal(run.session_id, "go")
    assert run.status is RunStatus.QUARANTINED
    assert run.error is not None and "call_seq 0" in run.error and run.output is None
    assert run.journal[-1].kind is JournalKind.RUN_QUARANTINED


class _Foreign:
    """An awaitable from some other framework (what an event loop's future yields)."""

    def __await__(self) -> Generator[str, None, None]:
        yield "a foreign future"


def test_awaiting_anything_but_an_effect_fails_the_run() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        await _Foreign()

    run = Driver(_spec(agent)).run("t", {})
    assert (
        run.status is RunStatus.FAILED and run.error is not None and "StepCtx effects" in run.error
    )


def test_an_agent_error_fails_the_run_with_its_reason() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        raise ValueError("bad invoice")

    run = Driver(_spec(agent)).run("t", {})
    assert run.status is RunStatus.FAILED and run.error == "ValueError: bad invoice"
    assert run.journal[-1].kind is JournalKind.RUN_FAILED


def test_checkpointed_restore_starts_a_new_era_from_the_checkpoint() -> None:
    generations = ScriptedProvider(lambda m, p, k: f"text for {p}")

    async def agent(ctx: StepCtx, input: Any) -> Any:
        start = ctx.restored["step"] if ctx.restored else 0
        if start == 0:
            await ctx.generate("scripted", "m", "first")
            await ctx.checkpoint({"step": 1})
        second = await ctx.generate("scripted", "m", "second")
        await ctx.wait_signal("go")
        return {"resumed_from": start, "era": ctx.era, "text": second.text}

    driver = Driver(_spec(agent, Durability.CHECKPOINTED), providers={"scripted": generations})
    run = driver.run("t", {})
    assert generations.calls == 2
    driver.crash(run.session_id)
    run = driver.signal(run.session_id, "go")
    assert run.output == {"resumed_from": 1, "era": 1, "text": "text for second"}
    assert generations.calls == 3  # only the generation after the checkpoint was re-paid
    assert JournalKind.RUN_RESTORED in [r.kind for r in run.journal]
    assert driver.verify(run.session_id).ok


def test_triage_generation_versioned_case_write_and_deadline() -> None:
    clock = FakeClock(1_700_000_000_000)
    provider = ScriptedProvider(["billing"], name="openai")
    driver = Driver(
        REGISTRY, providers={"openai": provider}, clock=clock, cases={"case-1": {"customer": "c-9"}}
    )
    run = driver.run("triage", {"ticket": "I was charged twice"}, case_id="case-1")
    assert run.status is RunStatus.COMPLETED
    assert run.output["label"] == "billing" and run.output["case_version"] == 2
    assert driver.cases["case-1"] == (
        {"customer": "c-9", "triage": {"label": "billing", "by": run.session_id}},
        2,
    )
    due = run.output["first_response_due_ms"]
    # Resolved against the logical clock: the stamp of the step before it (the case write).
    put_entry = next(e for e in run.results.values() if e.name == "case:put_state")
    assert due == put_entry.stamp_ms + 86_400_000
    obligation = driver.obligations[("case-1", "first-response")]
    assert obligation["due_ms"] == due and obligation["warn_ms"] == due - 2 * 3_600_000
    assert JournalKind.DEADLINE_REGISTERED in [r.kind for r in run.journal]
    report = replay_history(REGISTRY.spec("triage"), run.snapshot, dict(run.results))
    assert report.output == run.output and provider.calls == 1


def test_put_case_state_is_refused_when_the_case_moved() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        current = await ctx.case_state()
        try:
            await ctx.put_case_state(current.version - 1, {"stale": True})
        except EffectError as exc:
            return {"refused": exc.type, "now_at": getattr(exc, "version", None)}
        return {"refused": None}

    driver = Driver(_spec(agent), cases={"c": {"v": 1}})
    run = driver.run("t", {}, case_id="c")
    assert run.output == {"refused": "CaseConflict", "now_at": 1}
    assert driver.cases["c"] == ({"v": 1}, 1)


def test_the_eviction_rule() -> None:
    assert evictable("replayable", idle_for_s=31, grace_s=30, outstanding=False)
    assert not evictable("replayable", idle_for_s=29, grace_s=30, outstanding=False)
    assert not evictable("replayable", idle_for_s=3600, grace_s=30, outstanding=True)
    assert not evictable(Durability.CHECKPOINTED, idle_for_s=10**6, grace_s=30, outstanding=False)


def test_retry_recovery_lets_the_announce_ride_with_the_outcome() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.tool("read", {})
        await ctx.tool("write", {}, idempotency_key="w")
        return None

    decls = (
        EffectDecl("read", mutating=False),
        EffectDecl("write", recovery=Recovery.RECONCILE, probe="p"),
    )
    seen: list[tuple[str, bool]] = []

    def hook(phase: str, call: Any) -> bool:
        if phase == "before_act":
            seen.append((call.target, call.announce_first))
        return False

    Driver(
        _spec(agent, effects=decls),
        tools={"read": lambda a, k: 1, "write": lambda a, k: 2},
        crash_hook=hook,
    ).run("t", {})
    assert seen == [("read", False), ("write", True)]
