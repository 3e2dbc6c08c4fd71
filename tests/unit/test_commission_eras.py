"""Commissions across eras and ends: a checkpointed parent commissions (one child per
commission across restores, decision 28), and what happens to a child when its parent is
cancelled or ends first."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_delegated_child import _child

from runplane.core import AgentRegistry
from runplane.core.ctx import StepCtx
from runplane.testing import Driver
from runplane.wire import JournalKind, RunStatus

# -- checkpointed agents commission (a restore re-issues the commission: the same child) ---


def _checkpointed() -> AgentRegistry:
    reg = AgentRegistry()

    @reg.agent("slow")
    async def slow(ctx: StepCtx, input: Any) -> Any:
        return {"got": await ctx.wait_signal("go")}

    @reg.agent("cp", durability="checkpointed")
    async def cp(ctx: StepCtx, input: Any) -> Any:
        first = await ctx.commission("slow", {"n": 1})
        more = await ctx.wait_signal("more")
        return {"first": first, "more": more}

    return reg


def test_a_checkpointed_parent_restored_mid_commission_waits_for_the_same_child() -> None:
    d = Driver(_checkpointed())
    view = d.run("cp", {})
    assert view.status is RunStatus.RUNNING and len(d.children) == 1
    (key,) = d.children
    assert key.startswith(f"runplane.child/{view.session_id}/w")
    d.crash(view.session_id)
    d.signal(_child(d), "go", "now")  # its result reaches a parent restored in a new era
    d.signal(view.session_id, "more", 2)
    view = d.view(view.session_id)
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == {"first": {"got": "now"}, "more": 2}
    assert len(d.children) == 1 and d.verify(view.session_id).ok
    assert any(r.kind is JournalKind.RUN_RESTORED for r in view.journal)


def test_a_checkpointed_parent_restored_after_the_child_ended_is_served_its_record() -> None:
    d = Driver(_checkpointed())
    view = d.run("cp", {})
    d.signal(_child(d), "go", "now")
    d.crash(view.session_id)
    d.signal(view.session_id, "more", 3)  # era 1 re-executes: the commission is served
    view = d.view(view.session_id)
    assert view.output == {"first": {"got": "now"}, "more": 3}, view.error
    assert len(d.children) == 1 and d.verify(view.session_id).ok
    served = [
        r
        for r in view.journal
        if r.family == "commission" and r.kind is JournalKind.EFFECT_RECORDED and r.era == 1
    ]
    assert served and served[0].attrs.get("reconstructed_from") == "0/0"


# -- the child's fate when its parent is cancelled or ends first (documented: contracts.md) --


def _parent_of_slow() -> AgentRegistry:
    reg = _checkpointed()

    @reg.agent("p")
    async def p(ctx: StepCtx, input: Any) -> Any:
        return await ctx.commission("slow", {})

    return reg


def test_a_parent_that_ends_first_leaves_its_child_to_run_and_refuses_its_result() -> None:
    d = Driver(_parent_of_slow())
    view = d.run("p", {})
    session = d.sessions[view.session_id]
    assert session.runtime is not None
    # An operator quarantines the parent while its child waits (the only way a parent ends
    # with a branch open: a join is not interruptible).
    step = session.runtime.quarantine("stopped by an operator", now_ms=d.clock.now_ms())
    d._handle(session, session.runtime, step)
    child = _child(d)
    d.signal(child, "go", 1)
    assert d.view(child).status is RunStatus.COMPLETED  # the child ran to its own end
    parent = d.view(view.session_id)
    assert parent.status is RunStatus.QUARANTINED
    assert parent.journal[-1].kind is JournalKind.RUN_QUARANTINED  # its result changed nothing
    assert d.verify(view.session_id).ok and d.verify(child).ok


def test_a_cancelled_parent_whose_commission_waits_ends_once_its_child_does() -> None:
    # Close policy ``wait``: the child is left to its own end; the parent waits for it.
    reg = _checkpointed()

    @reg.agent("p")
    async def p(ctx: StepCtx, input: Any) -> Any:
        return await ctx.commission("slow", {}, on_parent_cancel="wait")

    d = Driver(reg)
    view = d.run("p", {})
    child = _child(d)
    d.cancel(view.session_id, "no longer needed")
    assert d.view(view.session_id).status is RunStatus.RUNNING  # waits for its branch
    assert d.view(child).status is RunStatus.PARKED  # not cancelled with it
    d.cancel(child, "no longer needed")  # the operator's explicit choice (runs tree → cancel)
    assert d.view(child).status is RunStatus.FAILED
    parent = d.view(view.session_id)
    assert parent.status is RunStatus.FAILED
    assert parent.journal[-1].kind is JournalKind.RUN_CANCELLED
    recorded = [
        r
        for r in parent.journal
        if r.family == "commission" and r.kind is JournalKind.EFFECT_RECORDED
    ]
    assert recorded and recorded[0].attrs.get("child_run") == child


@settings(max_examples=30, deadline=None)
@given(st.lists(st.booleans(), min_size=4, max_size=4))
def test_a_checkpointed_parent_crashed_anywhere_starts_each_child_once(crashes: list[bool]) -> None:
    reg = _checkpointed()

    @reg.agent("two", durability="checkpointed")
    async def two(ctx: StepCtx, input: Any) -> Any:
        first = await ctx.commission("slow", {"n": 1})
        await ctx.checkpoint({"first": first})
        second = await ctx.commission("slow", {"n": 2})
        return [first, second]

    d = Driver(reg)
    parent = d.run("two", {}).session_id
    for n, crash in enumerate(crashes):
        if crash:
            d.crash(parent)
        waiting = [sid for sid in d.children.values() if d.view(sid).status is RunStatus.PARKED]
        if waiting and n % 2 == 0:
            d.signal(waiting[0], "go", len(d.children))
        else:
            d.wake(parent)
    for _ in range(2):  # whatever is still waiting gets its answer
        for sid in list(d.children.values()):
            if d.view(sid).status is RunStatus.PARKED:
                d.signal(sid, "go", 9)
    view = d.view(parent)
    assert view.status is RunStatus.COMPLETED, (crashes, view.error)
    assert len(d.children) == 2, d.children
    assert d.verify(parent).ok
