"""Deployment policy: parsing and digest, sink grants, budgets and data:release grants, through
the engine (each decision journaled with the policy's digest, each replayed from the journal)."""

from __future__ import annotations

from typing import Any

import pytest

from runplane.core import AgentRegistry, AgentSpec, StepCtx, replay_history
from runplane.core.policy import Budget, Spent, parse_policy
from runplane.core.releases import BudgetExceeded, ReleaseRefused, SinkRefused
from runplane.errors import ConfigError
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import RunStatus, Sensitivity, Trust

POLICY = """
sinks:
  "tool://pay":
    protected:
      - {path: $.to, sources: ["human:*", "policy:data:release"]}
  "model:p/public": {mutating: false, ceiling: public}
agents:
  gated:
    sinks: [tool://pay, tool://lookup, model:p/m, model:p/public]
    release:
      - {destination: tool://pay, fields: [$.to]}
    release_role: finance
    input: {trust: untrusted, sensitivity: confidential}
    budget: {tool_calls: 2, model_tokens: 1000}
"""


def test_the_policy_parses_and_its_digest_ignores_formatting() -> None:
    policy = parse_policy(POLICY)
    again = parse_policy(
        "# a comment\n"
        + POLICY.replace("tool_calls: 2, model_tokens: 1000", "model_tokens: 1000, tool_calls: 2")
    )
    assert policy.digest == again.digest and len(policy.digest) == 64
    gated = policy.for_agent("gated")
    assert gated.budget == Budget(tool_calls=2, model_tokens=1000)
    assert gated.input_label is not None and gated.input_label.trust is Trust.UNTRUSTED
    assert policy.sinks["model:p/public"].ceiling is Sensitivity.PUBLIC
    assert policy.for_agent("unknown").sinks is None
    assert parse_policy(POLICY.replace("1000", "2000")).digest != policy.digest


@pytest.mark.parametrize(
    "text",
    [
        "- a list",
        "sinks: [1]",
        "agents: {x: {budget: {tool_calls: many}}}",
        "sinks: {s: {ceiling: huge}}",
    ],
)
def test_a_bad_policy_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_policy(text)


def _run(fn: Any, **driver: Any) -> tuple[AgentSpec, Any, list[str]]:
    spec = AgentRegistry().register(AgentSpec("gated", fn), lint=False)
    performed: list[str] = []
    d = Driver(
        spec,
        tools={
            "lookup": lambda a, k: performed.append("lookup") or {"n": 1},
            "pay": lambda a, k: performed.append("pay") or {"ok": True},
            "elsewhere": lambda a, k: performed.append("elsewhere") or {},
        },
        providers={"p": ScriptedProvider(["pay ZZ11UNTRUSTED999"], name="p")},
        policy=parse_policy(POLICY),
        **driver,
    )
    return spec, d.run("gated", {"note": "account balance 1234 overdrawn"}), performed


def _replays(spec: AgentSpec, run: Any) -> None:
    report = replay_history(spec, run.snapshot, dict(run.results))
    assert (report.output, report.live_calls, report.divergence) == (run.output, 0, None)


def test_the_tool_call_budget_refuses_the_call_that_would_exceed_it() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        done = 0
        try:
            for _ in range(5):
                await ctx.tool("lookup", {"i": done}, mutating=False)
                done += 1
        except BudgetExceeded as exc:
            return {"done": done, "refused": exc.type}
        return {"done": done}

    spec, run, performed = _run(agent)
    assert run.output == {"done": 2, "refused": "BudgetExceeded"}
    assert performed == ["lookup", "lookup"]
    [refusal] = [r for r in run.journal if r.attrs.get("gate") == "refused"]
    assert (
        refusal.attrs["reason"] == "budget"
        and refusal.attrs["policy"] == parse_policy(POLICY).digest
    )
    _replays(spec, run)


def test_a_sink_the_policy_does_not_grant_is_refused() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        try:
            await ctx.tool("elsewhere", {})
        except SinkRefused as exc:
            return {"refused": exc.message}
        return {}

    _, run, performed = _run(agent)
    assert "does not grant" in run.output["refused"] and performed == []


def test_the_input_label_comes_from_policy_and_the_public_model_sees_nothing_confidential() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        try:
            await ctx.generate("p", "public", f"summarise: {input['note']} and more")
        except SinkRefused as exc:
            return {"refused": exc.message}
        return {}

    spec, run, _ = _run(agent)
    assert "confidential" in run.output["refused"]
    _replays(spec, run)


