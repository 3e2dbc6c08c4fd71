"""Exact labels for a planned loop's tool call (``core.plannedloop``), read from the journal.

A call the planned loop makes names its plan and node (option ``planned``: the plan's hash and
the node id). The sink gate labels its arguments here instead of by matching, from recorded
results only — the option says where to look, never what to conclude:

1. **The plan**: the latest ``plan`` record before the call whose value holds a plan with that
   hash and no problems, rebuilt through ``plan_from_json`` (its hash recomputed).
2. **The planner turn**: the latest generation recorded before that plan record; its answer
   must read (``plannedloop.read_plan``) as a plan with the same hash — the plan is the model's
   answer to that turn, not a record agent code made up. What that turn could read is the
   run's input and every result recorded before it (as ``proposed_labels`` has it).
3. **The node's arguments** must be exactly the node's, each as it resolves: a literal equal
   to the plan's, labelled like a proposed call's argument (``gate.exact_labels``: a verbatim
   copy of what the planner could read by its sources, anything else the planner turn's trust
   with its name as origin); a binding to the input by the input's label; a binding to a node
   by the label of a result of that node's origin recorded after the plan whose value at the
   path (a quarantined turn's: its typed answer) equals the argument — a recipient bound to
   ``crm.output $.account`` carries ``tool://crm_lookup``, a field a quarantined turn filled
   carries the model's untrusted label. The call itself (``$``) carries the planner's trust.

Anything that does not hold — no such plan, another planner answer, an argument the plan does
not resolve to — gives None, and the gate labels the call by matching like any other (where a
model-written literal matches the planner's untrusted answer).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runplane.core.canonical import canonical_json
from runplane.core.gate import Source, exact_labels
from runplane.core.jsonpaths import leaves
from runplane.core.labels import join_all
from runplane.core.plan import (
    INPUT,
    MISSING,
    Bind,
    Const,
    Node,
    Plan,
    PlanInvalid,
    lookup,
    origin,
    plan_from_json,
)
from runplane.core.plannedloop import QuarantineInvalid, quarantine_fields, read_plan, typed
from runplane.wire import Label, ResultEntry, Sensitivity

__all__ = ["planned_labels"]

Key = tuple[int, int]


def planned_labels(
    earlier: Sequence[tuple[Key, ResultEntry]],
    first: Source,
    taken_in: Callable[[ResultEntry], Source | None],
    planned: Any,
    tool: str,
    args: Any,
) -> dict[str, Label] | None:
    """The labels by path of ``args``, the arguments of the planned call ``planned``
    (``{hash, node}``) to ``tool`` — or None (see the module docstring). ``earlier``: the
    run's results recorded before the call, in order; ``first``: the run's input as a source;
    ``taken_in``: what a result brought into the run (the gate's ``_taken_in``)."""
    if not isinstance(planned, Mapping) or not isinstance(args, Mapping):
        return None
    found = _plan(earlier, planned.get("hash"))
    if found is None:
        return None
    at, plan = found
    node = next((n for n in plan.nodes if n.id == planned.get("node")), None)
    if node is None or node.kind != "tool" or node.target != tool or set(args) != set(node.args):
        return None
    turn = next(((k, e) for k, e in reversed(earlier) if k < at and e.family == "generation"), None)
    if turn is None or not _answers(turn[1], plan):
        return None
    sources = [first]
    sources += [s for k, e in earlier if k < turn[0] and (s := taken_in(e)) is not None]
    read = join_all(s.label for s in sources)
    composed = Label(trust=read.trust, sensitivity=read.sensitivity, provenance=(turn[1].name,))
    choice = Label(trust=read.trust, sensitivity=Sensitivity.PUBLIC, provenance=read.provenance)
    consts = {}
    for name, arg in node.args.items():
        if isinstance(arg, Const) and canonical_json(args[name]) != canonical_json(arg.value):
            return None
        if isinstance(arg, Const):
            consts[name] = args[name]
    labels = exact_labels(consts, sources, composed, choice)
    after = [s for k, e in earlier if k > at and (s := taken_in(e)) is not None]
    for name, bind in node.bindings.items():
        label = _bound(plan, bind, args[name], first, after)
        if label is None:
            return None
        labels.update({path: label for path, _ in leaves(args[name], f"$.{name}")})
    return labels


def _plan(earlier: Sequence[tuple[Key, ResultEntry]], wanted: Any) -> tuple[Key, Plan] | None:
    """The latest plan record with hash ``wanted`` and no problems, and its plan."""
    for key, entry in reversed(earlier):
        if entry.family != "plan" or not entry.ok or entry.value_json is None:
            continue
        verdict = json.loads(entry.value_json)
        if not isinstance(verdict, dict) or verdict.get("hash") != wanted or "plan" not in verdict:
            continue
        if verdict.get("problems"):
            return None
        try:
            plan = plan_from_json(verdict["plan"])
        except PlanInvalid:
            return None
        return (key, plan) if plan.hash == wanted else None
    return None


def _answers(entry: ResultEntry, plan: Plan) -> bool:
    """Whether the recorded generation ``entry`` answered exactly ``plan``."""
    if not entry.ok or entry.value_json is None:
        return False
    value = json.loads(entry.value_json)
    text = value.get("text") if isinstance(value, dict) else None
    try:
        return isinstance(text, str) and read_plan(text).hash == plan.hash
    except PlanInvalid:
        return False


def _bound(
    plan: Plan,
    bind: Bind,
    sent: Any,
    first: Source,
    after: Sequence[Source],
) -> Label | None:
    """The label of an argument bound by ``bind`` whose sent value is ``sent``: the input's,
    or the join of the results of the source node's origin (recorded after the plan) holding
    ``sent`` at the path; None if none does."""
    wanted = canonical_json(sent)
    if bind.source == INPUT:
        value = lookup(first.value, bind.parts)
        same = value is not MISSING and canonical_json(value) == wanted
        return first.label if same else None
    source = plan.node(bind.source)
    labels = []
    for result in after:
        if result.name != origin(source):
            continue
        value = _output(source, result.value)
        held = MISSING if value is MISSING else lookup(value, bind.parts)
        if held is not MISSING and canonical_json(held) == wanted:
            labels.append(result.label)
    return join_all(labels) if labels else None


def _output(node: Node, value: Any) -> Any:
    """What a node's recorded result is to a binding: a quarantined turn's typed answer."""
    if node.kind != "model":
        return value
    fields = quarantine_fields(node)
    if isinstance(fields, str):
        return MISSING
    try:
        return typed(value, fields)
    except QuarantineInvalid:
        return MISSING
