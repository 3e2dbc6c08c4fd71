"""The cases service's closing rule in small, for the in-memory ``runplane.testing.Driver``
(the service's own is ``services.cases.decide``): refused while an obligation of the case is
OPEN or WARNED; closing a closed case is accepted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane.wire import CaseReply, CloseCase

__all__ = ["close_reply"]


def close_reply(
    command: CloseCase,
    obligations: Mapping[tuple[str, str], Mapping[str, Any]],
    closed_cases: set[str],
    cases: Mapping[str, tuple[Any, int]],
) -> CaseReply:
    """The reply to ``command``; a case it closes is added to ``closed_cases``."""
    still = sorted(
        name
        for (case_id, name), ob in obligations.items()
        if case_id == command.case_id and ob["status"] in ("OPEN", "WARNED")
    )
    reason = f"obligations still open: {', '.join(still)}" if still else None
    if reason is None:
        closed_cases.add(command.case_id)
    _, version = cases.get(command.case_id, (None, 0))
    return CaseReply(
        session_id=command.reply_to or "",
        request_id=command.request_id,
        case_id=command.case_id,
        era=command.era,
        call_seq=command.call_seq,
        op="close",
        accepted=reason is None,
        version=version,
        reason=reason,
    )
