"""A commissioned child runs under the Delegation it was commissioned with (issue 14 item 4):
its sinks, its validity and what it may hand on bound every call it makes; and a commission
passes the sink gate with the exact input the child gets (issue 13). Checkpointed parents and
the children's fates: ``test_commission_eras.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.core import AgentRegistry, EffectDecl, replay_history
from runplane.core.ctx import StepCtx
from runplane.core.effect import EffectError
from runplane.core.plan import Delegation, DelegationWidened, Scope
from runplane.testing import Driver
from runplane.wire import RunStatus

READS = [EffectDecl("crm", mutating=False), EffectDecl("mail", mutating=False)]
TOOLS = {"crm": lambda a, k: {"email": "ann@example.com"}, "mail": lambda a, k: "sent"}


def _scope(caps: set[str], sinks: set[str], audience: set[str], until: int | None = None) -> Scope:
    return Scope(frozenset(caps), frozenset(sinks), frozenset(audience), until)


def _registry(delegation: Delegation | None) -> AgentRegistry:
    reg = AgentRegistry()

    @reg.agent("worker", effects=READS)
    async def worker(ctx: StepCtx, input: Any) -> Any:
        """Looks up, then mails: the second is outside a CRM-only delegation."""
        found = await ctx.tool("crm", {"id": 1})
        try:
            await ctx.tool("mail", {"to": found["email"]})
        except EffectError as exc:
            return {"mail": exc.type}
        return {"mail": "sent"}

    @reg.agent("boss")
    async def boss(ctx: StepCtx, input: Any) -> Any:
        return await ctx.commission("worker", input, delegation=delegation)

    return reg


CRM_ONLY = Delegation(_scope({"worker"}, {"tool://crm"}, {"boss"}))


def _child(d: Driver) -> str:
    (child,) = d.children.values()
    return child


def test_a_child_whose_delegation_excludes_a_sink_is_refused_it_and_replays_the_refusal() -> None:
    d = Driver(_registry(CRM_ONLY), tools=TOOLS)
    view = d.run("boss", {})
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == {"mail": "DelegationRefused"}
    assert d.tool_calls["crm"] == 1 and d.tool_calls["mail"] == 0  # never performed
    child = d.view(_child(d))
    # The chain commits to the delegation at seq 0; the refusal is journaled, typed.
    assert json.loads(child.journal[0].attrs["delegation"]) == CRM_ONLY.to_json()
    refused = [r for r in child.journal if r.attrs.get("gate") == "refused"]
    assert [(r.attrs["sink"], r.attrs["reason"]) for r in refused] == [
        ("tool://mail", "not_delegated")
    ]
    assert d.verify(child.session_id).ok
    snap = d.sessions[child.session_id].snapshot
    assert snap is not None and snap.delegation_json is not None
    report = replay_history(d.agents.spec("worker"), snap, d.sessions[child.session_id].results)
    assert report.status is RunStatus.COMPLETED and report.live_calls == 0
    assert report.output == {"mail": "DelegationRefused"}


def test_the_same_agent_run_directly_may_call_the_sink() -> None:
    d = Driver(_registry(CRM_ONLY), tools=TOOLS)
    view = d.run("worker", {})
    assert view.output == {"mail": "sent"} and d.tool_calls["mail"] == 1
    assert "delegation" not in view.journal[0].attrs


def test_a_child_rebuilt_from_its_snapshot_stays_bounded() -> None:
    reg = _registry(CRM_ONLY)

    @reg.agent("waiter", effects=READS)
    async def waiter(ctx: StepCtx, input: Any) -> Any:
        await ctx.wait_signal("go")
        try:
            return await ctx.tool("mail", {"to": "x"})
        except EffectError as exc:
            return exc.type

    @reg.agent("lead")
    async def lead(ctx: StepCtx, input: Any) -> Any:
        return await ctx.commission(
            "waiter", {}, delegation=Delegation(_scope({"waiter"}, set(), {"lead"}))
        )

    d = Driver(reg, tools=TOOLS)
    d.run("lead", {})
    child = _child(d)
    d.crash(child)  # evicted: the snapshot carries the delegation to the rebuilt run
    d.signal(child, "go")
    assert d.view(child).output == "DelegationRefused" and d.tool_calls["mail"] == 0


def test_an_effect_after_the_delegation_expired_is_refused() -> None:
    reg = _registry(None)

    @reg.agent("later", effects=READS)
    async def later(ctx: StepCtx, input: Any) -> Any:
        await ctx.wait_signal("go")
        try:
            return await ctx.tool("crm", {"id": 2})
        except EffectError as exc:
            return exc.type

    d = Driver(reg, tools=TOOLS)
    until = d.clock.now_ms() + 1_000

    @reg.agent("brief")
    async def brief(ctx: StepCtx, input: Any) -> Any:
        scope = _scope({"later"}, {"tool://crm"}, {"brief"}, until)
        return await ctx.commission("later", {}, delegation=Delegation(scope))

    d.run("brief", {})
    child = _child(d)
    d.clock.advance(5_000)
    d.signal(child, "go")
    view = d.view(child)
    assert view.output == "DelegationRefused" and d.tool_calls["crm"] == 0
    (refused,) = [r for r in view.journal if r.attrs.get("gate") == "refused"]
    assert refused.attrs["reason"] == "delegation_expired"


def _chain_registry(grandchild_delegation: Delegation | None) -> AgentRegistry:
    reg = _registry(None)

    @reg.agent("middle")
    async def middle(ctx: StepCtx, input: Any) -> Any:
        try:
            return await ctx.commission("worker", {}, delegation=grandchild_delegation)
        except EffectError as exc:
            return {"refused": exc.type, "message": exc.message}

    @reg.agent("top")
    async def top(ctx: StepCtx, input: Any) -> Any:
        scope = _scope({"middle", "worker"}, {"tool://crm"}, {"top", "middle"})
        return await ctx.commission("middle", {}, delegation=Delegation(scope))

    return reg


def test_a_grandchild_cannot_be_handed_more_than_the_child_holds() -> None:
    wider = Delegation(_scope({"worker"}, {"tool://crm", "tool://mail"}, {"middle"}))
    d = Driver(_chain_registry(wider), tools=TOOLS)
    view = d.run("top", {})
    assert view.output["refused"] == "DelegationRefused" and "sinks" in view.output["message"]
    assert len(d.children) == 1  # no grandchild started


def test_a_grandchild_runs_under_the_childs_delegation_narrowed_or_inherited() -> None:
    narrower = Delegation(_scope({"worker"}, {"tool://crm"}, {"middle"}))
    for offered in (None, narrower):
        d = Driver(_chain_registry(offered), tools=TOOLS)
        view = d.run("top", {})
        assert view.output == {"mail": "DelegationRefused"}, offered
        grandchild = next(sid for sid in d.children.values() if sid != d.children[_first(d)])
        chain = json.loads(d.view(grandchild).journal[0].attrs["delegation"])["chain"]
        assert chain[0]["capabilities"] == ["middle", "worker"]  # rooted in what top handed on
        assert len(chain) == (1 if offered is None else 2)


def _first(d: Driver) -> str:
    return next(iter(d.children))  # top's child (middle) was admitted first


names = st.frozensets(st.sampled_from(["a", "b", "c"]))
expiry = st.one_of(st.none(), st.integers(0, 2000))


@settings(max_examples=200, deadline=None)
@given(names, names, names, expiry, names, names, names, expiry)
def test_handing_on_never_widens_what_the_run_holds(  # type: ignore[no-untyped-def]
    c1, s1, a1, e1, c2, s2, a2, e2
) -> None:
    held = Delegation(Scope(c1, s1, a1, e1))
    offered = Delegation(Scope(c2, s2, a2, e2))
    try:
        handed = offered.under(held)
    except DelegationWidened:
        assert offered.scope.widenings(held.scope)
        return
    assert handed.chain[0] == held.scope  # still rooted in what the run holds
    scope = handed.scope
    assert scope.capabilities <= c1 and scope.sinks <= s1 and scope.audience <= a1
    if e1 is not None:
        assert scope.not_after_ms is not None and scope.not_after_ms <= e1
    for sink in ("a", "b", "zz"):
        if handed.confines(sink, 0) is None:
            assert held.confines(sink, 0) is None
    assert Delegation.from_json(handed.to_json()) == handed


def test_a_delegation_that_does_not_read_fails_closed() -> None:
    with pytest.raises(Exception, match="JSON"):
        Delegation.read("{not json")
    forged = {
        "chain": [_scope({"a"}, {"s"}, {"p"}).to_json(), _scope({"a", "b"}, set(), set()).to_json()]
    }
    with pytest.raises(DelegationWidened):
        Delegation.read(json.dumps(forged))


# -- a commission passes the sink gate with the exact input the child gets (issue 13) -------

POLICY = """
sources:
  "tool://vault": {trust: trusted, sensitivity: secret}
