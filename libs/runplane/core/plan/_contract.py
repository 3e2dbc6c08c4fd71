"""The Contract: what a plan must satisfy before any of it runs. Pure.

``validate(plan, contract)`` returns every problem, each with its position (``nodes.s1.args.x``),
in one pass; ``check`` raises ``PlanRefused`` carrying them. The rules:

- **acyclic**: a node on a dependency cycle can never become ready;
- **bindings point upstream**: every binding (and ``after``) names a node of the plan, never
  itself — with acyclicity, every source is upstream of its consumer;
- **granted**: every tool, agent and model the plan calls is granted by policy, and every node
  declared a ``sink`` is granted as a sink;
- **sizes**: node count, the width of any ready set and the bytes of the plan's literals stay
  within the contract's limits (a plan is journaled whole, and a ready set is dispatched at once).

``untrusted_sources(plan, input, label_of)`` is the rule that a plan is compiled from trusted
input only: every literal and every binding to the input whose label (``label_of``: the sink
gate's labelling, ``StepCtx.label_of``) is not trusted is a problem at its position. A plan
whose constants a model wrote, or whose input is an untrusted answer, is refused before it
runs — its bindings would otherwise carry the untrusted text with a plan's authority.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from runplane.core.canonical import canonical_json
from runplane.core.plan._ir import INPUT, Bind, Const, Plan, waves
from runplane.core.plan._path import MISSING, format_path, lookup
from runplane.errors import TerminalError
from runplane.wire import Label, Trust

__all__ = ["Contract", "PlanProblem", "PlanRefused", "check", "untrusted_sources", "validate"]


@dataclass(frozen=True)
class PlanProblem:
    """One reason a plan is refused, at its position in the plan."""

    position: str
    message: str

    def __str__(self) -> str:
        return f"{self.position}: {self.message}"


class PlanRefused(TerminalError):
    """The contract refused the plan; ``problems`` are all of its reasons, positioned."""

    def __init__(self, problems: Iterable[PlanProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("plan refused: " + "; ".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class Contract:
    """What policy grants a plan: the calls it may make (``tools``, ``agents`` — capabilities
    it may commission — and ``models`` as ``provider/model``, where ``provider/*`` grants every
    model of a provider), the ``sinks`` it may send to, and its size limits."""

    tools: frozenset[str] = frozenset()
    agents: frozenset[str] = frozenset()
    models: frozenset[str] = frozenset()
    sinks: frozenset[str] = frozenset()
    max_nodes: int = 64
    max_width: int = 16
    max_literal_bytes: int = 65_536

    def __post_init__(self) -> None:
        for name in ("tools", "agents", "models", "sinks"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        if min(self.max_nodes, self.max_width, self.max_literal_bytes) < 1:
            raise ValueError("contract limits must be positive")

    def grants(self, kind: str, target: str) -> bool:
        if kind == "tool":
            return target in self.tools
        if kind == "agent":
            return target in self.agents
        provider = target.partition("/")[0]
        return target in self.models or f"{provider}/*" in self.models


def validate(plan: Plan, contract: Contract) -> list[PlanProblem]:
    """Every problem of ``plan`` under ``contract`` (empty: it may run)."""
    problems: list[PlanProblem] = []
    ids = {n.id for n in plan.nodes}
    for node in plan.nodes:
        where = f"nodes.{node.id}"
        for name, bind in node.bindings.items():
            if bind.source == INPUT:
                continue
            if bind.source == node.id:
                problems.append(PlanProblem(f"{where}.args.{name}", "binds to its own output"))
            elif bind.source not in ids:
                problems.append(
                    PlanProblem(
                        f"{where}.args.{name}",
                        f"binds to {bind.source!r}, which is not a node of the plan",
                    )
                )
        for dep in node.after:
            if dep not in ids or dep == node.id:
                problems.append(
                    PlanProblem(f"{where}.after", f"{dep!r} is not another node of the plan")
                )
        if not contract.grants(node.kind, node.target):
            problems.append(
                PlanProblem(f"{where}.call", f"{node.kind} {node.target!r} is not granted")
            )
        if node.sink and node.target not in contract.sinks:
            problems.append(PlanProblem(f"{where}.sink", f"sink {node.target!r} is not granted"))
    problems.extend(_graph_problems(plan, contract))
    return problems


def _graph_problems(plan: Plan, contract: Contract) -> list[PlanProblem]:
    problems: list[PlanProblem] = []
    layered = waves(plan)
    placed = {i for wave in layered for i in wave}
    stuck = sorted(n.id for n in plan.nodes if n.id not in placed)
    if stuck:
        problems.append(
            PlanProblem("nodes", f"cycle (or a dependency on one) through {', '.join(stuck)}")
        )
    if len(plan.nodes) > contract.max_nodes:
        problems.append(
            PlanProblem("nodes", f"{len(plan.nodes)} nodes, more than {contract.max_nodes}")
        )
    for i, wave in enumerate(layered):
        if len(wave) > contract.max_width:
            problems.append(
                PlanProblem(
                    f"waves[{i}]",
                    f"{len(wave)} nodes ready at once, more than {contract.max_width}",
                )
            )
    literals = [a.value for n in plan.nodes for a in n.args.values() if isinstance(a, Const)]
    size = len(canonical_json(literals).encode())
    if size > contract.max_literal_bytes:
        problems.append(
            PlanProblem(
                "nodes", f"{size} bytes of literals, more than {contract.max_literal_bytes}"
            )
        )
    return problems


def untrusted_sources(
    plan: Plan, input: Any, label_of: Callable[[Any], Label]
) -> list[PlanProblem]:
    """Every literal and input binding of ``plan`` whose label is not trusted, positioned
    (``nodes.s1.args.x``). A binding to a path the input lacks is left to ``resolve_args``."""
    problems: list[PlanProblem] = []
    for node in plan.nodes:
        for name, arg in node.args.items():
            if isinstance(arg, Const):
                what, value = "the plan's literal", arg.value
            elif isinstance(arg, Bind) and arg.source == INPUT:
                what, value = f"the input at {format_path(arg.parts)}", lookup(input, arg.parts)
                if value is MISSING:
                    continue
            else:
                continue
            label = label_of(value)
            if label.trust is not Trust.TRUSTED:
                origins = ", ".join(label.provenance) or "unknown"
                problems.append(
                    PlanProblem(
                        f"nodes.{node.id}.args.{name}",
                        f"{what} is untrusted (from {origins}): a plan is compiled from "
                        "trusted input only",
                    )
                )
    return problems


def check(plan: Plan, contract: Contract) -> Plan:
    """``plan`` if the contract admits it, else ``PlanRefused`` with every problem."""
    problems = validate(plan, contract)
    if problems:
        raise PlanRefused(problems)
    return plan
