"""``ctx.approve_call``: a person approves, rejects or edits a proposed tool call. Pure.

    decision = await ctx.approve_call("refund", call.arguments, role="finance", turn=3)
    if not decision.approved:
        ...                                  # decision.reason goes back to the model
    result = await ctx.tool("refund", decision.arguments)

The call approval is an approval (family ``approval``, name ``approval:<role>``): the run parks
on a worklist task whose answer is the proposed call — the tool, its arguments, each argument's
label and the turn that proposed it — and the person's decision is journaled at its slot, so a
replay serves it and asks nobody. Four-eyes holds as for every task: the run's initiator can
neither claim nor decide it (the worklist refuses, and the engine again,
``asking.decision_identity_problem``).

A ``CallDecision`` is one of three outcomes:

- ``APPROVED``: ``arguments`` are the arguments as proposed (the mapping the agent passed, its
  ``Labeled`` wrappers included);
- ``REJECTED``: ``reason`` says why, in the decider's words — a loop returns it to the model as
  the tool's error;
- ``EDITED``: the person changed some arguments (``edited`` names them). ``arguments`` holds
  each changed one as a ``Released`` of its new value for ``tool://<tool>`` at ``$.<name>``:
  the edit is that person's journaled release of exactly those fields (trust, not
  sensitivity — a person vouches for the value, not for its disclosure), so the sink gate
  labels them released by ``human:<decider>`` (``releases.approved_releases`` finds the
  release in the approval's recorded decision). Every other argument keeps the label it had.

Only a call's top-level arguments can be edited, and only those named by a plain JSON-path
member (``[A-Za-z_][A-Za-z0-9_-]*``, the form a protected field is named by); the task lists
them (``OpenTask.editable``). An edit needs a task decided by one person: a call that needs
more approvals is approved or rejected as proposed (an edit by the last approver would change
what the earlier ones approved). The worklist refuses any other edit, and the engine refuses it
again (a TaskDecision is only a record on ``runs.inbox``): the run keeps waiting.

``needs_approval`` says whether a loop must ask at all: the deployment policy's per-sink
``approval`` rule, else the tool's declaration (``EffectDecl.needs_approval``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from runplane.core.agents import EffectDecl
from runplane.core.chain import request_witness
from runplane.core.jsonpaths import InvalidPath, parse
from runplane.core.policy import ApprovalRule, Policy
from runplane.core.releases import edit_release, released_from
from runplane.wire import DecisionOutcome, Label

__all__ = [
    "CallDecision",
    "CallOutcome",
    "call_decision",
    "call_request",
    "editable",
    "edits_of",
    "needs_approval",
]


class CallOutcome(StrEnum):
    APPROVED = "approved"
    REJECTED = "rejected"
    EDITED = "edited"


@dataclass(frozen=True)
class CallDecision:
    """A person's decision on a proposed call (see the module docstring)."""

    outcome: CallOutcome
    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    reason: str = ""  # the decider's comment; for a rejection, why
    decided_by: tuple[str, ...] = ()
    edited: tuple[str, ...] = ()  # the argument names a person changed

    @property
    def approved(self) -> bool:
        """True when the call may be made (as proposed, or as edited)."""
        return self.outcome is not CallOutcome.REJECTED


def needs_approval(
    policy: Policy | None, decl: EffectDecl | None, tool: str
) -> ApprovalRule | None:
    """Who must approve a call to ``tool`` before it is made, or None: the deployment
    policy's ``approval`` for the sink ``tool://<tool>`` wins; else the tool's declaration
    (``needs_approval``), decided by ``policy.DEFAULT_APPROVAL_ROLE``."""
    rule = None if policy is None else policy.approvals.get(f"tool://{tool}")
    if rule is not None:
        return rule
    return ApprovalRule() if decl is not None and decl.needs_approval else None


def _label_json(label: Label) -> dict[str, Any]:
    return {
        "trust": str(label.trust),
        "sensitivity": str(label.sensitivity),
        "provenance": list(label.provenance),
    }


