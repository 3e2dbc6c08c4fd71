"""Values of operating a run from outside (a cancel request), kept in its snapshot as the
cancel's part of the run (``CANCEL``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Final

from runplane.core.canonical import canonical_json
from runplane.core.engine.table import Part
from runplane.wire import SessionSnapshot

__all__ = ["CANCEL", "CancelRequest"]


@dataclass(frozen=True)
class CancelRequest:
    """A cancel accepted by the run and not yet ended (``CANCEL``, its part of the run).

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


def _encode(request: CancelRequest | None) -> str:
    assert request is not None  # a part's encode never sees its default
    return request.to_json()


def _decode(text: str) -> CancelRequest | None:
    return CancelRequest.from_json(text)


def _read_old(snapshot: SessionSnapshot) -> CancelRequest | None:
    text = snapshot.cancel_json
    return CancelRequest.from_json(text) if text else None


def _write_old(request: CancelRequest | None) -> dict[str, Any]:
    return {"cancel_json": None if request is None else request.to_json()}


# The cancel's part: a cancel accepted and not yet ended, None without one.
CANCEL: Final[Part[CancelRequest | None]] = Part(
    "cancel", None, _encode, _decode, read_old=_read_old, write_old=_write_old
)
