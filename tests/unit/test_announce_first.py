"""Announce before act for what costs: a generation, an HTTP or an MCP tool commits its announce
before the call leaves, so a crash mid-call leaves the intention, the retry and the cost in the
journal; only an in-process call that mutates nothing and may be repeated lets its announce
ride with its outcome — and where a call runs is the executor's word, not the agent's."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runplane.core import AgentRegistry, EffectDecl, Recovery, Runtime, StepCtx
from runplane.core.chain import run_start
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import JournalKind, RunStatus

AGENTS = AgentRegistry()


@AGENTS.agent("draft", durability="replayable")
async def draft(ctx: StepCtx, input: Any) -> Any:
    generation = await ctx.generate("model", "m", "write")
    return generation.text


@AGENTS.agent("lookup", durability="replayable", effects=[EffectDecl("lookup", mutating=False)])
async def lookup(ctx: StepCtx, input: Any) -> Any:
    return await ctx.tool("lookup", {"q": 1})


@given(
    in_process=st.booleans(),
    mutating=st.booleans(),
    recovery=st.sampled_from([None, *Recovery]),
)
def test_only_an_in_process_repeatable_read_rides_with_its_outcome(
    in_process: bool, mutating: bool, recovery: Recovery | None
) -> None:
    probe = "p" if recovery is Recovery.RECONCILE else None
    decl = EffectDecl("t", mutating=mutating, recovery=recovery, probe=probe, in_process=in_process)
    expected = in_process and not mutating and decl.effective_recovery is Recovery.RETRY
    assert decl.announce_rides is expected


def _first_call(tools: dict[str, EffectDecl], capability: str) -> Any:
    _, start = run_start(
        "r-1",
        capability=capability,
        admission_key="k-1",
        tenant="acme",
        initiator="ada",
        input_json="{}",
        now_ms=1_000,
    )
    spec = AGENTS.spec_for(capability, None)
    _, step = Runtime.start(spec, start, now_ms=1_000, tools=tools)
    (call,) = step.live_calls
    return call


def test_a_generation_announces_first() -> None:
    assert _first_call({}, "draft").announce_first


def test_the_executor_says_where_a_call_runs_not_the_agent() -> None:
    # The agent declares lookup a read; offered as an HTTP tool it still announces first,
    # offered as an in-process @tool its announce rides with its outcome.
    assert _first_call({"lookup": EffectDecl("lookup", mutating=False)}, "lookup").announce_first
    offered = {"lookup": EffectDecl("lookup", mutating=False, in_process=True)}
    assert not _first_call(offered, "lookup").announce_first


def test_a_crash_mid_generation_leaves_the_intention_the_retry_and_both_calls() -> None:
    crashed: list[str] = []

    def hook(phase: str, call: Any) -> bool:
        if call.family == "generation" and phase == "after_act" and not crashed:
            crashed.append(phase)  # the provider answered (and billed); we never recorded it
            return True
        return False

    model = ScriptedProvider(["first", "second"], name="model")
    driver = Driver(AGENTS, providers={"model": model}, crash_hook=hook)
    run = driver.run("draft", {})
    assert crashed and run.status is RunStatus.COMPLETED, run.error
    assert model.calls == 2  # paid twice: the journal says so
    gen = [r for r in run.journal if r.family == "generation"]
    kinds = [(r.kind, r.era) for r in gen]
    announced_era = kinds[0][1]
    assert kinds[0] == (JournalKind.EFFECT_ANNOUNCED, announced_era)
    assert (JournalKind.EFFECT_IN_DOUBT, kinds[1][1]) == kinds[1]
    assert gen[1].attrs["recovery"] == "retry"
    assert kinds[-1][0] is JournalKind.EFFECT_RECORDED and gen[-1].cost is not None
    assert run.output == "second"
    assert driver.verify(run.session_id).ok


def test_an_in_process_read_lost_in_a_crash_leaves_no_trace_and_is_simply_made_again() -> None:
    calls: list[int] = []
    crashed: list[str] = []

    def hook(phase: str, call: Any) -> bool:
        if call.target == "lookup" and phase == "after_act" and not crashed:
            crashed.append(phase)
            return True
        return False

    def lookup_fn(args: dict[str, Any], key: str | None) -> int:
        calls.append(1)
        return len(calls)

    driver = Driver(AGENTS, tools={"lookup": lookup_fn}, crash_hook=hook)
    run = driver.run("lookup", {})
    assert crashed and run.status is RunStatus.COMPLETED and run.output == 2
    tool = [r.kind for r in run.journal if r.family == "tool"]
    assert tool == [JournalKind.EFFECT_ANNOUNCED, JournalKind.EFFECT_RECORDED]
