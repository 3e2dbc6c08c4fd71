"""The plan IR: a frozen graph of nodes whose every argument names where it comes from. Pure.

    plan = Plan("triage", (
        Node("s0", "tool:crm/lookup", {"id": Bind("input", "$.customer")}),
        Node("s1", "tool:billing/charge", {"email": Bind("s0", "$.email"),
                                           "amount": Const(10)}, sink=True),
    ), output="s1")

A node's ``call`` is ``<kind>:<target>``: ``tool:<name>`` (a tool call), ``agent:<capability>``
(a commission to another agent) or ``model:<provider>/<model>`` (a generation). An argument
is a ``Const`` (a literal from the trusted input the plan was compiled from) or a ``Bind``
(``{source: <node>.output, path: "$.field"}``; the source ``input`` is the run's input).

A plan is compiled from trusted input only and frozen *before* any untrusted data is read:
nothing a node returns can change which nodes run or where their arguments come from. Its
content address (``plan_hash``) is the SHA-256 of its canonical JSON, in which nodes are
sorted by id, so the hash does not depend on the order a compiler emitted them in.

The constructors check the shape (ids, calls, paths, canonical literals); the graph rules
that need a policy — acyclic, no dangling binding, granted calls, sizes — are the
``Contract``'s (``runplane.core.plan.validate``), which reports every problem with its position.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from runplane.core.canonical import canonical_json
from runplane.core.plan._path import format_path, parse_path
from runplane.errors import TerminalError

__all__ = [
    "INPUT",
    "KINDS",
    "Arg",
    "Bind",
    "Const",
    "Node",
    "Plan",
    "PlanInvalid",
    "arg_from_json",
    "fan_out_plan",
    "plan_from_json",
    "plan_hash",
    "ready_order",
    "waves",
]

INPUT: Final = "input"
KINDS: Final = ("tool", "agent", "model")
NODE_ID: Final = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_TARGET: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")
_ARG_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class PlanInvalid(TerminalError):
    """A plan (or a plan record) that cannot be built; ``position`` says where."""

    def __init__(self, position: str, message: str) -> None:
        super().__init__(f"{position}: {message}" if position else message)
        self.position = position
        self.message = message


@dataclass(frozen=True)
class Const:
    """A literal argument, from the trusted input the plan was compiled from."""

    value: Any

    def __post_init__(self) -> None:
        try:
            canonical_json(self.value)
        except (TypeError, ValueError) as exc:
            raise PlanInvalid("", f"a literal must be canonical JSON: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        return {"source": "const", "value": self.value}


@dataclass(frozen=True)
class Bind:
    """A source binding: the value at ``path`` in the output of node ``source`` (or in the
    run's input, ``source="input"``). ``path`` is text (``$.a[0]``) or parsed parts."""

    source: str
    path: tuple[str | int, ...] | str = ()

    def __post_init__(self) -> None:
        if self.source != INPUT and not NODE_ID.match(self.source):
            raise PlanInvalid("", f"binding source {self.source!r} is not a node id or 'input'")
        if isinstance(self.path, str):
            parts = parse_path(self.path)
            if parts is None:
                raise PlanInvalid("", f"binding path {self.path!r} is not a path like $.a.b[0]")
            object.__setattr__(self, "path", parts)

    @property
    def parts(self) -> tuple[str | int, ...]:
        assert not isinstance(self.path, str)  # parsed in __post_init__
        return self.path

    def describe(self) -> str:
        where = INPUT if self.source == INPUT else f"{self.source}.output"
        return f"{where} {format_path(self.parts)}"

    def to_json(self) -> dict[str, Any]:
        source = INPUT if self.source == INPUT else f"{self.source}.output"
        return {"source": source, "path": format_path(self.parts)}


Arg = Const | Bind


def arg_from_json(data: Any, position: str = "") -> Arg:
    """``{source: const, value: v}``, ``{source: s0.output, path: "$.x"}`` or ``{source:
    input, path: …}`` → the argument (``PlanInvalid`` with ``position`` otherwise)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("source"), str):
        raise PlanInvalid(
            position, "an argument is {source: const, value: …} or {source: <node>.output, path: …}"
        )
    source = data["source"]
    try:
        if source == "const":
            if set(data) != {"source", "value"}:
                raise PlanInvalid(position, "a const argument has exactly source and value")
            return Const(data["value"])
        if set(data) - {"source", "path"}:
            raise PlanInvalid(position, f"unknown keys {sorted(set(data) - {'source', 'path'})}")
        node = source if source == INPUT else source.removesuffix(".output")
        if node == source and source != INPUT:
            raise PlanInvalid(
                position, f"source {source!r} must be 'const', 'input' or '<node>.output'"
            )
        return Bind(node, data.get("path", "$"))
    except PlanInvalid as exc:
        if exc.position:
            raise
        raise PlanInvalid(position, exc.message) from None


@dataclass(frozen=True)
class Node:
    """One call of the plan: ``call`` = ``<kind>:<target>``, its arguments, and nodes it must
    follow without taking their output (``after``). ``sink``: the call sends data out of the
    run (a mutating tool, a message): the contract must grant it as a sink too."""

    id: str
    call: str
    args: Mapping[str, Arg] = field(default_factory=dict)
    after: tuple[str, ...] = ()
    sink: bool = False

    def __post_init__(self) -> None:
        where = f"nodes.{self.id}"
        if not isinstance(self.id, str) or not NODE_ID.match(self.id) or self.id == INPUT:
            raise PlanInvalid(
                "nodes", f"node id {self.id!r} must match {NODE_ID.pattern} and not be 'input'"
            )
        kind, _, target = self.call.partition(":")
        if kind not in KINDS or not _TARGET.match(target):
            raise PlanInvalid(f"{where}.call", f"{self.call!r} is not <tool|agent|model>:<target>")
        for name, arg in self.args.items():
            if not _ARG_NAME.match(name) or not isinstance(arg, (Const, Bind)):
                raise PlanInvalid(
                    f"{where}.args.{name}", "an argument is a Const or a Bind under an identifier"
                )
        # Frozen means frozen: a caller's dict cannot change the plan after it was hashed.
        object.__setattr__(self, "args", dict(sorted(self.args.items())))
        object.__setattr__(self, "after", tuple(sorted(set(self.after))))

    @property
    def kind(self) -> str:
        return self.call.partition(":")[0]

    @property
    def target(self) -> str:
        return self.call.partition(":")[2]

    @property
    def bindings(self) -> dict[str, Bind]:
        return {name: a for name, a in self.args.items() if isinstance(a, Bind)}

    @property
    def deps(self) -> tuple[str, ...]:
        """Nodes whose completion this one waits for: its binding sources and ``after``."""
        sources = {b.source for b in self.bindings.values() if b.source != INPUT}
        return tuple(sorted(sources | set(self.after)))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "call": self.call,
            "args": {name: a.to_json() for name, a in self.args.items()},
        }
        if self.after:
            out["after"] = list(self.after)
        if self.sink:
            out["sink"] = True
        return out


@dataclass(frozen=True)
class Plan:
    """A frozen plan: its nodes (unique ids) and the node whose output is the plan's result
    (``output=None``: the outputs of every node, by id)."""

    name: str
    nodes: tuple[Node, ...]
    output: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _TARGET.match(self.name):
            raise PlanInvalid("name", f"{self.name!r} is not a plan name")
        nodes = tuple(self.nodes)
        if not nodes:
            raise PlanInvalid("nodes", "a plan has at least one node")
        seen: set[str] = set()
        for node in nodes:
            if node.id in seen:
                raise PlanInvalid(f"nodes.{node.id}", "duplicate node id")
            seen.add(node.id)
        if self.output is not None and self.output not in seen:
            raise PlanInvalid("output", f"no node {self.output!r}")
        object.__setattr__(self, "nodes", tuple(sorted(nodes, key=lambda n: n.id)))

    def node(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.id == node_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "nodes": [n.to_json() for n in self.nodes],
            "output": self.output,
        }

    @property
    def hash(self) -> str:
        return plan_hash(self)


def plan_hash(plan: Plan) -> str:
    """The plan's content address: hex SHA-256 of its canonical JSON."""
    return hashlib.sha256(canonical_json(plan.to_json()).encode()).hexdigest()


def plan_from_json(data: Any) -> Plan:
    """A plan from its JSON form (the form ``Plan.to_json`` writes and a manifest states);
    every part goes through the constructors, so an invalid plan record is a read error."""
    if not isinstance(data, Mapping):
        raise PlanInvalid("", "a plan is an object with name, nodes and output")
    raw = data.get("nodes")
    if not isinstance(raw, list):
        raise PlanInvalid("nodes", "a list of nodes")
    nodes = []
    for i, item in enumerate(raw):
        where = f"nodes[{i}]"
        if not isinstance(item, Mapping) or set(item) - {"id", "call", "args", "after", "sink"}:
            raise PlanInvalid(where, "a node is {id, call, args, after?, sink?}")
        args = item.get("args", {})
        if not isinstance(args, Mapping):
            raise PlanInvalid(f"{where}.args", "an object of arguments")
        after = item.get("after", [])
        if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
            raise PlanInvalid(f"{where}.after", "a list of node ids")
        nodes.append(
            Node(
                str(item.get("id")),
                str(item.get("call")),
                {str(k): arg_from_json(v, f"{where}.args.{k}") for k, v in args.items()},
                tuple(after),
                bool(item.get("sink", False)),
            )
        )
    output = data.get("output")
    if output is not None and not isinstance(output, str):
        raise PlanInvalid("output", "a node id or null")
    return Plan(str(data.get("name")), tuple(nodes), output)


def waves(plan: Plan) -> tuple[tuple[str, ...], ...]:
    """The ready sets, in order: each wave holds the nodes whose dependencies all ran in
    earlier waves, sorted by id — the deterministic ready order admission and application
    follow. Nodes on a cycle or behind a dangling dependency are in no wave (the contract
    refuses such a plan before it runs)."""
    pending = {n.id: set(n.deps) for n in plan.nodes}
    done: set[str] = set()
    out: list[tuple[str, ...]] = []
    while True:
        ready = tuple(sorted(i for i, deps in pending.items() if deps <= done))
        if not ready:
            return tuple(out)
        out.append(ready)
        done.update(ready)
        for i in ready:
            del pending[i]


def ready_order(plan: Plan) -> tuple[str, ...]:
    """Every node in the order of ``waves``."""
    return tuple(i for wave in waves(plan) for i in wave)


def fan_out_plan(
    name: str, branches: Iterable[str], aggregator: str, *, kind: str = "agent"
) -> Plan:
    """``PlanIR::fan_out``: each branch (a capability, or a tool with ``kind="tool"``) gets
    the run's input; the aggregator gets every branch's output under the branch's node id
    (its capability's name with ``.``/``-`` as ``_``)."""
    nodes = []
    for target in branches:
        nodes.append(Node(_node_id(target), f"{kind}:{target}", {"input": Bind(INPUT, "$")}))
    agg_args: dict[str, Arg] = {n.id: Bind(n.id, "$") for n in nodes}
    agg = Node("aggregate", f"{kind}:{aggregator}", agg_args)
    return Plan(name, (*nodes, agg), output="aggregate")


def _node_id(target: str) -> str:
    node_id = re.sub(r"[^a-z0-9_]", "_", target.lower())
    return node_id if NODE_ID.match(node_id) else f"n_{node_id}"[:63]
