"""A bad argument to an effect is the agent's error, never the engine's crash (review M1).

Before: ``ctx.put_case_state("x", …)`` made ``int("x")`` raise inside the engine; the
exception escaped ``Runtime.start``/``deliver`` and crash-looped the executor on the same
inbox record. Now the call fails with ``InvalidRequest`` *recorded at its slot*, so the agent
can handle it and a replay (or a rebuild after a crash) serves the same failure.
"""

from __future__ import annotations

from typing import Any

from runplane.core import (
    AgentRegistry,
    AgentSpec,
    Durability,
    EffectDecl,
    EffectError,
    Runtime,
    StepCtx,
    replay_history,
)
from runplane.core.chain import run_admitted
from runplane.testing import Driver
from runplane.wire import JournalKind, RunStatus, StartRun

CASE = "c-" + "0" * 24


def _spec(fn: Any, effects: tuple[EffectDecl, ...] = ()) -> AgentSpec:
    return AgentRegistry().register(
        AgentSpec("t", fn, Durability.REPLAYABLE, None, {e.name: e for e in effects}), lint=False
    )


def _start(fn: Any) -> tuple[Runtime, Any]:
    admitted = run_admitted(
        "r-1",
        capability="t",
        admission_key="k1",
        tenant="default",
        initiator="u",
        input_json="{}",
        now_ms=1,
        case_id=CASE,
    )
    start = StartRun(
        session_id="r-1",
        capability="t",
        input_json="{}",
        case_id=CASE,
        admission_key="k1",
        tenant="default",
        initiator="u",
        admitted_hash=admitted.hash,
        admitted_ms=1,
    )
    return Runtime.start(_spec(fn), start, now_ms=2)


def test_an_unusable_argument_fails_the_run_instead_of_escaping_the_engine() -> None:
    async def bad_version(ctx: StepCtx, input: Any) -> Any:
        return await ctx.put_case_state("x", {"a": 1})  # type: ignore[arg-type]

    rt, step = _start(bad_version)
    assert rt.status is RunStatus.FAILED
    assert [r.kind for r in step.records] == [JournalKind.EFFECT_RECORDED, JournalKind.RUN_FAILED]
    assert step.commands and not any(
        type(c).__name__ == "PutCaseState" for c in step.commands
    )  # nothing half-sent
    (entry,) = step.results
    assert entry.ok is False and entry.error is not None and entry.error.type == "InvalidRequest"
    assert "expected_version" in entry.error.message or "int" in entry.error.message


def test_the_agent_can_handle_it_and_replay_serves_the_same_failure() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        try:
            await ctx.put_case_state("x", {"a": 1})  # type: ignore[arg-type]
        except EffectError as exc:
            caught = exc.type
        echoed = await ctx.tool("echo", {"n": 1})
        await ctx.wait_signal("go")
        return {"caught": caught, "echoed": echoed}

    spec = _spec(agent, effects=(EffectDecl("echo", mutating=False),))
    driver = Driver(spec, tools={"echo": lambda args, key: args["n"]})
    run = driver.run("t", {}, case_id=CASE)
    assert run.status is RunStatus.PARKED
    driver.crash(run.session_id)  # the rebuild replays the failed slot, then the tool call
    run = driver.signal(run.session_id, "go")
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"caught": "InvalidRequest", "echoed": 1}
    assert driver.tool_calls["echo"] == 1
    assert driver.verify(run.session_id).ok
    report = replay_history(spec, run.snapshot, dict(run.results))
    assert report.output == run.output and report.live_calls == 0


def test_a_bad_declaration_is_recorded_too_so_a_rebuild_does_not_quarantine() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        try:
            # reconcile without a probe: the effective declaration cannot be built
            await ctx.tool("charge", {"x": 1}, recovery="reconcile")
        except EffectError as exc:
            first = exc.type
        await ctx.tool("echo", {"n": 2})  # a recorded call after the refused one
        await ctx.wait_signal("go")
        return first

    spec = _spec(agent, effects=(EffectDecl("echo", mutating=False),))
    driver = Driver(
        spec, tools={"charge": lambda args, key: 1, "echo": lambda args, key: args["n"]}
    )
    run = driver.run("t", {})
    driver.crash(run.session_id)
    run = driver.signal(run.session_id, "go")
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == "InvalidDeclaration"
    assert driver.tool_calls["charge"] == 0
