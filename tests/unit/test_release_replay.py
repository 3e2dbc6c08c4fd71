"""``ctx.release`` across crashes and replays: a person is asked once; a recorded decision is
served, never asked again; a sensitivity release opens a lower ceiling at its sink only."""

from __future__ import annotations

from typing import Any

import pytest

from runplane.core import AgentRegistry, AgentSpec, Durability, StepCtx, replay_history
from runplane.core.gate import SinkDecl, sinks
from runplane.core.labels import Labeled
from runplane.core.releases import SinkRefused
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import Label, RunStatus, Sensitivity, Trust

SECRET = Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.SECRET, provenance=("tool://vault",))
PUBLIC_MODELS = (
    SinkDecl("model:p/public", mutating=False, ceiling=Sensitivity.PUBLIC),
    SinkDecl("model:p/other", mutating=False, ceiling=Sensitivity.PUBLIC),
)


async def summarise(ctx: StepCtx, input: Any) -> Any:
    figure = Labeled(input["figure"], SECRET)  # the agent knows this one is secret
    released = await ctx.release(
        figure.value,
        destination="model:p/public",
        field="$[1].content",
        basis="published in the annual report",
        trust=False,
        sensitivity="PUBLIC",
        role="comms",
    )
    out = {}
    for model in ("other", "public"):
        try:
            answer = await ctx.generate(
                "p",
                model,
                [{"role": "system", "content": "summarise"}, {"role": "user", "content": released}],
            )
            out[model] = answer.text
        except SinkRefused:
            out[model] = "refused"
    try:
        await ctx.generate("p", "public", [{"role": "user", "content": figure}])
    except SinkRefused:
        out["unreleased"] = "refused"
    return out


@pytest.mark.parametrize("durability", list(Durability))
def test_a_release_waits_for_one_person_across_a_crash_and_replays_without_asking(
    durability: Durability,
) -> None:
    spec = AgentRegistry().register(
        AgentSpec("sum", sinks(*PUBLIC_MODELS)(summarise), durability=durability), lint=False
    )
    driver = Driver(spec, providers={"p": ScriptedProvider(["fine"], name="p")})
    run = driver.run("sum", {"figure": "revenue grew 12.5 percent to 4,200,000 EUR"})
    assert run.status is RunStatus.AWAITING_HUMAN and run.task is not None
    assert run.task.role == "comms" and "sensitivity PUBLIC" in run.task.question
    driver.crash(run.session_id)
    driver.wake(run.session_id)  # rebuilt while parked: waits again, asks nobody new
    assert len(driver.tasks_opened) == 1
    run = driver.decide(run.session_id, "APPROVED", by=("carol",))
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"other": "refused", "public": "fine", "unreleased": "refused"}
    assert len(driver.tasks_opened) == 1
    report = replay_history(spec, run.snapshot, dict(run.results))
    assert (report.output, report.live_calls, report.divergence) == (run.output, 0, None)


def test_label_of_sees_what_the_gate_sees_and_replays_the_same() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        first = ctx.label_of("a constant of the agent's code").trust  # nothing read yet
        answer = await ctx.generate("p", "m", "who?")
        account = answer.text.split()[-1]
        before = ctx.label_of(account)
        crm = await ctx.tool("crm", {"q": 1}, mutating=False)
        return {
            "model": [before.trust, sorted(before.provenance)],
            "crm": [ctx.label_of(crm["account"]).trust, sorted(ctx.label_of(crm).provenance)],
            "constant": ctx.label_of("a constant of the agent's code").trust,
            "explicit": ctx.label_of(Labeled("x", SECRET)).sensitivity,
            "first": first,
        }

    spec = AgentRegistry().register(AgentSpec("lab", agent), lint=False)
    driver = Driver(
        spec,
        tools={"crm": lambda a, k: {"account": "NL91ABNA0417164300"}},
        providers={"p": ScriptedProvider(["pay ZZ11UNTRUSTED999"], name="p")},
    )
    run = driver.run("lab", {})
    assert run.output == {
        "model": ["UNTRUSTED", ["agent/lab", "model:p/m"]],
        # Looked up with {"q": 1} after the run read the model's answer: arguments the gate
        # cannot attribute carry what the run has read, and the result follows what was sent.
        "crm": ["UNTRUSTED", ["agent/lab", "tool://crm"]],
        "constant": "UNTRUSTED",  # once the run has read untrusted text
        "explicit": "SECRET",
        "first": "TRUSTED",  # before it had: the agent's own
    }
    report = replay_history(spec, run.snapshot, dict(run.results))
    assert (report.output, report.divergence) == (run.output, None)
