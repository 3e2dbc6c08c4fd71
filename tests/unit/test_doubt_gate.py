"""A call in doubt performed again passes the sink gate again (issue 13).

The crash sits between the announce and the record: the step that announced a ``retry`` call
is committed (its snapshot names the call in flight), the outcome is lost. The restored run
finds the call in doubt and performs it again — through the gate, judged on the exact JSON it
sends, as on the first attempt: with the same policy the same decision (and the result
labelled by what it sent, not laundered to trusted); with a policy that now refuses, a
journaled ``SinkRefused`` and no second performance.
"""

from __future__ import annotations

from typing import Any

import pytest

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
from runplane.core.chain import run_start
from runplane.core.effect import EffectError
from runplane.core.engine.runtime import replay_history
from runplane.core.engine.step import Step
from runplane.core.policy import Policy, parse_policy
from runplane.testing import Driver
from runplane.wire import (
    JournalKind,
    ResultEntry,
    RunStatus,
    Signal,
    StartRun,
    TaskKind,
    Trust,
)

LENIENT = parse_policy('sinks: {"tool://post": {mutating: false}}\n')
STRICT = parse_policy('sinks: {"tool://post": {mutating: true}}\n')


async def forwards(ctx: StepCtx, input: Any) -> Any:
    memo = await ctx.wait_signal("memo")  # from outside: untrusted
    try:
        return await ctx.tool("post", {"body": memo})
    except EffectError as exc:
        return {"refused": exc.type}


def _spec(durability: Durability) -> AgentSpec:
    decl = EffectDecl("post", mutating=False, recovery=Recovery.RETRY)
    return AgentRegistry().register(
        AgentSpec("fwd", forwards, durability, None, {"post": decl}), lint=False
    )


def _start(sid: str) -> StartRun:
    _, start = run_start(
        sid,
        capability="fwd",
        admission_key=sid,
        tenant="t",
        initiator="i",
        input_json="{}",
        now_ms=1,
    )
    return start


def _announced(durability: Durability, sid: str) -> tuple[Step, dict[tuple[int, int], ResultEntry]]:
    """Run to the announce of the post, as committed; the outcome never is."""
    rt, _ = Runtime.start(_spec(durability), _start(sid), now_ms=2, policy=LENIENT)
    memo = Signal(session_id=sid, name="memo", payload_json='"pay 10000 to X"', sent_ms=3)
    step = rt.deliver(memo, now_ms=3)
    assert step.live_calls and step.snapshot.in_flight_json is not None
    return step, dict(rt.results)


def _recover(
    durability: Durability, sid: str, policy: Policy
) -> tuple[Runtime, Step, dict[tuple[int, int], ResultEntry]]:
    step, results = _announced(durability, sid)
    rt, again = Runtime.restore(_spec(durability), step.snapshot, results, now_ms=10, policy=policy)
    return rt, again, results


@pytest.mark.parametrize("durability", [Durability.REPLAYABLE, Durability.CHECKPOINTED])
def test_the_same_policy_admits_it_again_and_its_result_keeps_the_label(
    durability: Durability,
) -> None:
    rt, again, _ = _recover(durability, "s-same", LENIENT)
    kinds = [r.kind for r in again.records]
    assert JournalKind.EFFECT_IN_DOUBT in kinds
    [call] = again.live_calls  # performed again: the gate admitted it, as the first time
    done = rt.complete(call.call_seq, Outcome.success({"posted": True}), now_ms=11)
    assert done.end is RunStatus.COMPLETED
    [posted] = [e for e in rt.results.values() if e.name == "tool://post"]
    # What it sent was untrusted (the signal): the result is too, as without the crash.
    assert posted.label is not None and posted.label.trust is Trust.UNTRUSTED


@pytest.mark.parametrize("durability", [Durability.REPLAYABLE, Durability.CHECKPOINTED])
def test_a_policy_that_now_refuses_stops_the_repeat_with_a_journaled_refusal(
    durability: Durability,
) -> None:
    rt, again, _ = _recover(durability, "s-strict", STRICT)
    assert again.live_calls == ()  # never performed a second time
    assert again.end is RunStatus.COMPLETED
    assert rt.snapshot().in_flight_json is None  # the doubt is over: the call is recorded
    [refused] = [e for e in rt.results.values() if e.name == "tool://post"]
    assert refused.error is not None and refused.error.type == "SinkRefused"
    gated = [r for r in again.records if r.attrs.get("gate") == "refused"]
    assert len(gated) == 1 and gated[0].attrs["policy"] == STRICT.digest


def test_a_refusal_on_recovery_replays_as_the_same_refusal() -> None:
    """Replayed from its history: the recorded refusal is served (the gate is not asked
    again, so no policy can change it), nothing is performed."""
    rt, _, _ = _recover(Durability.REPLAYABLE, "s-replay", STRICT)
    report = replay_history(_spec(Durability.REPLAYABLE), rt.snapshot(), dict(rt.results))
    assert report.divergence is None and report.live_calls == 0
    assert report.status is RunStatus.COMPLETED
    assert report.output == {"refused": "SinkRefused"}


def test_an_operator_retry_verdict_is_gated_again() -> None:
    """Undeclared (mutating, requires_operator): the call is applied, the process dies before
    its outcome is recorded, an operator is asked. The policy is tightened before the verdict:
    the RETRY is refused by the gate, recorded, and the tool is not called a second time."""

    async def forwards_once(ctx: StepCtx, input: Any) -> Any:
        memo = await ctx.wait_signal("memo")
        try:
            return await ctx.tool("post", {"body": memo})
        except EffectError as exc:
            return {"refused": exc.type}

    spec = AgentRegistry().register(AgentSpec("fwd", forwards_once), lint=False)
    calls: list[Any] = []
    crashed: list[str] = []

    def crash_after_first_post(phase: str, call: LiveCall) -> bool:
        if phase == "after_act" and call.target == "post" and not crashed:
            crashed.append(phase)
            return True
        return False

    def post(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        calls.append(args)
        return {"posted": True}

    driver = Driver(
        spec,
        tools={"post": post},
        policy=LENIENT,
        crash_hook=crash_after_first_post,
    )
    driver.run("fwd", {}, session_id="s-op")
    run = driver.signal("s-op", "memo", "hello")
    assert run.task is not None and run.task.kind is TaskKind.OPERATOR and len(calls) == 1
    driver.policy = STRICT
    driver.crash("s-op")  # rebuilt under the policy bound now
    run = driver.decide("s-op", "RETRY")
    assert run.status is RunStatus.COMPLETED and run.output == {"refused": "SinkRefused"}
    assert len(calls) == 1  # not performed again
