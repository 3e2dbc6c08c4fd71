"""Which runs the executor's agent versions cannot serve (runplane.core.versions).

A run recorded on a version whose line is no longer deployed is left where it is — parked,
not failed — and the events for it are dead-lettered with reason ``version_not_deployed``
(their bytes kept) until a version of its line is deployed again.
"""

from __future__ import annotations

from runplane.core import AgentRegistry, UnknownCapability
from runplane.core.versions import VersionNotDeployed
from runplane.wire import SessionSnapshot

__all__ = ["not_deployed"]


def not_deployed(registry: AgentRegistry, snap: SessionSnapshot) -> str | None:
    """Why no deployed version can serve the run of ``snap`` (its line is gone), or None."""
    try:
        registry.spec_for(snap.capability, snap.agent_version)
    except VersionNotDeployed as exc:
        return f"version_not_deployed: {snap.capability} {exc}; the run stays parked"
    except UnknownCapability:
        return None
    return None
