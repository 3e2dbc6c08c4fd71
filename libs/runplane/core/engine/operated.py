"""Values of operating a run from outside (a cancel request), kept in its snapshot."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from runplane.core.canonical import canonical_json

__all__ = ["CancelRequest"]


@dataclass(frozen=True)
class CancelRequest:
    """A cancel accepted by the run and not yet ended (``cancel_json`` in the snapshot).

    ``told_era``: the era in which the agent was told (``RunCancelled`` recorded at a slot);
    None until then — the run is busy with something that must get its disposition first (a
    live call, a case command, an operator's verdict on a call in doubt) and the cancel is
    raised at the next effect the agent issues. Told once: a checkpointed restore re-executes
    from the checkpoint in a new era, where the side-effect log serves the recorded
    ``RunCancelled`` again at the same wait (signals, approvals, timers and tools cross eras),
    so the clean-up runs again from the same place and a call it left in doubt is resolved
    there."""

    reason: str
    by: str
    at_ms: int
    told_era: int | None = None

    def __post_init__(self) -> None:
        if not self.by.strip():
            raise ValueError("a cancel names who asked for it")
        if self.at_ms < 0:
            raise ValueError("CancelRequest.at_ms must be >= 0")

    def told(self, era: int) -> CancelRequest:
        return replace(self, told_era=era)

    def pending(self) -> bool:
        """Whether the agent has yet to be told."""
        return self.told_era is None

    def to_json(self) -> str:
        return canonical_json(
            {"reason": self.reason, "by": self.by, "at_ms": self.at_ms, "told_era": self.told_era}
        )

    @classmethod
    def from_json(cls, text: str) -> CancelRequest:
        data = json.loads(text)
        era = data.get("told_era")
        return cls(
            str(data["reason"]),
            str(data["by"]),
            int(data["at_ms"]),
            None if era is None else int(era),
        )