def call_request(
    tool: str,
    arguments: Mapping[str, Any],
    labels: Mapping[str, Label],
    *,
    role: str,
    turn: int | None,
    approvals: int,
    expires_in: int | None,
) -> dict[str, Any]:
    """The journaled request of a call approval: an approval's keys, with the proposed call
    (``call``) as what the task shows; its witness covers the call, its labels and turn."""
    if not tool.strip():
        raise ValueError("approve_call needs the tool's name")
    if not role.strip():
        raise ValueError("approve_call needs the role that decides")
    if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
        raise ValueError("a call's arguments are a JSON object")
    unknown = sorted(set(labels) - set(arguments))
    if unknown:
        raise ValueError(f"labels name no argument of the call: {', '.join(unknown)}")
    if approvals < 1:
        raise ValueError("approvals must be >= 1")
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 0):
        raise ValueError(f"turn is a model turn's number (>= 0), got {turn!r}")
    call = {
        "tool": tool,
        "arguments": dict(arguments),
        "labels": {name: _label_json(label) for name, label in labels.items()},
        "turn": turn,
    }
    at = "" if turn is None else f" (proposed in turn {turn})"
    return {
        "question": f"Call {tool} with these arguments{at}?",
        "call": call,
        "role": role,
        "approvals": approvals,
        "expires_in": expires_in,
        "on_expiry": "fail",
        "allow_unattended": False,
    }


def editable(call: Mapping[str, Any]) -> tuple[str, ...]:
    """The arguments of ``call`` a person may edit: top-level ones named as a path member."""
    return tuple(sorted(name for name in call["arguments"] if _member(name)))


def _member(name: str) -> bool:
    try:
        return parse(f"$.{name}") == (name,)
    except InvalidPath:
        return False


def edits_of(
    fields: Sequence[str], edits_json: str | None, outcome: DecisionOutcome, approvals: int
) -> dict[str, Any]:
    """The edits a decision carries, checked against the proposed call's editable ``fields``
    ({} for none); ``ValueError`` saying why they cannot be taken."""
    if edits_json is None:
        return {}
    if not fields:
        raise ValueError("the task is no call approval: it takes no edits")
    if outcome is not DecisionOutcome.APPROVED:
        raise ValueError(f"edits come with an approval, not with {outcome}")
    if approvals > 1:
        raise ValueError(f"a call that needs {approvals} approvals is not edited")
    try:
        edits = json.loads(edits_json)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"edits are not JSON: {exc}") from None
    if not isinstance(edits, dict) or not edits:
        raise ValueError("edits are a non-empty JSON object of argument names to values")
    unknown = sorted(set(edits) - set(fields))
    if unknown:
        raise ValueError(
            f"edits name {', '.join(map(repr, unknown))}, not an editable argument of the "
            f"proposed call ({', '.join(fields) or 'none'})"
        )
    return edits


def call_decision(
    request: Mapping[str, Any], raw: Mapping[str, Any], proposed: Mapping[str, Any] | None
) -> CallDecision:
    """A call approval's recorded decision, as the agent gets it. ``proposed``: the arguments
    as the agent passed them (wrappers kept), else the request's."""
    call = request["call"]
    tool = str(call["tool"])
    arguments = dict(call["arguments"] if proposed is None else proposed)
    by = tuple(str(p) for p in raw.get("decided_by", ()))
    reason = str(raw.get("comment", ""))
    if not raw.get("approved"):
        return CallDecision(CallOutcome.REJECTED, tool, arguments, reason, by)
    edits: Mapping[str, Any] = raw.get("edits") or {}
    if not edits:
        return CallDecision(CallOutcome.APPROVED, tool, arguments, reason, by)
    approval = request_witness(request)
    for name, value in edits.items():
        # The Released the gate rebuilds from the journal (``approved_releases``), the same way.
        release = edit_release(str(raw["destination"]), f"$.{name}", value, approval)
        arguments[name] = released_from(release, raw)
    return CallDecision(CallOutcome.EDITED, tool, arguments, reason, by, tuple(sorted(edits)))
