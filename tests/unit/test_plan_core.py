"""The plan package: IR, hashing, the contract, source binding, delegation, quorum, batch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.core.plan import (
    AllFailed,
    AllSucceeded,
    Approved,
    Bind,
    BindingViolation,
    Const,
    Contract,
    Delegation,
    DelegationWidened,
    Node,
    PartiallyFailed,
    Pending,
    Plan,
    PlanInvalid,
    PlanRefused,
    Quorum,
    Rejected,
    Scope,
    Sourced,
    Split,
    Vote,
    batch_status,
    check,
    fan_out_plan,
    plan_from_json,
    resolve_args,
    validate,
    waves,
)
from runplane.errors import TerminalError

CRM = Node("s0", "tool:crm/lookup", {"id": Bind("input", "$.customer")})
PAY = Node(
    "s1", "tool:billing/charge", {"email": Bind("s0", "$.email"), "amount": Const(10)}, sink=True
)
GRANTS = Contract(tools={"crm/lookup", "billing/charge"}, sinks={"billing/charge"})


def test_a_valid_plan_passes_and_orders_by_dependency() -> None:
    plan = check(Plan("pay", (PAY, CRM), output="s1"), GRANTS)
    assert waves(plan) == (("s0",), ("s1",))


def test_the_contract_refuses_cycles_dangling_bindings_and_ungranted_calls_with_positions() -> None:
    a = Node("a", "tool:crm/lookup", {"x": Bind("b", "$")})
    b = Node("b", "tool:crm/lookup", {"x": Bind("a", "$")})
    c = Node("c", "tool:shell/exec", {"x": Bind("ghost", "$.y")}, sink=True)
    problems = validate(Plan("bad", (a, b, c)), GRANTS)
    positions = {p.position: p.message for p in problems}
    assert "nodes.c.args.x" in positions and "ghost" in positions["nodes.c.args.x"]
    assert "nodes.c.call" in positions and "not granted" in positions["nodes.c.call"]
    assert "nodes.c.sink" in positions
    assert any("cycle" in p.message and "a, b" in p.message for p in problems)
    with pytest.raises(PlanRefused) as refused:
        check(Plan("bad", (a, b, c)), GRANTS)
    assert len(refused.value.problems) == len(problems)


def test_size_limits_are_part_of_the_contract() -> None:
    wide = fan_out_plan("wide", [f"t{i}" for i in range(5)], "agg", kind="tool")
    contract = Contract(tools={f"t{i}" for i in range(5)} | {"agg"}, max_width=4, max_nodes=5)
    messages = [str(p) for p in validate(wide, contract)]
    assert any(m.startswith("waves[0]") for m in messages)
    assert any("6 nodes" in m for m in messages)
    big = Plan("big", (Node("a", "tool:crm/lookup", {"blob": Const("x" * 100)}),))
    assert validate(big, Contract(tools={"crm/lookup"}, max_literal_bytes=50))


def test_binding_itself_and_after_unknown_are_refused() -> None:
    selfish = Node("a", "tool:crm/lookup", {"x": Bind("a", "$")}, after=("zz",))
    positions = {p.position for p in validate(Plan("p", (selfish,)), GRANTS)}
    assert {"nodes.a.args.x", "nodes.a.after"} <= positions


def test_invalid_shapes_are_refused_at_construction() -> None:
    with pytest.raises(PlanInvalid):
        Node("Bad-Id", "tool:x")
    with pytest.raises(PlanInvalid):
        Node("a", "shell:rm")
    with pytest.raises(PlanInvalid):
        Bind("s0", "a.b")
    with pytest.raises(PlanInvalid):
        Const(float("nan"))
    with pytest.raises(PlanInvalid):
        Plan("p", (CRM, CRM))
    with pytest.raises(PlanInvalid) as bad:
        plan_from_json(
            {"name": "p", "nodes": [{"id": "a", "call": "tool:x", "args": {"q": {"source": "s0"}}}]}
        )
    assert bad.value.position == "nodes[0].args.q"


def test_json_round_trip_keeps_the_hash() -> None:
    plan = Plan("pay", (CRM, PAY), output="s1")
    again = plan_from_json(plan.to_json())
    assert again == plan and again.hash == plan.hash


def test_source_binding_reads_the_journaled_output_and_checks_its_provenance() -> None:
    plan = Plan("pay", (CRM, PAY), output="s1")
    outputs = {"s0": Sourced({"email": "a@b.c"}, frozenset({"tool://crm/lookup", "agent/x"}))}
    assert resolve_args(plan, PAY, {}, outputs) == {"amount": 10, "email": "a@b.c"}
    # A trusted value that came from somewhere else is still refused.
    forged = {"s0": Sourced({"email": "evil@x"}, frozenset({"tool://web/search"}))}
    with pytest.raises(BindingViolation) as v:
        resolve_args(plan, PAY, {}, forged)
    assert v.value.node == "s1" and v.value.arg == "email"
    with pytest.raises(BindingViolation, match=r"did not come from s0\.output"):
        resolve_args(plan, PAY, {}, outputs, proposed={"email": "evil@x", "amount": 10})
    with pytest.raises(BindingViolation, match="does not exist"):
        resolve_args(plan, PAY, {}, {"s0": Sourced({}, frozenset({"tool://crm/lookup"}))})


ids = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=5))


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    names = draw(st.lists(ids, min_size=1, max_size=6, unique=True))
    nodes = []
    for i, name in enumerate(names):
        args: dict[str, Bind | Const] = {}
        for j, src in enumerate(
            draw(st.lists(st.sampled_from(names[:i] or ["input"]), max_size=3))
        ):
            args[f"a{j}"] = Bind("input" if src == "input" else src, "$.v")
        args["lit"] = Const(draw(json_leaf))
        nodes.append(Node(name, f"tool:t{i % 3}", args))
    return Plan("p", tuple(nodes))


@settings(max_examples=150, deadline=None)
@given(plans(), st.randoms(use_true_random=False))
def test_the_hash_ignores_declaration_order_and_survives_json(plan: Plan, rnd) -> None:  # type: ignore[no-untyped-def]
    shuffled = list(plan.nodes)
    rnd.shuffle(shuffled)
    assert Plan(plan.name, tuple(shuffled), plan.output).hash == plan.hash
    assert plan_from_json(plan.to_json()).hash == plan.hash
    # Upstream-only bindings: always acyclic, every node in exactly one wave.
    layered = waves(plan)
    assert sorted(i for w in layered for i in w) == sorted(n.id for n in plan.nodes)
    assert validate(plan, Contract(tools={"t0", "t1", "t2"}, max_nodes=10)) == []


@settings(max_examples=100, deadline=None)
@given(plans(), ids)
def test_changing_any_literal_changes_the_hash(plan: Plan, text: str) -> None:
    node = plan.nodes[0]
    changed = Node(node.id, node.call, {**node.args, "lit": Const(["changed", text])})
    other = Plan(plan.name, (changed, *plan.nodes[1:]), plan.output)
    assert other.hash != plan.hash


ROOT = Delegation(
    Scope(
        frozenset({"risk.score", "fraud.check"}), frozenset({"mail"}), frozenset({"triage"}), 1000
    )
)


def test_a_delegation_only_narrows() -> None:
    child = ROOT.delegate(capabilities={"risk.score"}, sinks=set(), not_after_ms=500)
    assert child.admits(capability="risk.score", presenter="triage")
    assert not child.admits(capability="fraud.check", presenter="triage")
    with pytest.raises(DelegationWidened, match="capabilities"):
        child.delegate(capabilities={"risk.score", "fraud.check"})
    with pytest.raises(DelegationWidened, match="validity"):
        child.delegate(not_after_ms=900)
    with pytest.raises(DelegationWidened, match="audience"):
        ROOT.delegate(audience={"triage", "someone"})
    assert Delegation.from_json(child.to_json()) == child


names = st.frozensets(st.sampled_from(["a", "b", "c", "d"]))


@settings(max_examples=200, deadline=None)
@given(names, names, names, st.one_of(st.none(), st.integers(0, 2000)))
def test_a_widened_delegation_can_be_neither_constructed_nor_deserialized(
    caps, sinks, aud, exp
) -> None:  # type: ignore[no-untyped-def]
    parent = Delegation(Scope(frozenset({"a", "b"}), frozenset({"a"}), frozenset({"a", "b"}), 1000))
    wide = Scope(caps, sinks, aud, exp)
    widens = bool(wide.widenings(parent.scope))
    forged = {"chain": [parent.scope.to_json(), wide.to_json()]}
    if widens:
        with pytest.raises(DelegationWidened):
            Delegation(wide, parent)
        with pytest.raises(DelegationWidened):
            Delegation.from_json(forged)
    else:
        d = Delegation.from_json(forged)
        assert d.scope.capabilities <= parent.scope.capabilities
        assert d.scope.not_after_ms is not None and d.scope.not_after_ms <= 1000


def test_quorum_outcomes_and_no_majority_of_a_split() -> None:
    panel = frozenset({"ann", "bob", "cy", "dee"})
    q = Quorum(panel, approve_at=3, reject_at=3)
    q = q.vote(Vote("ann", True)).vote(Vote("bob", False))
    assert q.outcome == Pending(2)
    split = q.vote(Vote("cy", True)).vote(Vote("dee", False)).outcome
    assert split == Split(("ann", "cy"), ("bob", "dee"))
    assert not hasattr(split, "majority") and not hasattr(split, "winner")
    assert q.vote(Vote("cy", True)).vote(Vote("dee", True)).outcome == Approved(
        ("ann", "cy", "dee")
    )
    assert Quorum(panel, 3, 2, (Vote("ann", False), Vote("bob", False))).outcome == Rejected(
        ("ann", "bob")
    )
    with pytest.raises(TerminalError):
        Quorum(panel, approve_at=2, reject_at=2)  # both thresholds reachable at once
    with pytest.raises(TerminalError):
        Quorum.from_json({"panel": ["ann"], "approve_at": 0, "reject_at": 1, "votes": []})
    with pytest.raises(TerminalError):
        Quorum.from_json(
            {
                "panel": ["ann"],
                "approve_at": 1,
                "reject_at": 1,
                "votes": [{"voter": "eve", "approve": True}],
            }
        )
    assert Quorum.from_json(q.to_json()) == q


def test_a_batch_has_no_success_for_partial_success() -> None:
    assert isinstance(batch_status({"a": 1}, {}), AllSucceeded)
    assert isinstance(batch_status({}, {"a": "boom"}), AllFailed)
    partial = batch_status({"a": 1}, {"b": "boom"})
    assert isinstance(partial, PartiallyFailed)
    with pytest.raises(TerminalError):
        PartiallyFailed({"a": 1}, {})
    with pytest.raises(TerminalError):
        AllSucceeded({})
