"""Budgets over a tree through the engine (issue 33 item 4): a child spends from what its
parent allotted it — escrowed at commission time, carried in its delegation, the unspent
rest returned when it answers — so a fan-out of ten cannot spend ten budgets. The pure
model and its property test: ``test_allotments.py``."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from runplane.core import AgentRegistry, EffectDecl, replay_history
from runplane.core.allotments import Allotment
from runplane.core.ctx import StepCtx
from runplane.core.effect import EffectError
from runplane.core.plan import AllSucceeded, Bounds
from runplane.core.planrun import commission_effect
from runplane.core.policy import Policy, parse_policy
from runplane.journal.tree import tree
from runplane.testing import Driver
from runplane.wire import JournalKind, RunStatus

B = 10  # the parent's budget, in tool calls
POLICY = parse_policy(f"agents: {{boss: {{budget: {{tool_calls: {B}}}}}}}")
WORK = [EffectDecl("work", mutating=False)]


def _registry(
    asks: list[Allotment | float | None] | None = None, sequential: bool = False
) -> AgentRegistry:
    reg = AgentRegistry()

    @reg.agent("worker", effects=WORK)
    async def worker(ctx: StepCtx, input: Any) -> Any:
        """Tries to spend a whole budget: ``want`` tool calls, then fails if asked to."""
        made, refused = 0, ""
        for i in range(int(input.get("want", B))):
            try:
                await ctx.tool("work", {"i": i})
            except EffectError as exc:
                refused = f"{exc.type}: {exc}"
                break
            made += 1
        if input.get("fail"):
            raise EffectError("Boom", f"failed after {made}")
        return {"made": made, "refused": refused}

    @reg.agent("mid")
    async def mid(ctx: StepCtx, input: Any) -> Any:
        """Hands a grandchild all it was allotted (the default)."""
        return await ctx.commission("worker", {"want": B})

    @reg.agent("boss")
    async def boss(ctx: StepCtx, input: Any) -> Any:
        if input.get("via_mid"):
            return await ctx.commission("mid", {}, budget=Allotment(tool_calls=4))
        if sequential:
            out = []
            for spec in input["children"]:
                try:
                    out.append(await ctx.commission("worker", spec))
                except EffectError as exc:
                    out.append({"error": exc.type, "message": str(exc)})
            try:
                await ctx.tool("work", {"i": "boss"})
                out.append("boss made a call")
            except EffectError as exc:
                out.append(f"boss refused: {exc.type}")
            return out
        kinds = asks or [None] * 10
        status = await ctx.parallel(
            {
                f"c{i}": commission_effect("worker", {"want": B}, budget=ask)
                for i, ask in enumerate(kinds)
            }
        )
        if isinstance(status, AllSucceeded):
            return {"results": dict(status.results), "failures": {}}
        return {
            "results": dict(getattr(status, "results", {})),
            "failures": dict(status.failures),
        }

    return reg


def _driver(reg: AgentRegistry, policy: Policy | None = POLICY) -> Driver:
    return Driver(reg, tools={"work": lambda a, k: "done"}, policy=policy)


def _capability(d: Driver, session: str) -> str:
    snapshot = d.sessions[session].snapshot
    assert snapshot is not None
    return snapshot.capability


def _announced(d: Driver, session: str) -> list[dict[str, str]]:
    return [
        r.attrs
        for r in d.view(session).journal
        if r.kind is JournalKind.EFFECT_ANNOUNCED and r.family == "commission"
    ]


def test_ten_children_fanned_out_spend_one_budget_and_the_later_ones_are_refused() -> None:
    d = _driver(_registry([1.0] * 10))  # each asks for all that is left
    view = d.run("boss", {})
    assert view.status is RunStatus.COMPLETED, view.error
    assert d.tool_calls["work"] == B  # not 10 x B
    out = view.output
    # The first child was allotted all the parent had and spent it ...
    assert out["results"] == {"c0": {"made": B, "refused": ""}}
    # ... the other nine were refused before they started, each saying why.
    assert sorted(out["failures"]) == [f"c{i}" for i in range(1, 10)]
    for message in out["failures"].values():
        assert message.startswith("BudgetExceeded: agent/worker: nothing left to allot a child")
        assert f"tool calls: {B} of {B} spent or allotted" in message
    assert len(d.children) == 1  # no child admitted for a refused commission
    attrs = _announced(d, view.session_id)
    assert json.loads(attrs[0]["allotment"]) == {"tool_calls": B}
    assert all("allotment" not in a for a in attrs[1:])
    # The child's seq 0 commits to the allotment it runs under.
    (child,) = d.children.values()
    seq0 = d.view(child).journal[0]
    assert json.loads(seq0.attrs["delegation"]) == {"allotment": {"tool_calls": B}}


def test_by_default_children_dispatched_together_split_the_budget_evenly() -> None:
    d = _driver(_registry())
    view = d.run("boss", {})
    assert view.status is RunStatus.COMPLETED, view.error
    assert d.tool_calls["work"] == B
    results = view.output["results"]
    assert sorted(results) == [f"c{i}" for i in range(10)] and not view.output["failures"]
    for result in results.values():  # one call each, then the allotment refuses the next
        assert result["made"] == 1 and "tool calls: 1 of 1 spent" in result["refused"]
    allotted = [json.loads(a["allotment"]) for a in _announced(d, view.session_id)]
    assert allotted == [{"tool_calls": 1}] * 10


def test_declared_amounts_share_the_budget_among_the_first_children() -> None:
    d = _driver(_registry([Allotment(tool_calls=3)] * 10))
    view = d.run("boss", {})
    assert view.status is RunStatus.COMPLETED, view.error
    made = {k: v["made"] for k, v in view.output["results"].items()}
    assert made == {"c0": 3, "c1": 3, "c2": 3, "c3": 1}  # the fourth gets what is left
    assert d.tool_calls["work"] == B
    # A child stopped by its allotment is told so: the gate's BUDGET refusal.
    refused = view.output["results"]["c0"]["refused"]
    assert refused.startswith("BudgetExceeded") and "tool calls: 3 of 3 spent" in refused
    assert refused.endswith("(the allotment of the run that commissioned it)")
    assert sorted(view.output["failures"]) == [f"c{i}" for i in range(4, 10)]


def test_what_a_child_did_not_spend_comes_back_once_and_a_failed_child_is_charged_its_spend() -> (
    None
):
    d = _driver(_registry(sequential=True))
    children = [{"want": 2}, {"want": 3, "fail": True}, {"want": B}, {"want": 1}]
    view = d.run("boss", {"children": children})
    assert view.status is RunStatus.COMPLETED, view.error
    out = view.output
    assert out[0] == {"made": 2, "refused": ""}
    assert out[1]["error"] == "ChildFailed"  # spent 3 before it failed: charged 3
    assert out[2] == {"made": 5, "refused": out[2]["refused"]}  # 10 - 2 - 3 left for it
    assert out[2]["refused"].startswith("BudgetExceeded")
    assert out[3]["error"] == "BudgetExceeded" and "nothing left" in out[3]["message"]
    assert out[4] == "boss refused: BudgetExceeded"  # the parent's own call, too
    assert d.tool_calls["work"] == B
    allotted = [
        json.loads(a["allotment"]) for a in _announced(d, view.session_id) if "allotment" in a
    ]
    assert allotted == [{"tool_calls": 10}, {"tool_calls": 8}, {"tool_calls": 5}]
    settled = [
        json.loads(r.attrs["child_spent"])["tool_calls"]
        for r in view.journal
        if r.kind is JournalKind.EFFECT_RECORDED and "child_spent" in r.attrs
    ]
    assert settled == [2, 3, 5]
    # A replay decides the same from the journal: same output, nothing performed.
    snap = d.sessions[view.session_id].snapshot
    assert snap is not None
    report = replay_history(d.agents.spec("boss"), snap, d.sessions[view.session_id].results)
    assert report.status is RunStatus.COMPLETED and report.live_calls == 0
    assert report.output == out
    assert d.verify(view.session_id).ok


def test_a_grandchild_is_bounded_by_what_its_parent_was_allotted() -> None:
    d = _driver(_registry())
    view = d.run("boss", {"via_mid": True})
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output["made"] == 4 and view.output["refused"].startswith("BudgetExceeded")
    assert d.tool_calls["work"] == 4
    capability = {s: _capability(d, s) for s in d.children.values()}
    assert Counter(capability.values()) == {"mid": 1, "worker": 1}
    leaf = next(s for s, c in capability.items() if c == "worker")
    bounds = Bounds.read(d.view(leaf).journal[0].attrs["delegation"])
    assert bounds.allotment == Allotment(tool_calls=4)
    # ``runplane runs tree`` reads an allotment alone as no delegated sinks, not as unreadable.
    root = tree(view.session_id, lambda rid: list(d.view(rid).journal))
    assert [c.delegated_sinks for c in root.children] == [None]


def test_a_parent_whose_budget_bounds_nothing_allots_nothing() -> None:
    d = _driver(_registry(), policy=None)
    view = d.run("boss", {})
    assert view.status is RunStatus.COMPLETED, view.error
    assert d.tool_calls["work"] == 10 * B  # bounded by policy alone, as before
    assert all("allotment" not in a for a in _announced(d, view.session_id))
    for child in d.children.values():
        assert "delegation" not in d.view(child).journal[0].attrs


def test_the_generations_of_a_child_that_continues_as_new_share_its_allotment() -> None:
    reg = AgentRegistry()

    @reg.agent("looper", effects=WORK)
    async def looper(ctx: StepCtx, input: Any) -> Any:
        """Three calls per generation, as many generations as it is told."""
        for i in range(3):
            try:
                await ctx.tool("work", {"g": input["left"], "i": i})
            except EffectError as exc:
                return {"refused": exc.type, "left": input["left"]}
        if input["left"] > 0:
            return await ctx.continue_as_new({"left": input["left"] - 1})
        return {"done": True}

    @reg.agent("boss")
    async def boss(ctx: StepCtx, input: Any) -> Any:
        out = await ctx.commission("looper", {"left": 5}, budget=Allotment(tool_calls=7))
        return {"child": out, "after": await ctx.commission("looper", {"left": 0})}

    d = _driver(reg)
    view = d.run("boss", {})
    assert view.status is RunStatus.COMPLETED, view.error
    # 7 allotted: two generations of three and one call of the third — not 3 per generation.
    assert view.output["child"] == {"refused": "BudgetExceeded", "left": 3}
    # The last generation answered with the whole chain's spend: 7, so 3 are left for the
    # next child (all of it, by default), which makes its three calls.
    assert view.output["after"] == {"done": True}
    assert d.tool_calls["work"] == B
    settled = [
        json.loads(r.attrs["child_spent"])["tool_calls"]
        for r in view.journal
        if r.kind is JournalKind.EFFECT_RECORDED and "child_spent" in r.attrs
    ]
    assert settled == [7, 3]


def test_a_parent_restored_with_children_open_does_not_allot_them_again() -> None:
    reg = _registry()

    @reg.agent("waiter", effects=WORK)
    async def waiter(ctx: StepCtx, input: Any) -> Any:
        """Waits to be told to go, then makes three calls."""
        await ctx.wait_signal("go")
        for i in range(3):
            await ctx.tool("work", {"i": i})
        return "spent 3"

    @reg.agent("restored")
    async def restored(ctx: StepCtx, input: Any) -> Any:
        four = Allotment(tool_calls=4)
        await ctx.parallel(
            {
                "c0": commission_effect("waiter", {}, budget=four),
                "c1": commission_effect("waiter", {}, budget=four),
            }
        )
        return await ctx.commission("worker", {"want": B})  # gets what is left

    policy = parse_policy(f"agents: {{restored: {{budget: {{tool_calls: {B}}}}}}}")
    d = Driver(reg, tools={"work": lambda a, k: "done"}, policy=policy)
    view = d.run("restored", {})
    assert view.status is RunStatus.RUNNING, view.error  # its two children wait
    d.crash(view.session_id)  # lost with the process: rebuilt from its snapshot and journal
    for child in list(d.children.values()):
        d.signal(child, "go", {})
    view = d.view(view.session_id)
    assert view.status is RunStatus.COMPLETED, view.error
    # Rebuilt while c0 and c1 ran, it re-dispatched them under the allotments it had
    # escrowed (admission answers duplicate): 10 - 3 - 3 = 4 left for the last child.
    assert view.output == {"made": 4, "refused": view.output["refused"]}
    allotted = [
        json.loads(a["allotment"]) for a in _announced(d, view.session_id) if "allotment" in a
    ]
    # c0 and c1 announced, announced again by the rebuilt run with the same allotment (not
    # allotted anew from what was left: that would be 2), then the last child.
    assert allotted == [{"tool_calls": 4}] * 5
    assert len(d.children) == 3 and d.tool_calls["work"] == B
