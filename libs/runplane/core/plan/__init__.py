"""Plans as frozen authorization graphs. Pure: no I/O, no clock.

    from runplane.core.plan import Plan, Node, Bind, Const, Contract, check

- ``Plan`` / ``Node`` / ``Const`` / ``Bind`` (``_ir``): the IR; ``plan_hash`` its content
  address over canonical JSON; ``plan_from_json`` builds one from JSON through the
  constructors; ``waves`` / ``ready_order`` the deterministic ready order; ``fan_out_plan``
  the branches-then-aggregator shape.
- ``Contract`` / ``validate`` / ``check`` / ``PlanProblem`` / ``PlanRefused`` (``_contract``):
  what policy grants a plan, checked before anything runs, every problem positioned;
  ``untrusted_sources``: the literals and input bindings that are not trusted (refused).
- ``resolve_args`` / ``BindingViolation`` / ``Sourced`` / ``origin`` (``_binding``): source
  binding enforced against journaled provenance.
- ``Delegation`` / ``Scope`` / ``DelegationWidened`` (``_delegation``): authority handed to
  a commissioned peer; only narrows, also when deserialized. ``Bounds``: a delegation and
  the allotment a commissioned run spends from (``core.allotments``), as ``delegation_json``.
- ``Quorum`` and its outcomes, ``BatchStatus`` and ``batch_status`` (``_outcomes``).
- ``parse_path`` / ``lookup`` / ``format_path`` (``_path``): the one JSON-path syntax.
"""

from __future__ import annotations

from runplane.core.plan._binding import BindingViolation, Sourced, origin, resolve_args
from runplane.core.plan._contract import (
    Contract,
    PlanProblem,
    PlanRefused,
    check,
    untrusted_sources,
    validate,
)
from runplane.core.plan._delegation import Bounds, Delegation, DelegationWidened, Scope
from runplane.core.plan._ir import (
    INPUT,
    Arg,
    Bind,
    Const,
    Node,
    Plan,
    PlanInvalid,
    arg_from_json,
    fan_out_plan,
    plan_from_json,
    plan_hash,
    ready_order,
    waves,
)
from runplane.core.plan._outcomes import (
    AllFailed,
    AllSucceeded,
    Approved,
    BatchStatus,
    PartiallyFailed,
    Pending,
    Quorum,
    QuorumOutcome,
    Rejected,
    Split,
    Vote,
    batch_status,
)
from runplane.core.plan._path import MISSING, format_path, lookup, parse_path

__all__ = [
    "INPUT",
    "MISSING",
    "AllFailed",
    "AllSucceeded",
    "Approved",
    "Arg",
    "BatchStatus",
    "Bind",
    "BindingViolation",
    "Bounds",
    "Const",
    "Contract",
    "Delegation",
    "DelegationWidened",
    "Node",
    "PartiallyFailed",
    "Pending",
    "Plan",
    "PlanInvalid",
    "PlanProblem",
    "PlanRefused",
    "Quorum",
    "QuorumOutcome",
    "Rejected",
    "Scope",
    "Sourced",
    "Split",
    "Vote",
    "arg_from_json",
    "batch_status",
    "check",
    "fan_out_plan",
    "format_path",
    "lookup",
    "origin",
    "parse_path",
    "plan_from_json",
    "plan_hash",
    "ready_order",
    "resolve_args",
    "untrusted_sources",
    "validate",
    "waves",
]