sinks:
  "agent/worker": {mutating: true, ceiling: internal}
"""


def _refusals(sink: str, reason: str) -> float:
    from prometheus_client import REGISTRY

    labels = {"sink": sink, "reason": reason}
    return REGISTRY.get_sample_value("runplane_gate_refusals_total", labels) or 0.0


def test_a_commission_is_gated_on_its_exact_input_and_its_refusals_are_counted() -> None:
    from runplane.core.policy import parse_policy
    from services.executor.policy import count_refusal

    reg = _registry(None)

    @reg.agent("leaker", effects=[EffectDecl("vault", mutating=False)])
    async def leaker(ctx: StepCtx, input: Any) -> Any:
        secret = await ctx.tool("vault", {})
        out: dict[str, Any] = {}
        try:  # the plain string, unwrapped and re-embedded: it still matches the secret output
            await ctx.commission("worker", {"note": f"the key is {secret['key']}!"})
        except EffectError as exc:
            out["egress"] = exc.type
        try:
            await ctx.commission("worker", {}, delegation=CRM_ONLY)  # presented by the wrong agent
        except EffectError as exc:
            out["delegation"] = exc.type
        out["plain"] = await ctx.commission("worker", {"id": 1})
        return out

    vault = {"vault": lambda a, k: {"key": "sk-live-0123456789abcdef"}}
    d = Driver(reg, tools={**TOOLS, **vault}, policy=parse_policy(POLICY))
    before = {r: _refusals("agent/worker", r) for r in ("egress", "not_delegated")}
    view = d.run("leaker", {})
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == {
        "egress": "SinkRefused",
        "delegation": "DelegationRefused",
        "plain": {"mail": "sent"},
    }
    assert len(d.children) == 1  # neither refused commission started a child
    for record in view.journal:
        count_refusal(record)  # what the executor does with every record it writes
    for reason in ("egress", "not_delegated"):
        assert _refusals("agent/worker", reason) == before[reason] + 1, reason
    assert d.verify(view.session_id).ok


def test_the_example_child_is_refused_the_sink_its_delegation_excludes() -> None:
    import examples.plan_triage as example
    from runplane.core import REGISTRY
    from runplane.providers import TOOLS as PROVIDED

    reg = AgentRegistry([REGISTRY.spec(n) for n in ("plan.delegate", "plan.notify")])
    tools = {n: (lambda t: lambda a, k: t.fn(**a))(PROVIDED[n]) for n in example.TOOL_NAMES}
    d = Driver(reg, tools=tools)
    payment = {"amount": 120, "account": "a-1"}
    assert d.run("plan.delegate", payment).output == {"score": 12, "notified": "DelegationRefused"}
    assert d.run("plan.notify", payment).output == {"score": 12, "notified": True}
    assert d.tool_calls["notify/post"] == 1


def test_a_child_that_continues_as_new_answers_from_its_last_generation_still_bounded() -> None:
    reg = _registry(None)

    @reg.agent("rolling", effects=READS)
    async def rolling(ctx: StepCtx, input: Any) -> Any:
        if input["left"] > 0:
            return await ctx.continue_as_new({"left": input["left"] - 1})
        try:
            await ctx.tool("mail", {"to": "x"})
        except EffectError as exc:
            return {"generations": "done", "mail": exc.type}
        return {"generations": "done", "mail": "sent"}

    @reg.agent("owner")
    async def owner(ctx: StepCtx, input: Any) -> Any:
        scope = _scope({"rolling"}, {"tool://crm"}, {"owner"})
        return await ctx.commission("rolling", {"left": 2}, delegation=Delegation(scope))

    d = Driver(reg, tools=TOOLS)
    view = d.run("owner", {})
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == {"generations": "done", "mail": "DelegationRefused"}
    assert d.tool_calls["mail"] == 0 and len(d.children) == 1
    last = d.view(f"{_child(d)}.n2")
    assert "delegation" in last.journal[0].attrs and d.verify(last.session_id).ok


RELEASING = """
agents:
  asker:
    release:
      - {destination: agent/worker, fields: [$.note], trust: true}
