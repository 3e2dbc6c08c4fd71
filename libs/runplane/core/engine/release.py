"""Effect family: releases (``ctx.release``) — policy decides, or a person does.

A fresh release slot is decided here, once:

- the deployment policy grants the agent ``data:release`` for this destination, field and
  dimension → the grant is recorded at the slot (outcome ``GRANTED``) and served at once;
- the policy names who decides releases for this agent (``release_role``) and the request
  names someone else →
  recorded as ``ReleaseRefused`` (an agent may not pick a friendlier approver);
- otherwise the release is an approval task for the request's role on the worklist (the
  approvals family opens it and takes its TaskDecision, four-eyes included: the run's
  initiator cannot decide it).

Either way the decision is journaled at the release's slot, so a replay serves it and asks
nobody. What the agent gets back is decoded by ``releases.released_from``.
"""

from __future__ import annotations

from typing import Any

from runplane.core.effect import Effect
from runplane.core.engine.decode import serve
from runplane.core.engine.state import Run
from runplane.core.engine.vocab import Resolution, Slot
from runplane.core.releases import Released, released_from
from runplane.wire import ErrorInfo, JournalKind

__all__ = ["by_policy", "decode"]


def by_policy(run: Run, slot: Slot) -> Resolution | None:
    """Decide a fresh release by policy: a grant, a refusal, or None when a person decides
    (the registry's row then opens the approval task)."""
    req = slot.effect.request
    rel = req["release"]
    attrs = {"destination": str(rel["destination"]), "field": str(rel["field"])}
    if run.policy is None:
        return None
    attrs["policy"] = run.policy.digest
    granted = run.policy.for_agent(run.spec.capability)
    if any(
        g.covers(rel["destination"], rel["field"], bool(rel["trust"]), rel["sensitivity"])
        for g in granted.releases
    ):
        attrs["release"] = "granted"
        value = {
            "outcome": "GRANTED",
            "approved": True,
            "comment": "data:release",
            "decided_by": [],
        }
        entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, value=value, attrs=attrs)
        return serve(run.rec, slot.effect, entry)
    if granted.release_role is not None and granted.release_role != req["role"]:
        attrs["release"] = "refused"
        error = ErrorInfo(
            type="ReleaseRefused",
            message=f"releases for {run.spec.capability} are decided by role "
            f"{granted.release_role!r}, not {req['role']!r}",
            retryable=False,
        )
        entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, error=error, attrs=attrs)
        return serve(run.rec, slot.effect, entry)
    return None


def decode(effect: Effect, raw: Any) -> Released:
    """A release's recorded decision, as the agent gets it."""
    return released_from(effect.request, raw)
