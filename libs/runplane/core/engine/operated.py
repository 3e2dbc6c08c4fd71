"""Values of operating a run from outside (a cancel request), kept in its snapshot."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from runplane.core.canonical import canonical_json

__all__ = ["CancelRequest"]


@dataclass(frozen=True)
class CancelRequest:
    """A cancel accepted by the run and not yet ended (``cancel_json`` in the snapshot).

    ``delivered``: the agent has been told (``RunCancelled`` recorded at a slot). Until then
    the run is busy with something that must get its disposition first — a live call, a case
    command, an operator's verdict on a call in doubt — and the cancel is raised at the next
    effect the agent issues."""

    reason: str
    by: str
    at_ms: int
    delivered: bool = False

    def __post_init__(self) -> None:
        if not self.by.strip():
            raise ValueError("a cancel names who asked for it")
        if self.at_ms < 0:
            raise ValueError("CancelRequest.at_ms must be >= 0")

    def told(self) -> CancelRequest:
        return replace(self, delivered=True)

    def to_json(self) -> str:
        return canonical_json(
            {"reason": self.reason, "by": self.by, "at_ms": self.at_ms, "delivered": self.delivered}
        )

    @classmethod
    def from_json(cls, text: str) -> CancelRequest:
        data = json.loads(text)
        return cls(
            str(data["reason"]), str(data["by"]), int(data["at_ms"]), bool(data["delivered"])
        )
