"""Operating a run through the engine: signals (idempotent, attributed), durable timers and
timeouts, cancel — in memory, through the driver."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.core import (
    AgentRegistry,
    AgentSpec,
    Durability,
    EffectDecl,
    Recovery,
    StepCtx,
    replay_history,
)
from runplane.core.chain import run_start
from runplane.core.effect import RunCancelled, WaitTimedOut, minutes
from runplane.core.engine import Outcome, Runtime
from runplane.core.waits import timer_request
from runplane.testing import Driver, FakeClock
from runplane.wire import JournalKind, RunStatus, Signal, Trust


def _spec(fn: Any, effects: tuple[EffectDecl, ...] = ()) -> AgentSpec:
    return AgentRegistry().register(
        AgentSpec("t", fn, Durability.REPLAYABLE, None, {e.name: e for e in effects}), lint=False
    )


def _kinds(run: Any) -> list[JournalKind]:
    return [r.kind for r in run.journal]


# ------------------------------------------------------------------------------ signals
async def _two_signals(ctx: StepCtx, input: Any) -> list[Any]:
    return [await ctx.wait_signal("go"), await ctx.wait_signal("go")]


def test_a_signal_id_is_accepted_once_and_journaled_with_its_sender() -> None:
    driver = Driver(_spec(_two_signals))
    driver.run("t", {}, session_id="s")
    first = driver.signal("s", "go", {"n": 1}, signal_id="sig-1", sent_by="ada")
    assert first.status is RunStatus.PARKED
    again = driver.signal("s", "go", {"n": 99}, signal_id="sig-1", sent_by="ada")
    assert again.journal == first.journal and again.status is RunStatus.PARKED
    done = driver.signal("s", "go", {"n": 2}, signal_id="sig-2", sent_by="bob")
    assert done.status is RunStatus.COMPLETED and done.output == [{"n": 1}, {"n": 2}]
    received = [r for r in done.journal if r.kind is JournalKind.SIGNAL_RECEIVED]
    assert [(r.attrs["signal_id"], r.attrs["sent_by"]) for r in received] == [
        ("sig-1", "ada"),
        ("sig-2", "bob"),
    ]
    assert all(r.label.trust is Trust.UNTRUSTED for r in received)
    assert "principal/ada" in received[0].label.provenance
    assert driver.verify("s").ok


def test_a_buffered_signal_is_deduplicated_too() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.sleep(60)
        return [await ctx.wait_signal("go"), await ctx.wait_signal("go", timeout=1)]

    driver = Driver(_spec(agent))
    driver.run("t", {}, session_id="s")
    driver.signal("s", "go", 1, signal_id="a")
    driver.signal("s", "go", 1, signal_id="a")  # buffered once only
    driver.advance(61_000)
    run = driver.view("s")
    assert run.status is RunStatus.PARKED  # the second wait has nothing buffered
    driver.advance(2_000)
    failed = driver.view("s")
    assert failed.status is RunStatus.FAILED
    assert failed.error is not None and "WaitTimedOut" in failed.error


# ------------------------------------------------------------------------------ timers
def test_sleep_wakes_at_its_journaled_instant_after_a_crash_and_replays_without_a_clock() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        start = ctx.now()
        woke = await ctx.sleep(dt.timedelta(minutes=5))
        return {"slept": woke - start}

    spec = _spec(agent)
    driver = Driver(spec, clock=FakeClock(1_000_000, step_ms=1))
    run = driver.run("t", {}, session_id="s")
    parked = [r for r in run.journal if r.kind is JournalKind.RUN_PARKED]
    assert run.status is RunStatus.PARKED and parked[-1].attrs["parked_on"] == "timer"
    due = int(parked[-1].attrs["wake_at"])
    assert run.snapshot.wake_at_ms == due
    driver.crash("s")
    driver.advance(60_000)  # not yet due
    assert driver.view("s").status is RunStatus.PARKED
    driver.advance(300_000)
    done = driver.view("s")
    assert done.status is RunStatus.COMPLETED and done.output == {"slept": 300_000}
    assert done.snapshot.wake_at_ms is None and driver.verify("s").ok
    report = replay_history(spec, done.snapshot, dict(done.results))
    assert report.output == done.output and report.live_calls == 0


def test_a_calendar_rule_is_resolved_once_like_a_deadline() -> None:
    async def agent(ctx: StepCtx, input: Any) -> int:
        return int(await ctx.sleep(minutes(2)))

    driver = Driver(_spec(agent), clock=FakeClock(0, step_ms=1))
    run = driver.run("t", {}, session_id="s")
    assert run.snapshot.wake_at_ms == 120_000 + run.snapshot.started_ms
    driver.advance(200_000)
    assert driver.view("s").output == run.snapshot.wake_at_ms


def test_a_signal_before_its_timeout_drops_the_timer_and_a_late_one_times_out() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        got = await ctx.wait_signal("go", timeout=30)
        try:
            await ctx.wait_signal("again", timeout=30)
        except WaitTimedOut:
            return {"got": got, "second": "timed out"}
        return {"got": got}

    driver = Driver(_spec(agent))
    driver.run("t", {}, session_id="s")
    parked = driver.signal("s", "go", "x")
    assert parked.status is RunStatus.PARKED and parked.snapshot.wake_at_ms is not None
    driver.advance(31_000)
    done = driver.view("s")
    assert done.output == {"got": "x", "second": "timed out"} and driver.verify("s").ok


def test_an_approval_timeout_withdraws_its_task() -> None:
    async def agent(ctx: StepCtx, input: Any) -> str:
        try:
            await ctx.approval("ok?", {}, role="finance", timeout=minutes(10))
        except WaitTimedOut:
            return "nobody answered"
        return "answered"

    driver = Driver(_spec(agent))
    run = driver.run("t", {}, session_id="s")
    assert run.status is RunStatus.AWAITING_HUMAN
    driver.advance(11 * 60_000)
    done = driver.view("s")
    assert done.output == "nobody answered" and driver.closed_tasks == [run.open_tasks[0].task_id]


def test_an_approval_without_timeout_keeps_its_witness() -> None:
    ctx = StepCtx.__new__(StepCtx)
    effect = ctx.approval("q", {}, role="r")
    assert "timeout" not in effect.request
    assert "timeout" not in ctx.wait_signal("s").request


@given(st.integers(min_value=0, max_value=10**9))
def test_timer_requests_are_canonical(seconds: int) -> None:
    assert timer_request(seconds, None, "wall") == {"ms": seconds * 1000}
    assert timer_request(dt.timedelta(seconds=seconds), None, "wall") == {"ms": seconds * 1000}
    assert timer_request(None, seconds, "wall") == {"until": seconds}


@pytest.mark.parametrize(
    ("duration", "until"), [(None, None), (1, 5), (-1, None), ("5", None), (None, -3)]
)
def test_a_bad_timer_request_is_refused(duration: Any, until: Any) -> None:
    with pytest.raises(ValueError):
        timer_request(duration, until, "wall")


# ------------------------------------------------------------------------------ cancel
def test_cancel_while_parked_reverses_open_groups_and_ends_cancelled() -> None:
    undone: list[Any] = []

    async def agent(ctx: StepCtx, input: Any) -> Any:
        async with ctx.group("checkout", ["hold"]) as g:
            await g.reversible("hold", "reserve", {"sku": "a"}, undo=lambda out: ("release", out))
            await ctx.wait_signal("paid")
            await g.commit()
        return "done"

    def release(args: Any, key: Any) -> Any:
        undone.append(args)
        return {"released": True}

    tools = {"reserve": lambda args, key: {"hold": "h1"}, "release": release}
    decls = (
        EffectDecl("reserve", mutating=True, recovery=Recovery.RETRY),
        EffectDecl("release", mutating=True, recovery=Recovery.RETRY),
    )
    driver = Driver(_spec(agent, decls), tools=tools)
    driver.run("t", {}, session_id="s")
    done = driver.cancel("s", "customer withdrew", by="ada")
    assert done.status is RunStatus.FAILED and done.error is not None
    assert done.error.startswith("RunCancelled")
    assert undone == [{"hold": "h1"}]
    kinds = _kinds(done)
    assert kinds.count(JournalKind.CANCEL_REQUESTED) == 1 and kinds[-1] is JournalKind.RUN_CANCELLED
    end = done.journal[-1]
    assert end.attrs["cancelled_by"] == "ada" and end.attrs["reason"] == "customer withdrew"
    assert driver.verify("s").ok
    report = replay_history(_spec(agent, decls), done.snapshot, dict(done.results))
    assert report.live_calls == 0 and report.divergence is None


def test_cancel_withdraws_an_open_approval_task_and_a_second_cancel_changes_nothing() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        try:
            await ctx.approval("ok?", {}, role="finance")
        except RunCancelled as exc:
            return f"cleaned up: {exc.message}"
        return "approved"

    driver = Driver(_spec(agent))
    run = driver.run("t", {}, session_id="s")
    done = driver.cancel("s", "stop", by="ada")
    assert done.status is RunStatus.FAILED and driver.closed_tasks == [run.open_tasks[0].task_id]
    again = driver.cancel("s", "stop", by="ada")
    assert again.journal == done.journal


def test_cancel_during_a_live_call_waits_for_its_outcome() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.tool("charge", {"n": 1})
        await ctx.tool("charge", {"n": 2})
        return "charged twice"

    decl = EffectDecl("charge", mutating=True, recovery=Recovery.REQUIRES_OPERATOR)
    spec = _spec(agent, (decl,))
    _, start = run_start(
        "s",
        capability="t",
        admission_key="k",
        tenant="test",
        initiator="i",
        input_json="{}",
        now_ms=1,
    )
    runtime, step = Runtime.start(spec, start, now_ms=2)
    assert step.announce_first and len(step.live_calls) == 1  # the first charge is in flight
    cancel = Signal(
        session_id="s",
        name="runplane.cancel",
        payload_json='{"reason":"now"}',
        sent_ms=3,
        sent_by="ada",
        signal_id="c-1",
    )
    asked = runtime.deliver(cancel, now_ms=3)
    assert [r.kind for r in asked.records] == [JournalKind.CANCEL_REQUESTED]
    assert not asked.live_calls and asked.snapshot.cancel_json is not None
    done = runtime.complete(0, Outcome(ok=True, value={"ok": True}), now_ms=4)
    kinds = [r.kind for r in done.records]
    assert kinds[0] is JournalKind.EFFECT_RECORDED  # the call in flight got its disposition
    assert kinds[-1] is JournalKind.RUN_CANCELLED and not done.live_calls  # no second charge
    assert done.results[-1].error is not None and done.results[-1].error.type == "RunCancelled"
    chain = [*step.records, *asked.records, *done.records]
    assert [r.seq for r in chain] == list(range(1, len(chain) + 1))


def test_a_cancel_without_a_requester_is_refused() -> None:
    driver = Driver(_spec(_two_signals))
    driver.run("t", {}, session_id="s")
    before = driver.view("s")
    after = driver.cancel("s", "x", by=" ")
    assert after.journal == before.journal and after.status is RunStatus.PARKED


# ------------------------------------------------------------------------------ the examples
def _example_driver() -> Driver:
    import examples.operate as ops
    from runplane.core import REGISTRY

    tools = {
        "reserve_stock": lambda args, key: ops.reserve_stock(**args),
        "release_stock": lambda args, key: ops.release_stock(**args),
    }
    return Driver(REGISTRY, tools=tools)


def test_await_payment_completes_on_its_signal() -> None:
    driver = _example_driver()
    driver.run("await_payment", {"sku": "a"}, session_id="s")
    done = driver.signal("s", "payment_received", {"amount": 3}, signal_id="p-1")
    assert done.output == {"status": "paid", "hold": "hold-a", "payment": {"amount": 3}}


def test_await_payment_releases_its_stock_on_timeout_and_on_cancel() -> None:
    driver = _example_driver()
    driver.run("await_payment", {"sku": "a"}, session_id="late")
    driver.advance(31 * 60_000)
    assert driver.view("late").output == {"status": "expired"}
    driver.run("await_payment", {"sku": "b"}, session_id="gone")
    gone = driver.cancel("gone", "customer withdrew", by="ada")
    assert gone.status is RunStatus.FAILED and gone.journal[-1].kind is JournalKind.RUN_CANCELLED
    assert driver.tool_calls["release_stock"] == 2


def test_a_checkpointed_run_restored_mid_clean_up_cleans_up_from_the_same_wait() -> None:
    crashed: list[str] = []

    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.checkpoint({"at": "start"})
        try:
            await ctx.wait_signal("go")
        except RunCancelled:
            await ctx.tool("cleanup", {})
        return "not reached after a cancel"

    def crash_once(phase: str, call: Any) -> bool:
        if phase == "before_act" and not crashed:
            crashed.append(phase)
            return True
        return False

    spec = AgentRegistry().register(
        AgentSpec(
            "t",
            agent,
            Durability.CHECKPOINTED,
            None,
            {
                # Reconciled: its announce commits before the act, so the crash leaves era 0's
                # "told" durable and the call in doubt, resolved by the probe in era 1.
                "cleanup": EffectDecl(
                    "cleanup", mutating=True, recovery=Recovery.RECONCILE, probe="cleaned"
                ),
                "cleaned": EffectDecl("cleaned", mutating=False, recovery=Recovery.RETRY),
            },
        ),
        lint=False,
    )
    tools = {"cleanup": lambda args, key: "ok", "cleaned": lambda args, key: None}
    driver = Driver(spec, tools=tools, crash_hook=crash_once)
    driver.run("t", {}, session_id="s")
    done = driver.cancel("s", "stop", by="ada")
    assert crashed and done.status is RunStatus.FAILED and done.snapshot.era == 1
    assert done.journal[-1].kind is JournalKind.RUN_CANCELLED
    told = [e for e in done.results.values() if e.error is not None]
    # Told once, at the wait in era 0; era 1 re-reaches that wait and the side-effect log
    # serves the same RunCancelled (recorded as era 1's reconstruction of it) ...
    assert [(e.era, e.call_seq, e.name) for e in told] == [(0, 1, "go"), (1, 1, "go")]
    # ... so the clean-up runs again from there, and the call its crash left in doubt is
    # resolved by its probe (never happened → performed once).
    assert "in_doubt" not in done.journal[-1].attrs
    assert driver.tool_calls["cleanup"] == 1 and driver.verify("s").ok


def test_a_checkpointed_run_restored_while_it_sleeps_keeps_its_instant() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.checkpoint({"at": "start"})
        return await ctx.sleep(600)

    spec = AgentRegistry().register(
        AgentSpec("t", agent, Durability.CHECKPOINTED, None, {}), lint=False
    )
    driver = Driver(spec, clock=FakeClock(0, step_ms=1))
    parked = driver.run("t", {}, session_id="s")
    due = parked.snapshot.wake_at_ms
    assert due is not None
    driver.crash("s")
    driver.advance(300_000)  # a message rebuilds it in a new era: it sleeps on, same instant
    driver.wake("s")
    again = driver.view("s")
    assert again.snapshot.era == 1 and again.snapshot.wake_at_ms == due
    driver.advance(301_000)
    done = driver.view("s")
    assert done.status is RunStatus.COMPLETED and done.output == due
