"""A run's stated limits, refused with typed errors before anything could wedge a partition,
and continue-as-new: a linked successor with a fresh history."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from runplane.core import (
    AgentRegistry,
    AgentSpec,
    Durability,
    EffectDecl,
    Recovery,
    StepCtx,
    replay_history,
)
from runplane.core.effect import EffectError
from runplane.core.engine.successor import successor_id
from runplane.core.limits import HISTORY_GRACE, Limits, limits_from_env
from runplane.errors import ConfigError
from runplane.testing import Driver
from runplane.wire import RunStatus


def _spec(fn: Any, *effects: EffectDecl) -> AgentSpec:
    return AgentRegistry().register(
        AgentSpec("t", fn, Durability.REPLAYABLE, None, {e.name: e for e in effects}), lint=False
    )


BLOB = EffectDecl("blob", mutating=False, recovery=Recovery.RETRY)


def test_a_result_over_the_limit_fails_the_call_and_keeps_no_body() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        try:
            await ctx.tool("blob", {"n": 5000})
        except EffectError as exc:
            return {"refused": exc.type}
        return "kept"

    driver = Driver(
        _spec(agent, BLOB),
        tools={"blob": lambda args, key: "x" * args["n"]},
        limits=Limits(max_result_bytes=1000),
    )
    run = driver.run("t", {}, session_id="s")
    assert run.output == {"refused": "ResultTooLarge"}
    entry = run.results[(0, 0)]
    assert not entry.ok and entry.value_json is None and entry.error is not None
    assert driver.verify("s").ok


def test_an_output_over_the_limit_fails_the_run() -> None:
    async def agent(ctx: StepCtx, input: Any) -> str:
        return "y" * 5000

    driver = Driver(_spec(agent), limits=Limits(max_result_bytes=1000))
    run = driver.run("t", {}, session_id="s")
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.startswith("ResultTooLarge") and run.snapshot.output_json is None


def test_a_long_history_is_refused_and_the_agent_continues_as_new() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        count = int(input["count"])
        try:
            while True:
                await ctx.observe("tick", lambda: 1)
                count += 1
        except EffectError as exc:
            assert exc.type == "HistoryTooLong"
            if count >= 12:
                return {"total": count}
            return await ctx.continue_as_new({"count": count})

    spec = _spec(agent)
    driver = Driver(spec, limits=Limits(max_journal_records=10))
    first = driver.run("t", {"count": 0}, session_id="r-a")
    assert first.status is RunStatus.COMPLETED
    nxt = successor_id("r-a")
    assert first.output == {"continued_as": nxt}
    assert first.journal[-1].attrs["continued_as"] == nxt
    second = driver.view(nxt)
    assert second.journal[0].attrs["continued_from"] == "r-a"
    # ... and the hash of the record that named the successor.
    assert second.journal[0].attrs["predecessor_hash"] == first.journal[-2].hash
    # Each generation ticks 9 times (seq 1-9) before its history is full: 9 + 9.
    assert second.status is RunStatus.COMPLETED and second.output == {"total": 18}
    assert driver.verify("r-a").ok and driver.verify(nxt).ok
    report = replay_history(spec, first.snapshot, dict(first.results))
    assert report.divergence is None and report.output == first.output


def test_an_agent_that_ignores_the_history_limit_is_failed_after_the_grace() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        while True:
            with contextlib.suppress(EffectError):  # ignores HistoryTooLong: failed later
                await ctx.observe("tick", lambda: 1)

    driver = Driver(_spec(agent), limits=Limits(max_journal_records=10))
    run = driver.run("t", {}, session_id="s")
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.startswith("HistoryTooLong")
    assert len(run.journal) <= 10 + HISTORY_GRACE + 2


def test_buffered_signals_are_bounded_by_count_bytes_and_size() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.sleep(60)
        return [await ctx.wait_signal("s") for _ in range(3)]

    driver = Driver(
        _spec(agent),
        limits=Limits(max_buffered_signals=2, max_buffered_bytes=100, max_signal_bytes=60),
    )
    driver.run("t", {}, session_id="s")
    start = len(driver.view("s").journal)
    driver.signal("s", "s", "x" * 70)  # over max_signal_bytes
    driver.signal("s", "s", "a" * 40)
    driver.signal("s", "s", "b" * 40)
    driver.signal("s", "s", "c" * 40)  # over max_buffered_bytes (and the count)
    view = driver.view("s")
    assert len(view.snapshot.pending_signals) == 2 and len(view.journal) == start + 2


def test_limits_come_from_the_environment() -> None:
    env = {"RUNPLANE_MAX_RESULT_BYTES": "2048", "RUNPLANE_MAX_JOURNAL_RECORDS": ""}
    assert limits_from_env(env) == Limits(max_result_bytes=2048)
    with pytest.raises(ConfigError):
        limits_from_env({"RUNPLANE_MAX_BUFFERED_SIGNALS": "0"})
    with pytest.raises(ConfigError):
        limits_from_env({"RUNPLANE_MAX_SIGNAL_BYTES": "lots"})


def test_successor_ids_count_generations() -> None:
    assert successor_id("r-1") == "r-1.n1"
    assert successor_id("r-1.n1") == "r-1.n2"
    assert successor_id("r.nx") == "r.nx.n1"
