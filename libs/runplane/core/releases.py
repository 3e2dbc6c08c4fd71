"""``ctx.release``: the only way to improve a label, for one named destination. Pure types.

    released = await ctx.release(amount, destination="tool://payout", field="$.amount_cents",
                                 basis="invoice INV-7 approved", evidence={"invoice": "INV-7"})
    await ctx.tool("payout", {"recipient": crm["account"], "amount_cents": released})

The request names the dimension (``trust`` and/or ``sensitivity``), the exact field, the
destination sink, the basis and the evidence; it is journaled (its witness covers all of it).
The deployment policy decides: a ``data:release`` grant answers at once; otherwise a person with
the named role decides on the worklist (four-eyes: never the run's initiator). A replay serves
the journaled decision and asks nobody.

What comes back is a ``Released``: the same value, still labelled as before, plus the proof of
the decision. The gate honours it only when it is sent to ``destination`` at ``field`` — and
only after finding the approved release in the run's journal under the witness of the request
the ``Released`` carries, so one built by hand proves nothing. Anywhere else it is its value,
exactly as untrusted as before.

A person who edits a proposed call's arguments (``ctx.approve_call``) releases exactly the
fields they changed: each is an ``edit_release`` of its new value, decided by them, found in
the call approval's recorded decision (``approved_releases`` lists both kinds by witness).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runplane.core.chain import request_witness
from runplane.core.effect import EffectError
from runplane.core.jsonpaths import parse
from runplane.core.labels import Wrapper
from runplane.wire import ResultEntry, Sensitivity

__all__ = [
    "APPROVAL_FAMILY",
    "RELEASE_FAMILY",
    "TYPED_ERRORS",
    "BudgetExceeded",
    "DelegationRefused",
    "ReleaseRefused",
    "Released",
    "SinkRefused",
    "approved_releases",
    "edit_release",
    "release_request",
    "released_from",
]

RELEASE_FAMILY: Final = "release"
APPROVAL_FAMILY: Final = "approval"  # a call approval's edits are releases too


class SinkRefused(EffectError):
    """The sink gate refused an outbound call (the chain record's attrs name the sink, the
    ``gate.Reason`` and the path). Recorded at the call's slot: the call was never performed,
    and a replay raises this again."""

    def __init__(self, message: str) -> None:
        super().__init__("SinkRefused", message)


class BudgetExceeded(EffectError):
    """The run's budget (deployment policy) would be exceeded; the call was not performed."""

    def __init__(self, message: str) -> None:
        super().__init__("BudgetExceeded", message)


class DelegationRefused(EffectError):
    """The delegation the run runs under (or the one a commission carries) does not allow the
    call: a sink outside it, a capability it does not admit, past its validity, or a widened
    chain. Recorded at the call's slot; never performed; a replay raises this again."""

    def __init__(self, message: str) -> None:
        super().__init__("DelegationRefused", message)


class ReleaseRefused(EffectError):
    """The release was not granted (a person rejected it, or policy forbids asking)."""

    def __init__(self, message: str) -> None:
        super().__init__("ReleaseRefused", message)


# Recorded failure type → the class a replay raises (decode.error_from).
TYPED_ERRORS: Final[Mapping[str, Callable[[str], EffectError]]] = {
    "SinkRefused": SinkRefused,
    "BudgetExceeded": BudgetExceeded,
    "DelegationRefused": DelegationRefused,
    "ReleaseRefused": ReleaseRefused,
}


@dataclass(frozen=True)
class Released(Wrapper):
    """A value whose label a journaled decision improved for ``destination`` at ``field``."""

    value: Any
    destination: str
    field: str
    trust: bool
    sensitivity: Sensitivity | None
    decided_by: tuple[str, ...]
    request: Mapping[str, Any]  # the release request as journaled: the gate re-derives its witness


def release_request(
    value: Any,
    *,
    destination: str,
    field: str,
    basis: str,
    evidence: Any,
    trust: bool,
    sensitivity: str | None,
    role: str,
    approvals: int,
) -> dict[str, Any]:
    """The journaled request. It carries an approval's keys too, because a release that policy
    does not grant *is* an approval task (the approvals family serves it unchanged)."""
    parse(field)
    if not trust and sensitivity is None:
        raise ValueError("a release improves trust, sensitivity or both")
    if not basis.strip():
        raise ValueError("a release needs a basis")
    if approvals < 1:
        raise ValueError("approvals must be >= 1")
    level = None if sensitivity is None else str(Sensitivity(str(sensitivity).upper()))
    what = " and ".join(
        x for x in ("trust" if trust else "", level and f"sensitivity {level}") if x
    )
    release = {
        "destination": destination,
        "field": field,
        "trust": trust,
        "sensitivity": level,
        "basis": basis,
        "evidence": evidence,
        "value": value,
    }
    return {
        "question": f"Release {what} of {field} for {destination}? Basis: {basis}",
        "answer": release,
        "role": role,
        "approvals": approvals,
        "expires_in": None,
        "on_expiry": "fail",
        "allow_unattended": False,
        "release": release,
    }


def released_from(request: Mapping[str, Any], decision: Mapping[str, Any]) -> Released:
    """What the agent gets for a recorded release decision (``ReleaseRefused`` if denied)."""
    if not decision.get("approved"):
        raise ReleaseRefused(
            f"release of {request['release']['field']} for {request['release']['destination']} "
            f"was {str(decision.get('outcome', 'refused')).lower()}"
        )
    rel = request["release"]
    return Released(
        value=rel["value"],
        destination=str(rel["destination"]),
        field=str(rel["field"]),
        trust=bool(rel["trust"]),
        sensitivity=None if rel["sensitivity"] is None else Sensitivity(rel["sensitivity"]),
        decided_by=tuple(str(p) for p in decision.get("decided_by", ())),
        request=request,
    )


def edit_release(destination: str, field: str, value: Any, approval: str) -> dict[str, Any]:
    """The release one edited argument of a proposed call is: trust (a person chose the value;
    its sensitivity is what it is) of ``value`` at ``field`` for ``destination``, bound to the
    call approval whose request has the witness ``approval``."""
    return {
        "release": {
            "destination": destination,
            "field": field,
            "trust": True,
            "sensitivity": None,
            "basis": "set by the person who approved the call",
            "evidence": {"approval": approval},
            "value": value,
        }
    }


def approved_releases(entries: Iterable[ResultEntry]) -> dict[str, Mapping[str, Any]]:
    """A run's approved releases in its result journal, by the witness of the release request
    decided: every approved ``release`` decision, and each field a person edited in a call
    approval (``edit_release``, with that approval's decision — its decider). What the gate
    honours a ``Released`` by; nothing else in the journal is a release."""
    out: dict[str, Mapping[str, Any]] = {}
    for e in entries:
        if e.family not in (RELEASE_FAMILY, APPROVAL_FAMILY) or not e.ok or e.value_json is None:
            continue
        decision = json.loads(e.value_json)
        if not isinstance(decision, dict) or decision.get("approved") is not True:
            continue
        if e.family == RELEASE_FAMILY:
            out[e.request_witness] = decision
            continue
        edits = decision.get("edits")
        if not isinstance(edits, dict):
            continue  # an approval as asked: no release
        for name, value in edits.items():
            release = edit_release(
                str(decision["destination"]), f"$.{name}", value, e.request_witness
            )
            out[request_witness(release)] = decision
    return out
