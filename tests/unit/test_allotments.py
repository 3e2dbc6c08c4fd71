"""Budgets over a tree (issue 33 item 4), the pure model: a child spends from what its parent
allotted it, the allotment is escrowed at commission time and its unspent rest comes back
once with the child's result — so fan-out cannot multiply a root's budget. The engine's use
of it: ``test_tree_budgets.py``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.core.allotments import (
    Allotment,
    Charge,
    Ledger,
    account,
    allot,
    ask_json,
    ceiling,
    escrow,
    left,
    read_ask,
    settle,
)
from runplane.core.plan import Bounds, Delegation, Scope
from runplane.core.policy import Budget, Spent
from runplane.errors import TerminalError

# -- the arithmetic, case by case -------------------------------------------------------------


def test_a_ceiling_is_the_policy_budget_met_with_the_allotment_unit_by_unit() -> None:
    budget = Budget(tool_calls=10, model_tokens=None, cost_units=5.0, wall_ms=1000)
    got = ceiling(budget, Allotment(tool_calls=3, model_tokens=700, cost_units=None))
    assert got == Budget(tool_calls=3, model_tokens=700, cost_units=5.0, wall_ms=1000)
    assert ceiling(budget, None) is budget  # no allotment: bounded by policy alone


def test_by_default_a_child_is_allotted_everything_left_and_then_nothing_is() -> None:
    bound = Budget(tool_calls=10, cost_units=2.0)
    first = allot(bound, Spent(tool_calls=4, cost_units=0.5))
    assert first == Allotment(tool_calls=6, cost_units=1.5)
    assert isinstance(first, Allotment)
    ledger = escrow((), "c1", first)
    after = account(Spent(tool_calls=4, cost_units=0.5), ledger)
    refused = allot(bound, after)
    assert isinstance(refused, str)
    assert "tool calls: 10 of 10 spent or allotted" in refused
    assert "cost: 2 of 2 spent or allotted" in refused


def test_a_share_and_amounts_are_capped_by_what_is_left() -> None:
    bound = Budget(tool_calls=10, model_tokens=1000)
    assert allot(bound, Spent(), 0.25) == Allotment(tool_calls=3, model_tokens=250)
    asked = Allotment(tool_calls=50, model_tokens=100, cost_units=1.0)
    # More tool calls than are left: capped; fewer tokens: as asked; cost the run is not
    # bounded in: the child is bounded there all the same.
    got = allot(bound, Spent(tool_calls=7), asked)
    assert got == Allotment(tool_calls=3, model_tokens=100, cost_units=1.0)


def test_an_unbounded_run_allots_nothing_to_carry() -> None:
    got = allot(Budget(), Spent(tool_calls=99))
    assert isinstance(got, Allotment) and not got.bounded()


def test_settling_replaces_the_escrow_once() -> None:
    ledger: Ledger = escrow((), "k", Allotment(tool_calls=5))
    assert escrow(ledger, "k", Allotment(tool_calls=1)) == ledger  # the same child again
    settled = settle(ledger, "k", Spent(tool_calls=2))
    assert account(Spent(tool_calls=1), settled) == Spent(tool_calls=3)
    # A second result for the key (a redelivery, a forged one) returns nothing again.
    assert settle(settled, "k", Spent(tool_calls=0)) == settled
    assert settle(settled, "unknown", Spent()) == settled
    assert left(Budget(tool_calls=10), account(Spent(tool_calls=1), settled)) == Allotment(
        tool_calls=7
    )


def test_asks_and_allotments_read_strictly() -> None:
    assert read_ask(None) is None
    assert read_ask({"share": 0.5}) == 0.5
    assert read_ask(ask_json(Allotment(tool_calls=2))) == Allotment(tool_calls=2)
    for bad in ({"share": 0}, {"share": 1.5}, {"share": True}, {"tools": 3}, [1], "x"):
        with pytest.raises(TerminalError):
            read_ask(bad)
    for values in ({"tool_calls": -1}, {"tool_calls": 1.5}, {"cost_units": "1"}):
        with pytest.raises(TerminalError):
            Allotment.from_json(values)
    with pytest.raises(TerminalError):
        ask_json(2.0)


def test_spent_reads_back_and_refuses_what_is_no_count() -> None:
    spent = Spent(tool_calls=3, model_tokens=40, cost_units=0.5)
    assert Spent.from_json(json.loads(json.dumps(spent.to_json()))) == spent
    for bad in (
        {"tool_calls": -1, "model_tokens": 0, "cost_units": 0},
        {"tool_calls": 1.5, "model_tokens": 0, "cost_units": 0},
        {"tool_calls": 1, "model_tokens": 0},
        {"tool_calls": True, "model_tokens": 0, "cost_units": 0},
        None,
    ):
        with pytest.raises(TerminalError):
            Spent.from_json(bad)


def test_bounds_without_an_allotment_are_the_delegation_bytes_it_always_had() -> None:
    scope = Scope(frozenset({"w"}), frozenset({"tool://a"}), frozenset({"boss"}))
    delegation = Delegation(scope)
    assert Bounds(delegation).to_json() == delegation.to_json()
    old = json.dumps(delegation.to_json())
    assert Bounds.read(old) == Bounds(delegation, None)
    both = Bounds(delegation, Allotment(tool_calls=2))
    assert Bounds.read(json.dumps(both.to_json())) == both
    alone = Bounds(None, Allotment(cost_units=1.5))
    assert Bounds.read(json.dumps(alone.to_json())) == alone
    for bad in ("{}", '{"chain": []}', '{"allotment": {"tool_calls": -2}}', '{"x": 1}', "[", "1"):
        with pytest.raises(TerminalError):
            Bounds.read(bad)


# -- the property: a tree never spends more than its root's ceiling -------------------------


@dataclass
class Node:
    key: str
    parent: Node | None
    bound: Budget
    depth: int
    own: Spent = field(default_factory=Spent)
    ledger: Ledger = ()
    ended: bool = False
    children: list[Node] = field(default_factory=list)
    # The test's own book of what each child was allotted and reported (None: not yet).
    book: dict[str, tuple[Allotment, Spent | None]] = field(default_factory=dict)

    def account(self) -> Spent:
        return account(self.own, self.ledger)

    def subtree(self) -> Spent:
        out = self.own
        for child in self.children:
            out = out.added(child.subtree())
        return out


ROOT = Budget(tool_calls=40, model_tokens=4000, cost_units=10.0)
CALL_COST = 0.75  # one model call's cost

_asks = st.one_of(
    st.none(),
    st.sampled_from([0.1, 0.25, 0.5, 1.0]),
    st.builds(
        Allotment,
        tool_calls=st.one_of(st.none(), st.integers(0, 30)),
        model_tokens=st.one_of(st.none(), st.integers(0, 3000)),
        cost_units=st.one_of(st.none(), st.sampled_from([0.0, 0.75, 2.5, 8.0])),
    ),
)
_policies = st.builds(
    Budget,
    tool_calls=st.one_of(st.none(), st.integers(0, 60)),
    model_tokens=st.one_of(st.none(), st.integers(0, 6000)),
    cost_units=st.one_of(st.none(), st.sampled_from([1.5, 5.0, 20.0])),
)


def _call(node: Node, tokens: int) -> None:
    """A model call of ``tokens`` (its max_tokens, so the gate knows them) and a fixed cost,
    and a tool call — each made only if the gate of ``policy.Budget.refusal`` lets it."""
    if node.bound.refusal(node.account(), "tool", 0) is None:
        node.own = node.own.added(Spent(tool_calls=1))
    if node.bound.refusal(node.account(), "generation", 0, tokens) is None:
        node.own = node.own.added(Spent(model_tokens=tokens, cost_units=CALL_COST))


def _end(node: Node, reply: str) -> None:
    """The run ends (completed, failed or cancelled: all answer the same way); its parent
    gets its account once, twice (a second answer for the same key) or never (its parent
    ended first, or the answer did not read)."""
    node.ended = True
    parent = node.parent
    if parent is None or parent.ended or reply == "lost":
        return
    spent = node.account()
    parent.ledger = settle(parent.ledger, node.key, spent)
    if reply == "twice":  # a second answer for the key — here claiming nothing was spent
        parent.ledger = settle(parent.ledger, node.key, Spent())
    allotted, _ = parent.book[node.key]
    parent.book[node.key] = (allotted, spent)


def _check(nodes: list[Node]) -> None:
    root = nodes[0]
    total = root.subtree()
    # Exactly bounded: tool calls (one each) and tokens (known before the call).
    assert total.tool_calls <= ROOT.tool_calls  # type: ignore[operator]
    assert total.model_tokens <= ROOT.model_tokens  # type: ignore[operator]
    # Cost is known after a call: each run's last call may take it over by that call.
    bound = ROOT.cost_units + len(nodes) * CALL_COST  # type: ignore[operator]
    assert total.cost_units <= bound + 1e-9
    for node in nodes:
        # The account is what the run spent plus, for each child, its escrow or what it
        # reported — each return counted once, never more.
        expected = node.own
        for allotted, reported in node.book.values():
            expected = expected.added(allotted.as_spent() if reported is None else reported)
        mine = node.account()
        assert (mine.tool_calls, mine.model_tokens) == (expected.tool_calls, expected.model_tokens)
        # Cost is a float: a share of it is off the binary grid, so sums in another order
        # differ in the last bits.
        assert mine.cost_units == pytest.approx(expected.cost_units, abs=1e-9)
        # It never counts less than its whole subtree really spent (children still running
        # under an ended child included), and never more than its ceiling in exact units.
        real = node.subtree()
        assert mine.tool_calls >= real.tool_calls and mine.model_tokens >= real.model_tokens
        for unit in ("tool_calls", "model_tokens"):
            limit = getattr(node.bound, unit)
            assert limit is None or getattr(mine, unit) <= limit


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_no_tree_spends_more_than_its_root_whatever_its_fan_out(data: st.DataObject) -> None:
    root = Node("root", None, ROOT, 0)
    nodes = [root]
    for step in range(data.draw(st.integers(1, 120), label="steps")):
        running = [n for n in nodes if not n.ended]
        if not running:
            break
        node = data.draw(st.sampled_from(running), label="run")
        action = data.draw(st.sampled_from(["call", "call", "commission", "end"]), label="do")
        if action == "call":
            _call(node, data.draw(st.integers(0, 800), label="tokens"))
        elif action == "commission" and node.depth < 4:
            ask = data.draw(_asks, label="ask")
            got = allot(node.bound, node.account(), ask)
            if isinstance(got, str):
                assert any(
                    getattr(node.bound, u) is not None
                    and getattr(node.account(), u) >= getattr(node.bound, u)
                    for u in ("tool_calls", "model_tokens", "cost_units")
                ), got
                continue
            policy = data.draw(_policies, label="child policy")
            child = Node(
                f"{node.key}/{step}",
                node,
                ceiling(policy, got if got.bounded() else None),
                node.depth + 1,
            )
            node.ledger = escrow(node.ledger, child.key, got)
            node.book[child.key] = (got, None)
            node.children.append(child)
            nodes.append(child)
        elif action == "end":
            _end(node, data.draw(st.sampled_from(["once", "twice", "lost"]), label="reply"))
        _check(nodes)
    # Everything ends, in a random order, some answers lost: the bound still holds.
    for node in data.draw(st.permutations([n for n in nodes if not n.ended]), label="order"):
        _end(node, data.draw(st.sampled_from(["once", "twice", "lost"]), label="reply"))
    _check(nodes)


def test_ten_children_of_one_step_share_one_budget() -> None:
    """A fan-out dispatches every child before any answers: the first takes what is left
    (by default), the rest are refused; with a share, each takes its part of the rest."""
    bound = Budget(tool_calls=10)
    ledger: Ledger = ()
    given_out: list[int] = []
    for i in range(10):
        got = allot(bound, account(Spent(), ledger), 0.25)
        if isinstance(got, str):
            break
        ledger = escrow(ledger, f"c{i}", got)
        given_out.append(got.tool_calls or 0)
    assert given_out == [3, 2, 2, 1, 1, 1] and sum(given_out) == 10
    assert Charge(Allotment(tool_calls=2)).charged() == Spent(tool_calls=2)
