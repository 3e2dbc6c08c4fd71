"""Source binding, enforced: each argument of a node must come from where the plan says. Pure.

A node's arguments are resolved from the journal, not from agent code: a ``Bind`` reads the
value at its path in the *journaled* output of its source node (or the run's input), and the
source's journaled provenance must name that node's origin (``tool://crm/lookup``,
``agent/risk.score``, ``model:openai/gpt-4o``). When agent code proposes the arguments itself
(a model's tool call, a coded step), each proposed value must equal what the binding resolves
to. Either mismatch is a ``BindingViolation`` — regardless of the value's trust label: a
trusted value from the wrong node is still the wrong value (binding is strictly stronger
than labels). The check reads only journaled values, so it is free at replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runplane.core.canonical import canonical_json
from runplane.core.plan._ir import INPUT, Bind, Node, Plan
from runplane.core.plan._path import MISSING, format_path, lookup
from runplane.errors import TerminalError

__all__ = ["BindingViolation", "Sourced", "origin", "resolve_args"]


class BindingViolation(TerminalError):
    """An argument of ``node`` did not come from its binding; journaled as the node's failure."""

    def __init__(self, node: str, arg: str, reason: str) -> None:
        super().__init__(f"nodes.{node}.args.{arg}: {reason}")
        self.node = node
        self.arg = arg
        self.reason = reason


@dataclass(frozen=True)
class Sourced:
    """A node's journaled output and the provenance its journal label carries."""

    value: Any
    provenance: frozenset[str]


def origin(node: Node) -> str:
    """The provenance source a node's result carries (a label's concrete origin)."""
    if node.kind == "tool":
        return f"tool://{node.target}"
    if node.kind == "agent":
        return f"agent/{node.target}"
    return f"model:{node.target}"


def resolve_args(
    plan: Plan,
    node: Node,
    input: Any,
    outputs: Mapping[str, Sourced],
    proposed: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The node's arguments, each from its source; ``BindingViolation`` on any mismatch."""
    if proposed is not None and set(proposed) - set(node.args):
        extra = sorted(set(proposed) - set(node.args))[0]
        raise BindingViolation(node.id, extra, "the plan declares no such argument")
    args: dict[str, Any] = {}
    for name, arg in node.args.items():
        value = (
            _bound(plan, node.id, name, arg, input, outputs) if isinstance(arg, Bind) else arg.value
        )
        if proposed is not None and (
            name not in proposed or canonical_json(proposed[name]) != canonical_json(value)
        ):
            source = arg.describe() if isinstance(arg, Bind) else "the plan's literal"
            raise BindingViolation(node.id, name, f"the value offered did not come from {source}")
        args[name] = value
    return args


def _bound(
    plan: Plan, node_id: str, name: str, bind: Bind, input: Any, outputs: Mapping[str, Sourced]
) -> Any:
    if bind.source == INPUT:
        value = lookup(input, bind.parts)
    else:
        sourced = outputs.get(bind.source)
        if sourced is None:
            raise BindingViolation(node_id, name, f"{bind.source} has no journaled output yet")
        expected = origin(plan.node(bind.source))
        if expected not in sourced.provenance:
            raise BindingViolation(
                node_id,
                name,
                f"journaled provenance {sorted(sourced.provenance)} of {bind.source} does not name {expected}",
            )
        value = lookup(sourced.value, bind.parts)
    if value is MISSING:
        raise BindingViolation(
            node_id, name, f"{bind.describe()} does not exist ({format_path(bind.parts)})"
        )
    return value
