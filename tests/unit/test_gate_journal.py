"""The gate trusts only the journal: a ``Released`` is resolved from the run's journaled
decision (re-pointed or forged ones are refused, ``release_mismatch``), and bytes that match
no recorded output carry what the run has read (re-chunked untrusted text stays untrusted).

Each attempt runs through ``runplane.testing``'s Driver as agent code would make it, and each
test holds both sides: the attempt is refused and journaled, and the honest call next to it
still goes out — so a gate that refused everything fails here as surely as one that refused
nothing. Every run replays to the same end without asking the gate again.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from runplane.core import AgentRegistry, AgentSpec, StepCtx, replay_history
from runplane.core.gate import FieldRule, SinkDecl, sinks
from runplane.core.policy import parse_policy
from runplane.core.releases import Released, SinkRefused
from runplane.testing import Driver, RunView, ScriptedProvider
from runplane.wire import RunStatus

ACCOUNT = "NL91ABNA0417164300"
ANSWER = f"The customer asks to be paid on account {ACCOUNT} today, urgently."
PAY = SinkDecl("tool://pay", protected=(FieldRule("$.to", sources=("human:ada",)),))
OTHER = SinkDecl("tool://other", protected=(FieldRule("$.to", sources=("human:*",)),))


def _driver(agent: Any, hits: list[tuple[str, Any]], **extra: Any) -> Driver:
    spec = AgentRegistry().register(AgentSpec("probe", sinks(PAY, OTHER)(agent)), lint=False)

    def tool(name: str) -> Any:
        def call(args: dict[str, Any], key: str | None) -> dict[str, Any]:
            hits.append((name, args))
            return {"ok": True}

        return call

    return Driver(
        spec,
        tools={"pay": tool("pay"), "other": tool("other"), "note": tool("note")},
        providers={"p": ScriptedProvider([ANSWER], name="p")},
        **extra,
    )


async def _read_and_release(ctx: StepCtx) -> Released:
    answer = await ctx.generate("p", "m", "who is to be paid?")
    account = answer.text.split()[8]
    released: Released = await ctx.release(
        account, destination="tool://pay", field="$.to", basis="the account on file", role="fin"
    )
    return released


async def _send(ctx: StepCtx, tool: str, args: dict[str, Any]) -> str:
    try:
        await ctx.tool(tool, args, mutating=True)
    except SinkRefused as exc:
        return f"refused: {exc.message}"
    return "sent"


def _refusals(run: RunView) -> list[tuple[str, str, str]]:
    return [
        (r.attrs["sink"], r.attrs["reason"], r.attrs["path"])
        for r in run.journal
        if r.attrs.get("gate") == "refused"
    ]


def _decided_by(driver: Driver, run: RunView, who: str) -> RunView:
    assert run.status is RunStatus.AWAITING_HUMAN, run.error
    run = driver.decide(run.session_id, "APPROVED", by=(who,))
    assert run.status is RunStatus.COMPLETED, run.error
    return run


def _replays(driver: Driver, run: RunView) -> None:
    assert driver.verify(run.session_id).ok
    report = replay_history(driver.agents.spec("probe"), run.snapshot, dict(run.results))
    assert (report.output, report.live_calls, report.divergence) == (run.output, 0, None)


def test_a_re_pointed_release_is_refused_and_the_genuine_one_still_pays() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        released = await _read_and_release(ctx)
        moved = dataclasses.replace(released, destination="tool://other")
        return {
            "re-pointed": await _send(ctx, "other", {"to": moved}),
            "re-pointed at its own sink": await _send(ctx, "pay", {"to": moved}),
            "genuine": await _send(ctx, "pay", {"to": released}),
        }

    hits: list[tuple[str, Any]] = []
    driver = _driver(agent, hits)
    run = _decided_by(driver, driver.run("probe", {}), "ada")
    assert run.output["genuine"] == "sent"
    assert "differs from its journaled decision in destination" in run.output["re-pointed"]
    assert run.output["re-pointed at its own sink"].startswith("refused")
    assert _refusals(run) == [
        ("tool://other", "release_mismatch", "$.to"),
        ("tool://pay", "release_mismatch", "$.to"),
    ]
    assert hits == [("pay", {"to": ACCOUNT})]  # only the genuine call reached a sink
    _replays(driver, run)


def test_a_forged_decider_is_refused_and_the_real_decider_is_held_to_the_rule() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        released = await _read_and_release(ctx)
        forged = dataclasses.replace(released, decided_by=("ada",))
        return {
            "forged": await _send(ctx, "pay", {"to": forged}),
            "as decided": await _send(ctx, "pay", {"to": released}),
        }

    hits: list[tuple[str, Any]] = []
    driver = _driver(agent, hits)
    run = _decided_by(driver, driver.run("probe", {}), "bob")  # bob decided, not ada
    assert "differs from its journaled decision in decided_by" in run.output["forged"]
    assert "must come from human:ada" in run.output["as decided"]
    assert _refusals(run) == [
        ("tool://pay", "release_mismatch", "$.to"),
        ("tool://pay", "field_source", "$.to"),
    ]
    assert hits == []
    _replays(driver, run)


def test_a_release_made_by_hand_is_refused() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        released = await _read_and_release(ctx)
        request = {**released.request, "approvals": 1, "role": "nobody"}
        return await _send(ctx, "pay", {"to": dataclasses.replace(released, request=request)})

    hits: list[tuple[str, Any]] = []
    driver = _driver(agent, hits)
    run = _decided_by(driver, driver.run("probe", {}), "ada")
    assert "no approved release in this run's journal" in run.output
    assert _refusals(run) == [("tool://pay", "release_mismatch", "$.to")]
    assert hits == []


def _rechunk(s: str) -> str:
    return "-".join(s[i : i + 7] for i in range(0, len(s), 7))


def test_re_chunked_untrusted_text_is_refused_at_a_mutating_sink() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        before = await _send(ctx, "note", {"text": _rechunk("a constant of the agent's code")})
        answer = await ctx.generate("p", "m", "who is to be paid?")
        return {
            "before": before,
            "re-chunked": await _send(ctx, "note", {"text": _rechunk(answer.text)}),
            "constant after": await _send(ctx, "note", {"text": "a constant, after"}),
            "label": ctx.label_of(_rechunk(answer.text)).trust,
        }

    hits: list[tuple[str, Any]] = []
    driver = _driver(agent, hits)
    run = driver.run("probe", {})
    assert run.status is RunStatus.COMPLETED, run.error
    # Nothing untrusted read yet: the agent's own constant goes out; after the model answer,
    # neither the re-chunked answer nor a constant is the agent's own any more.
    assert run.output["before"] == "sent"
    assert "derives from untrusted what the run has read" in run.output["re-chunked"]
    assert run.output["constant after"].startswith("refused")
    assert run.output["label"] == "UNTRUSTED"
    assert _refusals(run) == [("tool://note", "untrusted", "$.text")] * 2
    assert [name for name, _ in hits] == ["note"]
    _replays(driver, run)


def test_the_weaker_rule_is_a_named_policy_setting() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        answer = await ctx.generate("p", "m", "who is to be paid?")
        return await _send(ctx, "note", {"text": _rechunk(answer.text)})

    hits: list[tuple[str, Any]] = []
    weaker = parse_policy("agents: {probe: {unattributed: agent}}\n")
    run = _driver(agent, hits, policy=weaker).run("probe", {})
    assert run.output == "sent" and len(hits) == 1


def test_the_gate_judges_an_agent_that_declared_no_sinks() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        answer = await ctx.generate("p", "m", "who is to be paid?")
        return {
            "untrusted": await _send(ctx, "note", {"text": answer.text}),
            "read only": await ctx.tool("lookup", {"q": answer.text}, mutating=False),
        }

    hits: list[tuple[str, Any]] = []
    spec = AgentRegistry().register(AgentSpec("bare", agent), lint=False)
    run = Driver(
        spec,
        tools={
            "note": lambda a, k: hits.append(("note", a)) or {},
            "lookup": lambda a, k: {"found": 1},
        },
        providers={"p": ScriptedProvider([ANSWER], name="p")},
    ).run("bare", {})
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output["untrusted"].startswith("refused") and hits == []
    assert run.output["read only"] == {"found": 1}  # a non-mutating sink takes it
