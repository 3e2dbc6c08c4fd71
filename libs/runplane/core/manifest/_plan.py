"""Kind ``plan``: a declarative agent whose execution is a plan IR graph, with fan-out. Pure.

    execution:
      kind: plan
      nodes:
        - {id: risk,   agent: risk.score,  args: {input: {from: input}}}
        - {id: fraud,  agent: fraud.check, args: {input: {from: input}}}
        - {id: decide, agent: decide, args: {risk: {from: risk}, fraud: {from: fraud}}}
      output: {decision: {from: decide}}

A node calls a declared tool (``tool:``) or commissions an agent (``agent:``); its arguments
are the manifest's sources — ``{from: input|<node id>, path: $.a}`` or ``{const: …}`` — which
become the plan's source bindings. Unlike ``tool-sequence`` steps, a node may name any other
node: the plan's contract checks the graph (acyclic, no dangling source, sizes), and nodes
that do not depend on each other run together as one ready set (``ctx.run_plan``). Every
problem is reported at its place under ``spec.execution``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane.core.agents import EffectDecl
from runplane.core.manifest._model import STEP_ID, Checker, Source, type_name
from runplane.core.manifest._sources import parse_output, parse_source
from runplane.core.plan import Arg, Bind, Const, Contract, Node, Plan, PlanInvalid, validate

__all__ = ["parse_plan", "plan_contract"]


def plan_contract(plan: Plan, tools: tuple[EffectDecl, ...]) -> Contract:
    """What a manifest's plan may call: its declared tools (mutating ones as sinks) and the
    agents its nodes name — the manifest is the trusted input the plan is compiled from."""
    return Contract(
        tools=frozenset(d.name for d in tools),
        sinks=frozenset(d.name for d in tools if d.mutating),
        agents=frozenset(n.target for n in plan.nodes if n.kind == "agent"),
    )


def _arg(source: Source) -> Arg:
    return Const(source.value) if source.root == "const" else Bind(source.root, source.path)


def _node(
    c: Checker, item: Any, at: str, known: list[str], schema: Any, tools: Mapping[str, EffectDecl]
) -> Node | None:
    s = c.fields(item, at, ("id",), ("tool", "agent", "args", "after"))
    if s is None or not isinstance(s.get("id"), str) or not STEP_ID.match(s["id"]):
        if s is not None:
            c.add(f"{at}.id", f"a node id matching {STEP_ID.pattern}, got {s.get('id')!r}")
        return None
    if ("tool" in s) == ("agent" in s):
        c.add(at, "a node has exactly one of tool or agent")
        return None
    kind = "tool" if "tool" in s else "agent"
    target = c.string(s[kind], f"{at}.{kind}")
    if target is None:
        return None
    if kind == "tool" and target not in tools:
        c.add(f"{at}.tool", f"tool {target!r} is not declared in spec.tools")
        return None
    raw = s.get("args", {})
    if not isinstance(raw, Mapping):
        c.add(f"{at}.args", f"must be a mapping of argument name to source, got {type_name(raw)}")
        return None
    args = {}
    for name, src in raw.items():
        parsed = parse_source(c, src, f"{at}.args.{name}", known, schema)
        if parsed is not None:
            args[str(name)] = _arg(parsed)
    after = s.get("after", [])
    if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
        c.add(f"{at}.after", "a list of node ids")
        return None
    try:
        # A mutating tool sends data out of the run: the contract must grant it as a sink.
        sink = kind == "tool" and tools[target].mutating
        return Node(s["id"], f"{kind}:{target}", args, tuple(after), sink=sink)
    except PlanInvalid as exc:
        c.add(f"{at}.{exc.position.rsplit('.', 1)[-1]}" if exc.position else at, exc.message)
        return None


def parse_plan(
    c: Checker,
    name: str,
    execution: Mapping[str, Any],
    schema: Mapping[str, Any] | None,
    tools: tuple[EffectDecl, ...],
) -> tuple[Plan | None, Mapping[str, Source] | None]:
    """The plan of ``spec.execution`` and its output mapping; problems go to ``c``."""
    raw = execution.get("nodes")
    if not isinstance(raw, list) or not raw:
        c.add("spec.execution.nodes", f"a non-empty list of nodes, got {type_name(raw)}")
        return None, None
    ids = [str(n.get("id")) for n in raw if isinstance(n, Mapping)]
    known = ["input", *ids]
    before = len(c.problems)
    decls = {d.name: d for d in tools}
    nodes = [
        _node(c, item, f"spec.execution.nodes[{i}]", known, schema, decls)
        for i, item in enumerate(raw)
    ]
    output = parse_output(c, execution.get("output"), set(ids), schema)
    if len(c.problems) > before or any(n is None for n in nodes):
        return None, output
    try:
        plan = Plan(name, tuple(n for n in nodes if n is not None))
    except PlanInvalid as exc:
        c.add(f"spec.execution.{exc.position}", exc.message)
        return None, output
    for problem in validate(plan, plan_contract(plan, tools)):
        c.add(f"spec.execution.{problem.position}", problem.message)
    return plan, output