"""


def test_a_released_field_goes_out_in_a_commission_and_only_there() -> None:
    from runplane.core.gate import SinkDecl, sinks
    from runplane.core.policy import parse_policy
    from runplane.testing import ScriptedProvider

    reg = _registry(None)

    @sinks(SinkDecl("agent/worker"))  # mutating: no untrusted scalar unless released for it
    @reg.agent("asker", models=("scripted",))
    async def asker(ctx: StepCtx, input: Any) -> Any:
        said = (await ctx.generate("scripted", "m", "summarise the ticket")).text
        out: dict[str, Any] = {}
        try:
            await ctx.commission("worker", {"note": said})
        except EffectError as exc:
            out["plain"] = exc.type
        released = await ctx.release(
            said, destination="agent/worker", field="$.note", basis="a summary only"
        )
        out["released"] = await ctx.commission("worker", {"note": released})
        return out

    provider = ScriptedProvider(["the customer wants a refund of order 42"])
    d = Driver(reg, tools=TOOLS, providers={"scripted": provider}, policy=parse_policy(RELEASING))
    view = d.run("asker", {})
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == {"plain": "SinkRefused", "released": {"mail": "sent"}}
    assert len(d.children) == 1
    (child,) = d.children.values()
    assert json.loads(d.sessions[child].snapshot.input_json) == {  # type: ignore[union-attr]
        "note": "the customer wants a refund of order 42"  # the plain value, unwrapped
    }


def test_the_runs_tree_shows_what_a_child_may_reach() -> None:
    from runplane.journal.tree import tree

    d = Driver(_registry(CRM_ONLY), tools=TOOLS)
    view = d.run("boss", {})
    root = tree(view.session_id, lambda rid: list(d.view(rid).journal))
    (child,) = root.children
    assert root.delegated_sinks is None and child.delegated_sinks == ("tool://crm",)
    assert "(delegated sinks: tool://crm)" in root.lines()[1]
    assert root.to_json()["children"][0]["delegated_sinks"] == ["tool://crm"]  # type: ignore[index]


def test_a_delegation_refusal_is_caught_by_its_class_in_the_child_and_the_parent() -> None:
    from runplane.core.releases import DelegationRefused

    reg = AgentRegistry()

    @reg.agent("typed", effects=READS)
    async def typed(ctx: StepCtx, input: Any) -> Any:
        try:
            await ctx.tool("mail", {"to": "x"})
        except DelegationRefused:
            return "caught"
        return "sent"

    @reg.agent("sender")
    async def sender(ctx: StepCtx, input: Any) -> Any:
        scope = _scope({"typed"}, set(), {"sender"})
        got = await ctx.commission("typed", {}, delegation=Delegation(scope))
        try:  # the parent presents a delegation that does not admit this capability
            await ctx.commission("other", {}, delegation=Delegation(scope))
        except DelegationRefused:
            return [got, "caught"]
        return [got, "started"]

    d = Driver(reg, tools=TOOLS)
    view = d.run("sender", {})
    assert view.output == ["caught", "caught"], view.error
    snap = d.sessions[view.session_id].snapshot
    assert snap is not None
    replayed = replay_history(reg.spec("sender"), snap, d.sessions[view.session_id].results)
    assert replayed.output == ["caught", "caught"] and replayed.live_calls == 0