def test_a_policy_granted_release_needs_nobody_and_replays_without_asking() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        answer = await ctx.generate("p", "m", "who?")
        account = answer.text.split()[-1]
        released = await ctx.release(
            account, destination="tool://pay", field="$.to", basis="allow-listed", role="finance"
        )
        await ctx.tool("pay", {"to": released})
        return {"paid": account, "by": list(released.decided_by)}

    spec, run, performed = _run(agent)
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"paid": "ZZ11UNTRUSTED999", "by": []}
    assert performed == ["pay"] and run.task is None
    [grant] = [r for r in run.journal if r.attrs.get("release") == "granted"]
    assert grant.family == "release" and grant.attrs["destination"] == "tool://pay"
    _replays(spec, run)


def test_a_release_asking_another_role_than_the_policy_names_is_refused() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        try:
            await ctx.release(
                "x", destination="tool://lookup", field="$.q", basis="b", role="friend"
            )
        except ReleaseRefused as exc:
            return {"refused": exc.message}
        return {}

    spec, run, _ = _run(agent)
    assert "finance" in run.output["refused"] and run.task is None
    _replays(spec, run)


def test_spent_skips_refused_calls() -> None:
    assert Spent.of([]) == Spent()
    assert Budget(tool_calls=0).refusal(Spent(), "tool", 0) is not None
    assert Budget(wall_ms=10).refusal(Spent(), "observe", 11) is not None
    assert Budget().refusal(Spent(tool_calls=10**6), "tool", 10**9) is None


def test_a_source_the_policy_declares_untrusted_taints_what_it_returns() -> None:
    text = POLICY + '\nsources:\n  "tool://lookup": {trust: untrusted, sensitivity: confidential}\n'

    async def agent(ctx: StepCtx, input: Any) -> Any:
        found = await ctx.tool("lookup", {"q": 1}, mutating=False)
        try:
            await ctx.tool("pay", {"to": "released elsewhere", "memo": f"n={found['n']}"})
        except SinkRefused as exc:
            return {"refused": exc.message}
        return {}

    spec = AgentRegistry().register(AgentSpec("gated", agent), lint=False)
    driver = Driver(
        spec,
        tools={"lookup": lambda a, k: {"n": 123456}, "pay": lambda a, k: {}},
        policy=parse_policy(text),
    )
    run = driver.run("gated", {})
    lookup = next(e for e in run.results.values() if e.name == "tool://lookup")
    assert lookup.label.trust is Trust.UNTRUSTED
    assert lookup.label.sensitivity is Sensitivity.CONFIDENTIAL
    assert "tool://lookup" in lookup.label.provenance  # its own origin, as ever
    # "pay" protects $.to only: the tainted memo may go; a constant recipient, sent after the
    # run read the untrusted lookup, carries what the run has read — untrusted.
    assert (
        "protected field $.to derives from untrusted what the run has read"
        in (run.output["refused"])
    )


def test_the_first_record_the_executor_writes_names_the_policy() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.tool("lookup", {}, mutating=False)
        return {}

    _, run, _ = _run(agent)
    first, *rest = run.journal[1:]  # seq 0 is admission's
    assert first.attrs["policy"] == parse_policy(POLICY).digest
    assert not [r for r in rest if "policy" in r.attrs]


def test_labels_follow_the_data_into_results() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        answer = await ctx.generate("p", "m", f"about: {input['note']}")  # confidential input
        account = answer.text.split()[-1]
        await ctx.tool("lookup", {"account": account}, mutating=False)  # untrusted argument
        return {}

    _, run, _ = _run(agent)
    by_name = {e.name: e.label for e in run.results.values()}
    model, lookup = by_name["model:p/m"], by_name["tool://lookup"]
    assert (model.trust, model.sensitivity) == (Trust.UNTRUSTED, Sensitivity.CONFIDENTIAL)
    # A tool result built from untrusted arguments is untrusted; it still names its own origin.
    assert (lookup.trust, lookup.sensitivity) == (Trust.UNTRUSTED, Sensitivity.CONFIDENTIAL)
    assert "tool://lookup" in lookup.provenance and "model:p/m" not in lookup.provenance


def test_an_agent_the_policy_does_not_name_asks_the_role_its_release_names() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.release("x", destination="tool://pay", field="$.to", basis="b", role="ops")
        return {}

    spec = AgentRegistry().register(AgentSpec("unlisted", agent), lint=False)
    run = Driver(spec, policy=parse_policy(POLICY)).run("unlisted", {})
    assert run.status is RunStatus.AWAITING_HUMAN and run.task is not None
    assert run.task.role == "ops"
