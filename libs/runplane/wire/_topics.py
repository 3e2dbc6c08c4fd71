"""Which record types each logical topic carries (docs/contracts.md is the reference)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from runplane.errors import WireError
from runplane.wire._base import Record
from runplane.wire._records import (
    AdmissionClaim,
    AdmissionReply,
    AdmissionRequest,
    AuditRecord,
    BreachDeadline,
    CancelDeadline,
    CaseRecord,
    CaseReply,
    ClaimTask,
    CloseCase,
    CloseTask,
    DeadLetter,
    DecideTask,
    ExpireTask,
    GetCaseState,
    JournalRecord,
    MeetDeadline,
    OpenTask,
    PutCaseState,
    RefusedSignature,
    RegisterDeadline,
    ReleaseTask,
    ResultEntry,
    RunStatusUpdate,
    Schedule,
    ScheduleFired,
    SessionSnapshot,
    Signal,
    StartRun,
    StreamEvent,
    TaskDecision,
    TaskRecord,
    UpdateAnswer,
    Wake,
    WarnDeadline,
)

TOPIC_RECORDS: Mapping[str, tuple[type[Record], ...]] = MappingProxyType(
    {
        "admission": (AdmissionRequest, RunStatusUpdate),
        "admission.claims": (AdmissionClaim, RefusedSignature),
        "admission.replies": (AdmissionReply,),
        "runs.inbox": (StartRun, Signal, TaskDecision, CaseReply, Wake),
        "journal": (JournalRecord,),
        "results": (ResultEntry,),
        "sessions": (SessionSnapshot,),
        "runs.stream": (StreamEvent,),
        "runs.updates": (UpdateAnswer,),
        "cases.commands": (
            GetCaseState,
            PutCaseState,
            RegisterDeadline,
            MeetDeadline,
            CancelDeadline,
            WarnDeadline,
            BreachDeadline,
            CloseCase,
        ),
        "cases": (CaseRecord,),
        "schedules": (Schedule,),
        "schedules.fired": (ScheduleFired,),
        "tasks.commands": (OpenTask, ClaimTask, ReleaseTask, DecideTask, ExpireTask, CloseTask),
        "tasks": (TaskRecord,),
        "audit": (AuditRecord,),
        "deadletter": (DeadLetter,),
    }
)

# Longest first, so "p.cases.commands" resolves to cases.commands and not to cases.
_BY_LENGTH = sorted(TOPIC_RECORDS, key=len, reverse=True)


def logical_topic(topic: str) -> str:
    """The logical name of ``topic``, which may be logical or carry any prefix.

    ``runplane.journal`` and ``t_1a2b.journal`` both give ``journal``. Raises ``WireError``
    for a topic that carries no wire records.
    """
    if topic in TOPIC_RECORDS:
        return topic
    for name in _BY_LENGTH:
        if topic.endswith(name):
            return name
    raise WireError(f"topic {topic!r} carries no runplane wire records")


def check_allowed(topic: str, record: Record) -> None:
    """Raise ``WireError`` unless ``record``'s type may appear on ``topic``."""
    logical = logical_topic(topic)
    if not isinstance(record, TOPIC_RECORDS[logical]):
        allowed = ", ".join(c.__name__ for c in TOPIC_RECORDS[logical])
        raise WireError(f"{type(record).__name__} is not allowed on {logical} (only {allowed})")
