"""Runs no deployed agent version can serve (runplane.core.versions), kept out of the executor.

A run recorded on a version whose line is no longer deployed is left where it is — parked,
not failed — and the inbox records for it are dead-lettered with reason
``version_not_deployed`` (their bytes kept) until a version of its line is deployed again; a
StartRun pinned to a line this executor does not host is dead-lettered the same way (the run
stays admitted). Checked before the record is served, so nothing of it is applied.
"""

from __future__ import annotations

from confluent_kafka import Message

from runplane.core import AgentRegistry, UnknownCapability
from runplane.core.versions import VersionNotDeployed
from runplane.wire import Record, SessionSnapshot, StartRun
from services.executor.ending import Resident
from services.executor.outputs import Outputs
from services.executor.state import PartitionState

__all__ = ["VersionGate", "VersionNotDeployed", "not_deployed"]


def not_deployed(registry: AgentRegistry, run: SessionSnapshot | StartRun) -> str | None:
    """Why no deployed version can serve ``run`` (its line is gone), or None."""
    try:
        registry.spec_for(run.capability, run.agent_version)
    except VersionNotDeployed as exc:
        return f"version_not_deployed: {run.capability} {exc}; the run stays parked"
    except UnknownCapability:
        return None
    return None


class VersionGate(Outputs):
    """The check, as a mixin of ``Executor`` (which owns the state declared here)."""

    _registry: AgentRegistry
    _residents: dict[str, Resident]

    def _unservable(self, msg: Message, part: PartitionState, record: Record) -> bool:
        """Dead-letter ``record`` when its run's version line is not deployed here."""
        sid = getattr(record, "session_id", "")
        run = record if isinstance(record, StartRun) else part.sessions.get(sid)
        if run is None or sid in self._residents:
            return False
        why = not_deployed(self._registry, run)
        if why is not None:
            self._dead_letter(msg, f"run {sid}: {why}", "version_not_deployed")
        return why is not None
