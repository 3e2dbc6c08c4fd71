"""Cancellation down the tree (issue 33 item 3): a parent's cancel reaches its children,
recursively, by each commission's close policy; each child's compensations run; the parent
ends once its children have."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.core import AgentRegistry, EffectDecl, Recovery
from runplane.core.ctx import StepCtx
from runplane.core.effect import RunCancelled
from runplane.core.engine.commission import CHILDREN, STARTED_SIGNAL
from runplane.testing import Driver
from runplane.wire import JournalKind, RunStatus

UNDONE: list[str] = []


def _tree() -> AgentRegistry:
    reg = AgentRegistry()
    effects = (
        EffectDecl("reserve", mutating=True, recovery=Recovery.RETRY),
        EffectDecl("release", mutating=True, recovery=Recovery.RETRY),
    )

    @reg.agent("leaf", effects=effects)
    async def leaf(ctx: StepCtx, input: Any) -> Any:
        # A compensation: a reservation undone when the leaf is cancelled.
        await ctx.tool("reserve", {"who": input["n"]})
        try:
            return {"got": await ctx.wait_signal("go")}
        except RunCancelled:
            await ctx.tool("release", {"who": input["n"]})
            raise

    @reg.agent("middle")
    async def middle(ctx: StepCtx, input: Any) -> Any:  # a grandparent's child, a parent
        return await ctx.parallel(
            {
                "a": ctx_commission(ctx, "leaf", {"n": f"{input['n']}.a"}),
                "b": ctx_commission(ctx, "leaf", {"n": f"{input['n']}.b"}),
            }
        )

    @reg.agent("top")
    async def top(ctx: StepCtx, input: Any) -> Any:
        return await ctx.parallel(
            {
                "one": ctx_commission(ctx, "leaf", {"n": "1"}),
                "two": ctx_commission(ctx, "leaf", {"n": "2"}),
                "mid": ctx_commission(ctx, "middle", {"n": "3"}),
            }
        )

    return reg


def ctx_commission(ctx: StepCtx, capability: str, input: Any) -> Any:
    from runplane.core.planrun import commission_effect

    return commission_effect(capability, input)


def _tools(performed: list[tuple[str, str]]) -> dict[str, Any]:
    def tool(name: str) -> Any:
        def perform(args: dict[str, Any], key: str | None) -> Any:
            performed.append((name, args["who"]))
            return {"ok": True}

        return perform

    return {"reserve": tool("reserve"), "release": tool("release")}


def test_a_cancelled_parent_cancels_its_tree_and_ends_once_every_child_has() -> None:
    performed: list[tuple[str, str]] = []
    d = Driver(_tree(), tools=_tools(performed))
    top = d.run("top", {})
    assert len(d.children) == 5  # three children, two grandchildren
    assert all(d.view(c).status is RunStatus.PARKED for c in _leaves(d))
    d.cancel(top.session_id, "the customer withdrew")
    views = {sid: d.view(sid) for sid in [top.session_id, *d.children.values()]}
    for sid, view in views.items():
        assert view.status is RunStatus.FAILED, (sid, view.status, view.error)
        assert view.journal[-1].kind is JournalKind.RUN_CANCELLED, sid
        assert d.verify(sid).ok
    # Every leaf's reservation was released (its compensation ran), each once.
    reserved = sorted(w for n, w in performed if n == "reserve")
    released = sorted(w for n, w in performed if n == "release")
    assert reserved == released == ["1", "2", "3.a", "3.b"]
    # The cascade is journaled where it happened, with who asked.
    asked = [r for r in views[top.session_id].journal if r.kind is JournalKind.CANCEL_REQUESTED]
    assert len(asked[0].attrs["cascaded_to"].split(",")) == 3
    for child in d.children.values():
        request = next(r for r in d.view(child).journal if r.kind is JournalKind.CANCEL_REQUESTED)
        assert request.attrs["requested_by"] == "operator"  # the parent's requester, as is
        assert "was cancelled" in request.attrs["reason"]


def _leaves(d: Driver) -> list[str]:
    return [sid for sid in d.children.values() if d.view(sid).snapshot.capability == "leaf"]


def _n(d: Driver, sid: str) -> str:
    return str(json.loads(d.view(sid).snapshot.input_json)["n"])


def test_a_child_whose_start_arrives_after_the_cancel_is_cancelled_then() -> None:
    d = Driver(_tree(), tools=_tools([]))
    top = d.run("top", {}).session_id
    runtime = d.sessions[top].runtime
    assert runtime is not None
    known = dict(CHILDREN.of(runtime._run))
    assert len(known) == 3  # each child told its run id in its first step
    CHILDREN.put(runtime._run, ())  # as if none had told it yet (resident and restored)
    snapshot = d.sessions[top].snapshot
    assert snapshot is not None
    d.sessions[top].snapshot = CHILDREN.into(snapshot, ())
    d.cancel(top, "stop")
    assert not any(d.view(c).status is RunStatus.FAILED for c in known.values())
    for key, child in known.items():  # the starts arrive late
        d.signal(top, STARTED_SIGNAL + key, {"child": child})
    assert d.view(top).status is RunStatus.FAILED
    assert all(d.view(c).status is RunStatus.FAILED for c in d.children.values())


def test_a_forged_child_start_does_not_turn_the_cancel_against_another_run() -> None:
    d = Driver(_tree(), tools=_tools([]))
    bystander = d.run("leaf", {"n": "x"}).session_id
    top = d.run("top", {}).session_id
    runtime = d.sessions[top].runtime
    assert runtime is not None
    key = next(iter(dict(CHILDREN.of(runtime._run))))
    d.signal(top, STARTED_SIGNAL + key, {"child": bystander})  # a forged start
    d.cancel(top, "stop")
    assert d.view(bystander).status is RunStatus.PARKED  # refused: not its parent
    assert not any(r.kind is JournalKind.CANCEL_REQUESTED for r in d.view(bystander).journal)


@settings(max_examples=25, deadline=None)
@given(st.permutations(["1", "2", "3.a", "3.b"]))
def test_children_that_finish_first_are_not_cancelled(order: list[str]) -> None:
    performed: list[tuple[str, str]] = []
    d = Driver(_tree(), tools=_tools(performed))
    top = d.run("top", {})
    leaves = {_n(d, sid): sid for sid in _leaves(d)}
    finished = order[:2]
    for n in finished:
        d.signal(leaves[n], "go", n)
    d.cancel(top.session_id, "stop")
    for n, sid in leaves.items():
        view = d.view(sid)
        if n in finished:
            assert view.status is RunStatus.COMPLETED
        else:
            assert view.status is RunStatus.FAILED
    assert d.view(top.session_id).status is RunStatus.FAILED
    released = sorted(w for name, w in performed if name == "release")
    assert released == sorted(n for n in order if n not in finished)
