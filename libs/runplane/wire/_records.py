"""Wire types generated from ``schemas/*.avsc``. DO NOT EDIT.

Regenerate with ``python -m runplane.wire.codegen``; a unit test fails when this file is
stale. Invariants beyond the schema live in ``runplane.wire._validate``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar

from runplane.wire._base import Record, register
from runplane.wire._validate import TenantId

__all__ = [
    "AdmissionClaim",
    "AdmissionOutcome",
    "AdmissionReply",
    "AdmissionRequest",
    "AuditRecord",
    "BreachDeadline",
    "CancelDeadline",
    "CaseRecord",
    "CaseReply",
    "CatchUp",
    "ClaimTask",
    "CloseCase",
    "CloseTask",
    "Cost",
    "DeadLetter",
    "DecideTask",
    "DecisionOutcome",
    "ErrorInfo",
    "ExpireTask",
    "ExpiryPolicy",
    "GetCaseState",
    "JournalKind",
    "JournalRecord",
    "Label",
    "MeetDeadline",
    "Obligation",
    "ObligationStatus",
    "OpenTask",
    "ParkKind",
    "ParkedOn",
    "PutCaseState",
    "RefusedSignature",
    "RegisterDeadline",
    "ReleaseTask",
    "ResultEntry",
    "RunStatus",
    "RunStatusUpdate",
    "Schedule",
    "ScheduleFired",
    "Sensitivity",
    "SessionSnapshot",
    "Signal",
    "StartRun",
    "StreamEvent",
    "StreamKind",
    "TaskDecision",
    "TaskKind",
    "TaskRecord",
    "TaskStatus",
    "Trust",
    "UpdateAnswer",
    "Verdict",
    "Wake",
    "WarnDeadline",
]


class AdmissionOutcome(enum.StrEnum):
    """What admission decided. A reader meeting an outcome it does not know reads REFUSED: no run was admitted by this reply as far as it can tell; sending the request again with the same key is safe (an admitted key answers DUPLICATE)."""

    ADMITTED = "ADMITTED"
    DUPLICATE = "DUPLICATE"
    REFUSED = "REFUSED"


class CatchUp(enum.StrEnum):
    """What a schedule fires after downtime: SKIP the ticks older than the sweeper's grace, fire ONCE (the latest), or EACH (the latest catch_up_max). A reader meeting a rule it does not know reads SKIP: it fires no missed tick rather than guess how many."""

    SKIP = "SKIP"
    ONCE = "ONCE"
    EACH = "EACH"


class DecisionOutcome(enum.StrEnum):
    """How a task ended; RETRY/ABANDON are operator verdicts on an in-doubt call. A reader meeting an outcome it does not know reads REJECTED: an unknown decision never approves."""

    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    EXPIRED_PROCEEDED = "EXPIRED_PROCEEDED"
    EXPIRED_FAILED = "EXPIRED_FAILED"
    ESCALATED = "ESCALATED"
    RETRY = "RETRY"
    ABANDON = "ABANDON"


class ExpiryPolicy(enum.StrEnum):
    """What expiry does. A reader meeting a policy it does not know reads FAIL (fail closed: expiry never proceeds on a policy it cannot read)."""

    FAIL = "FAIL"
    PROCEED = "PROCEED"
    ESCALATE = "ESCALATE"


class JournalKind(enum.StrEnum):
    """The event a journal record states. OTHER is never written: a reader meeting a kind it does not know (added by a newer writer) reads OTHER."""

    RUN_ADMITTED = "RUN_ADMITTED"
    EFFECT_ANNOUNCED = "EFFECT_ANNOUNCED"
    EFFECT_RECORDED = "EFFECT_RECORDED"
    EFFECT_IN_DOUBT = "EFFECT_IN_DOUBT"
    SIGNAL_RECEIVED = "SIGNAL_RECEIVED"
    CHECKPOINT_REPORTED = "CHECKPOINT_REPORTED"
    TASK_OPENED = "TASK_OPENED"
    TASK_DECIDED = "TASK_DECIDED"
    CASE_WRITTEN = "CASE_WRITTEN"
    DEADLINE_REGISTERED = "DEADLINE_REGISTERED"
    DEADLINE_WARNED = "DEADLINE_WARNED"
    DEADLINE_BREACHED = "DEADLINE_BREACHED"
    RUN_PARKED = "RUN_PARKED"
    RUN_RESUMED = "RUN_RESUMED"
    RUN_RESTORED = "RUN_RESTORED"
    RUN_COMPLETED = "RUN_COMPLETED"
    RUN_FAILED = "RUN_FAILED"
    RUN_QUARANTINED = "RUN_QUARANTINED"
    RUN_CANCELLED = "RUN_CANCELLED"
    CANCEL_REQUESTED = "CANCEL_REQUESTED"
    RUN_ERASED = "RUN_ERASED"
    OTHER = "OTHER"


class ObligationStatus(enum.StrEnum):
    """Where an obligation is. A reader meeting a status it does not know reads OPEN: the obligation still binds."""

    OPEN = "OPEN"
    WARNED = "WARNED"
    MET = "MET"
    CANCELLED = "CANCELLED"
    BREACHED = "BREACHED"


class ParkKind(enum.StrEnum):
    """The kind of wait. A reader meeting a kind it does not know reads WAKE: the run waits to be woken."""

    SIGNAL = "SIGNAL"
    TASK = "TASK"
    CASE_REPLY = "CASE_REPLY"
    OPERATOR = "OPERATOR"
    WAKE = "WAKE"


class RunStatus(enum.StrEnum):
    """Where a run is. CANCELLED: an operator ended it (RUN_CANCELLED). A reader meeting a status it does not know (added by a newer writer) reads RUNNING: the run is past admission, in a state this reader cannot name."""

    ADMITTED = "ADMITTED"
    RUNNING = "RUNNING"
    AWAITING_HUMAN = "AWAITING_HUMAN"
    PARKED = "PARKED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    QUARANTINED = "QUARANTINED"
    CANCELLED = "CANCELLED"


class Sensitivity(enum.StrEnum):
    """Egress class of the payload. A reader meeting a sensitivity it does not know reads SECRET (fail closed: the strictest egress class)."""

    PUBLIC = "PUBLIC"
    INTERNAL = "INTERNAL"
    CONFIDENTIAL = "CONFIDENTIAL"
    SECRET = "SECRET"


class StreamKind(enum.StrEnum):
    """What happened. A reader meeting a kind it does not know (added by a newer writer) reads PROGRESS: an ephemeral note, shown and otherwise ignored."""

    TURN_STARTED = "TURN_STARTED"
    TEXT_DELTA = "TEXT_DELTA"
    TOOL_CALL_DELTA = "TOOL_CALL_DELTA"
    TOOL_CALL_PROPOSED = "TOOL_CALL_PROPOSED"
    TOOL_CALL_STARTED = "TOOL_CALL_STARTED"
    TOOL_CALL_FINISHED = "TOOL_CALL_FINISHED"
    TOOL_CALL_REFUSED = "TOOL_CALL_REFUSED"
    PARKED = "PARKED"
    RESUMED = "RESUMED"
    ENDED = "ENDED"
    PROGRESS = "PROGRESS"


class TaskKind(enum.StrEnum):
    """Approval or an operator verdict on an in-doubt call. A reader meeting a kind it does not know reads OPERATOR: a person looks at it."""

    APPROVAL = "APPROVAL"
    OPERATOR = "OPERATOR"


class TaskStatus(enum.StrEnum):
    """Where a task is. A reader meeting a status it does not know reads CLOSED: not actionable by this reader."""

    OPEN = "OPEN"
    CLAIMED = "CLAIMED"
    DECIDED = "DECIDED"
    EXPIRED = "EXPIRED"
    CLOSED = "CLOSED"


class Trust(enum.StrEnum):
    """Trusted or untrusted origin. A reader meeting a trust it does not know reads UNTRUSTED (fail closed)."""

    TRUSTED = "TRUSTED"
    UNTRUSTED = "UNTRUSTED"


class Verdict(enum.StrEnum):
    """The journal service's verdict on this record. A reader meeting a verdict it does not know reads BROKEN: fail closed, the record is not known to verify (re-verify the run with a current reader, runplane journal verify)."""

    VERIFIED = "VERIFIED"
    BROKEN = "BROKEN"
    BODY_MISSING = "BODY_MISSING"


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionClaim(Record):
    """The dedup table row (topic admission.claims, key claim_key(tenant, admission_key), partitioned by admission_key; rows written before per-tenant claims are keyed by admission_key alone)."""

    avro_name: ClassVar[str] = "runplane.v1.AdmissionClaim"

    admission_key: str
    run_id: str
    case_id: str | None = None
    capability: str
    tenant: TenantId
    status: RunStatus
    task_id: str | None = None
    admitted_ms: int
    updated_ms: int
    #: Journal seq of the status update last applied; a RunStatusUpdate with a seq not above it is stale.
    status_seq: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionReply(Record):
    """The answer to an AdmissionRequest (topic admission.replies, key admission_key)."""

    avro_name: ClassVar[str] = "runplane.v1.AdmissionReply"

    admission_key: str
    outcome: AdmissionOutcome
    run_id: str | None = None
    case_id: str | None = None
    status: RunStatus | None = None
    task_id: str | None = None
    #: Why a request was refused.
    reason: str | None = None
    replied_ms: int
    #: The tenant of the request answered: a client waiting on a key takes only its own tenant's reply (two tenants may use one key). Null from admission versions that predate per-tenant claims.
    tenant: TenantId | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionRequest(Record):
    """An emitter asks for a run (topic admission, key admission_key)."""

    avro_name: ClassVar[str] = "runplane.v1.AdmissionRequest"

    #: The emitter's idempotency key: one key, at most one run, ever (1..256 bytes).
    admission_key: str
    capability: str
    #: The run's input as JSON text.
    input_json: str
    #: Business keys, e.g. {dispute: D-17}; resolve to the case deterministically.
    correlation_keys: dict[str, str] = field(default_factory=dict)
    tenant: TenantId
    #: Who the run acts for; four-eyes refuses this principal on the run's tasks.
    initiator: str
    requested_ms: int = 0
    #: Pin the run to this agent version (or the newest of its line: '1' admits on '1.2'); null starts it on the newest deployed version.
    agent_version: str | None = None
    #: The commissioning run's Delegation (runplane.core.plan, canonical JSON {chain: [scope, ...]}) the child runs under: its sinks, the capabilities it may commission further, its expiry and audience. Null: no delegation (the run is bounded by policy alone).
    delegation_json: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord(Record):
    """PUBLIC CONTRACT v1: one verified journal record, body-free (topic audit, key session_id). See schemas/README.md."""

    avro_name: ClassVar[str] = "runplane.v1.AuditRecord"

    schema_version: int = 1
    session_id: str
    seq: int
    era: int
    kind: JournalKind
    call_seq: int | None = None
    family: str | None = None
    name: str | None = None
    stamp_ms: int
    label: Label
    cost: Cost | None = None
    attrs: dict[str, str] = field(default_factory=dict)
    hash: str
    verdict: Verdict
    broken_at_seq: int | None = None
    reason: str | None = None
    capability: str | None = None
    case_id: str | None = None
    verified_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BreachDeadline(Record):
    """The sweeper decided a breach (sweep run sweep_run_id)."""

    avro_name: ClassVar[str] = "runplane.v1.BreachDeadline"

    case_id: str
    #: Idempotency: the asking run's session/era/call_seq, or the sweeper's decision key.
    request_id: str
    #: Session id whose inbox gets the CaseReply; null for fire-and-forget.
    reply_to: str | None = None
    era: int = 0
    call_seq: int | None = None
    name: str
    due_ms: int
    sweep_run_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelDeadline(Record):
    """An obligation no longer applies."""

    avro_name: ClassVar[str] = "runplane.v1.CancelDeadline"

    case_id: str
    #: Idempotency: the asking run's session/era/call_seq, or the sweeper's decision key.
    request_id: str
    #: Session id whose inbox gets the CaseReply; null for fire-and-forget.
    reply_to: str | None = None
    era: int = 0
    call_seq: int | None = None
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseRecord(Record):
    """A case's versioned state and obligations (topic cases, key case_id)."""

    avro_name: ClassVar[str] = "runplane.v1.CaseRecord"

    case_id: str
    version: int
    state_json: str
    obligations: tuple[Obligation, ...] = ()
    closed: bool = False
    correlation_keys: dict[str, str] = field(default_factory=dict)
    updated_ms: int
    #: Recent request ids already applied (idempotency window).
    applied: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseReply(Record):
    """The cases service answers a run's case command (topic runs.inbox)."""

    avro_name: ClassVar[str] = "runplane.v1.CaseReply"

    session_id: str
    request_id: str
    case_id: str
    era: int
    call_seq: int | None = None
    #: get_state, put_state, register_deadline, meet_deadline, cancel_deadline, close.
    op: str
    accepted: bool
    state_json: str | None = None
    version: int
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimTask(Record):
    """A principal claims a task."""

    avro_name: ClassVar[str] = "runplane.v1.ClaimTask"

    task_id: str
    #: Set by the worklist from the authenticated token, never from a request body.
    principal: str
    at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseCase(Record):
    """Close a case; refused while any obligation is open."""

    avro_name: ClassVar[str] = "runplane.v1.CloseCase"

    case_id: str
    #: Idempotency: the asking run's session/era/call_seq, or the sweeper's decision key.
    request_id: str
    #: Session id whose inbox gets the CaseReply; null for fire-and-forget.
    reply_to: str | None = None
    era: int = 0
    call_seq: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseTask(Record):
    """The task's run ended; close the task."""

    avro_name: ClassVar[str] = "runplane.v1.CloseTask"

    task_id: str
    reason: str
    at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost(Record):
    """What an effect cost: tokens for generations, abstract units for anything billed."""

    avro_name: ClassVar[str] = "runplane.v1.Cost"

    tokens_in: int = 0
    tokens_out: int = 0
    units: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter(Record):
    """Something that could not be decoded or validated (topic deadletter, key = original key)."""

    avro_name: ClassVar[str] = "runplane.v1.DeadLetter"

    source_topic: str
    partition: int
    offset: int
    service: str
    reason: str
    key: bytes | None = None
    value: bytes | None = None
    at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DecideTask(Record):
    """A principal decides a task. An approval is decided by approve (with verdict null); an operator task (an in-doubt mutating call) by verdict: RETRY (it did not happen, perform it again), ABANDON (give up, record it failed) or APPROVED (it happened; comment = the observed result as JSON)."""

    avro_name: ClassVar[str] = "runplane.v1.DecideTask"

    task_id: str
    #: Set by the worklist from the authenticated token, never from a request body.
    principal: str
    at_ms: int
    approve: bool
    comment: str = ''
    #: The operator's verdict on an OPERATOR task: RETRY, ABANDON or APPROVED (it happened). Null for approvals; added with a default so older records read as null.
    verdict: DecisionOutcome | None = None
    #: An approval of a proposed call with some arguments changed: a JSON object, argument name to the value the decider sets. Only on a task with editable arguments, only those; null for every other decision.
    edits_json: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorInfo(Record):
    """A recorded failure; replays re-raise exactly this."""

    avro_name: ClassVar[str] = "runplane.v1.ErrorInfo"

    #: Error class name, e.g. ToolError.
    type: str
    message: str
    retryable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireTask(Record):
    """A task passed its expiry."""

    avro_name: ClassVar[str] = "runplane.v1.ExpireTask"

    task_id: str
    at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GetCaseState(Record):
    """Read a case's state and version (topic cases.commands, key case_id)."""

    avro_name: ClassVar[str] = "runplane.v1.GetCaseState"

    case_id: str
    #: Idempotency: the asking run's session/era/call_seq, or the sweeper's decision key.
    request_id: str
    #: Session id whose inbox gets the CaseReply; null for fire-and-forget.
    reply_to: str | None = None
    era: int = 0
    call_seq: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalRecord(Record):
    """One event of a run's hash-chained, body-free event chain (topic journal, key session_id)."""

    avro_name: ClassVar[str] = "runplane.v1.JournalRecord"

    session_id: str
    #: Contiguous from 0 per session.
    seq: int
    era: int
    kind: JournalKind
    #: Position of the effect call inside the era, where the record belongs to a call.
    call_seq: int | None = None
    #: Effect family: generation, tool, clock, random, observe, signal, checkpoint, approval, case, deadline, probe.
    family: str | None = None
    #: Effect name, e.g. model:openai/gpt-4o, tool://billing/charge.
    name: str | None = None
    #: Hex SHA-256 of the canonical request body.
    request_witness: str | None = None
    #: Hex SHA-256 of the canonical result body held in results.
    body_digest: str | None = None
    #: Platform timestamp (ms since epoch) this record was minted at.
    stamp_ms: int
    label: Label
    cost: Cost | None = None
    #: Small body-free facts: capability, case_id, tenant, initiator, admission_key, reason, parked_on, task_id, kind=sweep, ...
    attrs: dict[str, str] = field(default_factory=dict)
    #: Hex hash of the previous record; 64 zeros for seq 0.
    prev_hash: str
    #: Hex SHA-256(prev_hash bytes || canonical(record without hash)).
    hash: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Label(Record):
    """Trust, sensitivity and provenance carried by every payload."""

    avro_name: ClassVar[str] = "runplane.v1.Label"

    trust: Trust
    sensitivity: Sensitivity
    #: Concrete origins, e.g. tool://billing/charge, model:openai/gpt-4o, agent/refund; sorted, unique.
    provenance: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MeetDeadline(Record):
    """Discharge an obligation."""

    avro_name: ClassVar[str] = "runplane.v1.MeetDeadline"

    case_id: str
    #: Idempotency: the asking run's session/era/call_seq, or the sweeper's decision key.
    request_id: str
    #: Session id whose inbox gets the CaseReply; null for fire-and-forget.
    reply_to: str | None = None
    era: int = 0
    call_seq: int | None = None
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Obligation(Record):
    """A named deadline attached to a case."""

    avro_name: ClassVar[str] = "runplane.v1.Obligation"

    name: str
    due_ms: int
    warn_ms: int | None = None
    calendar: str
    calendar_digest: str
    rule_json: str
    on_breach: str | None = None
    status: ObligationStatus
    sweep_run_id: str | None = None
    #: Session that registered it.
    registered_by: str
    updated_ms: int
    #: The role that owns the obligation: its warning opens a worklist task for this role (null: the cases service's default warning role).
    owner_role: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenTask(Record):
    """Open a human task (topic tasks.commands, key task_id)."""

    avro_name: ClassVar[str] = "runplane.v1.OpenTask"

    task_id: str
    session_id: str
    era: int
    call_seq: int | None = None
    kind: TaskKind
    question: str
    #: The run's actual proposed answer.
    answer_json: str
    case_id: str | None = None
    capability: str
    role: str
    approvals: int = 1
    initiator: str
    expires_ms: int | None = None
    on_expiry: ExpiryPolicy
    allow_unattended: bool = False
    escalate_to: str | None = None
    opened_ms: int
    #: The run's tenant: only principals of this tenant see and decide the task. Null from writers older than this field (read as the tenant default).
    tenant: TenantId | None = None
    #: The W3C traceparent of the run's step that opened the task (runplane.tracing), so the decision joins the run's trace. Null when untraced.
    trace_parent: str | None = None
    #: A call approval (ctx.approve_call): the arguments of the proposed call a decider may edit (answer_json shows the call). Empty for every other task: no edit is taken.
    editable: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ParkedOn(Record):
    """What a run waits for."""

    avro_name: ClassVar[str] = "runplane.v1.ParkedOn"

    kind: ParkKind
    #: Signal name, task id, case request id.
    ref: str
    call_seq: int | None = None
    era: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PutCaseState(Record):
    """Write a case's state if it is still at expected_version."""

    avro_name: ClassVar[str] = "runplane.v1.PutCaseState"

    case_id: str
    #: Idempotency: the asking run's session/era/call_seq, or the sweeper's decision key.
    request_id: str
    #: Session id whose inbox gets the CaseReply; null for fire-and-forget.
    reply_to: str | None = None
    era: int = 0
    call_seq: int | None = None
    expected_version: int
    state_json: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RefusedSignature(Record):
    """A signed admission request admission refused: its signature stays refused for the replay window, so the same bytes produced again are refused again (topic admission.claims, key runplane.refused/<signature_sha256>, partitioned by admission_key; tombstoned once the window has passed)."""

    avro_name: ClassVar[str] = "runplane.v1.RefusedSignature"

    admission_key: str
    #: Lowercase hex SHA-256 of the runplane-signature header.
    signature_sha256: str
    #: The runplane-signed-ms of the request (or the refusal's time when unreadable): the window runs from it.
    signed_ms: int
    refused_ms: int
    #: Why it was refused (admission's refusal code).
    code: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterDeadline(Record):
    """Attach an obligation to a case."""

    avro_name: ClassVar[str] = "runplane.v1.RegisterDeadline"

    case_id: str
    #: Idempotency: the asking run's session/era/call_seq, or the sweeper's decision key.
    request_id: str
    #: Session id whose inbox gets the CaseReply; null for fire-and-forget.
    reply_to: str | None = None
    era: int = 0
    call_seq: int | None = None
    name: str
    due_ms: int
    warn_ms: int | None = None
    calendar: str
    calendar_digest: str
    #: The rule resolved, e.g. {"days": 1}.
    rule_json: str
    #: Capability of the follow-up run.
    on_breach: str | None = None
    #: The registering run's tenant: the case's (admission binds case ids to tenants). The breach follow-up run is admitted for it; null from writers older than this field.
    tenant: TenantId | None = None
    #: The role that owns the obligation: its warning opens a worklist task for this role (null: the cases service's default warning role).
    owner_role: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseTask(Record):
    """A principal releases its claim."""

    avro_name: ClassVar[str] = "runplane.v1.ReleaseTask"

    task_id: str
    #: Set by the worklist from the authenticated token, never from a request body.
    principal: str
    at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultEntry(Record):
    """One call's result, with body (topic results, key session/era/call_seq, partitioned by session)."""

    avro_name: ClassVar[str] = "runplane.v1.ResultEntry"

    session_id: str
    era: int
    call_seq: int
    family: str
    name: str
    request_witness: str
    ok: bool
    #: Canonical JSON of the returned value when ok.
    value_json: str | None = None
    error: ErrorInfo | None = None
    stamp_ms: int
    attempts: int = 1
    #: Hex SHA-256 of the canonical body {ok, value, error}.
    body_digest: str
    label: Label


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStatusUpdate(Record):
    """The executor tells admission where a run is, so duplicates are answered with it (topic admission, key admission_key)."""

    avro_name: ClassVar[str] = "runplane.v1.RunStatusUpdate"

    admission_key: str
    run_id: str
    status: RunStatus
    task_id: str | None = None
    updated_ms: int
    #: Journal seq of the record that set this status (orders updates; wall clocks of two owners do not). Null from writers that predate it.
    seq: int | None = None
    #: The run's tenant: admission finds the claim by (tenant, admission key). Null from writers that predate per-tenant claims (the claim written under the admission key alone is then the one updated).
    tenant: TenantId | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule(Record):
    """A schedule: start a run of a capability on a timetable (topic schedules, key tenant/name; a tombstone deletes it). Written by operators (runplane schedules); read by the sweeper."""

    avro_name: ClassVar[str] = "runplane.v1.Schedule"

    #: The tenant every tick's run is admitted for.
    tenant: TenantId
    #: Unique within the tenant: 1 to 63 of a-z 0-9 . _ -.
    name: str
    capability: str
    #: Every tick's run input, as JSON text.
    input_json: str
    #: Who the runs act for (the principal that created the schedule).
    initiator: str
    #: Five-field cron expression read in tz; null for an interval.
    cron: str | None = None
    #: IANA time zone of the cron expression.
    tz: str = 'UTC'
    #: Plain interval: ticks at anchor_ms + k * every_ms; null for cron.
    every_ms: int | None = None
    #: Where an interval's ticks are counted from (the creation instant).
    anchor_ms: int = 0
    #: What fires after downtime.
    catch_up: CatchUp = CatchUp.SKIP
    #: EACH: at most this many missed ticks are fired (the latest).
    catch_up_max: int = 1
    #: A paused schedule fires nothing; its ticks meanwhile are skipped.
    paused: bool = False
    #: Only ticks after this instant fire (set on creation and on resume).
    since_ms: int
    created_ms: int
    updated_ms: int
    #: Who wrote this version (create, pause, resume).
    updated_by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleFired(Record):
    """How far the sweeper has fired a schedule, and how its ticks were answered (topic schedules.fired, key tenant/name, co-partitioned with schedules). The sweeper owning the partition is its single writer."""

    avro_name: ClassVar[str] = "runplane.v1.ScheduleFired"

    tenant: TenantId
    name: str
    #: The latest tick behind the schedule, fired or skipped: the next fires after it.
    through_ms: int
    #: Ticks sent to admission so far.
    fired: int = 0
    #: Ticks passed over by the catch-up rule or a pause.
    skipped: int = 0
    #: The last tick sent to admission.
    last_tick_ms: int | None = None
    #: How admission answered the latest answered tick: ADMITTED, DUPLICATE or REFUSED.
    last_outcome: str | None = None
    #: The tick last_outcome answers.
    last_outcome_tick_ms: int | None = None
    #: The run of the latest admitted (or duplicate) tick.
    last_run_id: str | None = None
    #: Ticks admission refused.
    refused: int = 0
    #: Why admission refused the latest refused tick.
    last_refusal: str | None = None
    last_refused_tick_ms: int | None = None
    updated_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSnapshot(Record):
    """The executor's compacted view of one session (topic sessions, key session_id)."""

    avro_name: ClassVar[str] = "runplane.v1.SessionSnapshot"

    session_id: str
    capability: str
    status: RunStatus
    era: int
    next_seq: int
    last_hash: str
    parked_on: ParkedOn | None = None
    case_id: str | None = None
    admission_key: str
    tenant: TenantId
    initiator: str
    input_json: str
    #: Last reported checkpoint state (checkpointed runs).
    checkpoint_json: str | None = None
    output_json: str | None = None
    error: ErrorInfo | None = None
    started_ms: int
    updated_ms: int
    #: The announced call with no recorded outcome, as canonical JSON {era, call_seq, family, name, witness, recovery}: what a restore finds in doubt.
    in_flight_json: str | None = None
    #: Signals delivered before the run waited for them, in delivery order.
    pending_signals: tuple[Signal, ...] = ()
    #: Stamp that opened the current era (the logical clock before its first call); 0 = started_ms.
    era_started_ms: int = 0
    #: The request the run waits an answer for (an approval task or a case command), as canonical JSON {kind, ref, era, call_seq, family, name, witness, value}: kept across a checkpointed restore so the new era adopts it instead of asking again.
    open_request_json: str | None = None
    #: Announced calls from earlier eras whose outcome is still unknown (checkpointed runs), as a canonical JSON list of {era, call_seq, family, name, witness, recovery, origin}: every later restore runs each one's declared recovery before the same call can be performed live again. Null = none.
    doubts_json: str | None = None
    #: The journaled instant a durable timer (ctx.sleep, or a wait's timeout) wakes the run; the executor owning the partition delivers a Wake at or after it. Null = no timer.
    wake_at_ms: int | None = None
    #: Ids of the signals already accepted by the run (the most recent ones, bounded), so a redelivered signal is not delivered twice.
    signal_ids: tuple[str, ...] = ()
    #: A cancel request accepted and not yet ended, as canonical JSON {reason, by, at_ms, delivered}: the run ends RUN_CANCELLED once the agent has observed it and finished its clean-up.
    cancel_json: str | None = None
    #: The agent version serving the run (runplane.core.versions): a run continues on the newest deployed version of its line. Null: unversioned, or a writer older than this field.
    agent_version: str | None = None
    #: Set while no deployed version of the run's line can serve it (runplane.core.versions): canonical JSON {version, status, wake_at_ms} - the version it waits for and the status and timer it had, given back when an executor hosting its line takes it. The run is PARKED meanwhile (RUN_PARKED parked_on version:<v> journaled). Null = not stranded.
    stranded_json: str | None = None
    #: Inbox records for the run that arrived while it was stranded, in arrival order, as a canonical JSON list of {topic, partition, offset, key, value, at_ms, reason} (key and value base64): served in that order, before anything newer, once a version of its line is deployed; never dead-lettered. Null = none.
    held_json: str | None = None
    #: The Delegation the run runs under (from its StartRun), kept so a rebuilt run stays bounded by it. Null: none.
    delegation_json: str | None = None
    #: Each effect family's own part of the run's state, by part name (the family's registry row says how its value is written and read): text a newer writer adds while it still writes the older fields above (wake_at_ms, signal_ids, cancel_json) for older readers. A reader takes a part from here first, from the older fields when it is absent. Absent = the part's default.
    parts: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Signal(Record):
    """An external event for a run (topic runs.inbox)."""

    avro_name: ClassVar[str] = "runplane.v1.Signal"

    session_id: str
    name: str
    payload_json: str
    sent_ms: int
    #: The sender's idempotency id: a second signal with the same id for the run is not delivered again. Null = no deduplication (older senders).
    signal_id: str | None = None
    #: The authenticated principal that sent it (from the credential, never the body); journaled with the signal.
    sent_by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRun(Record):
    """Start a run (topic runs.inbox, key session_id)."""

    avro_name: ClassVar[str] = "runplane.v1.StartRun"

    session_id: str
    capability: str
    input_json: str
    case_id: str | None = None
    admission_key: str
    tenant: TenantId
    initiator: str
    #: Hash of the RunAdmitted record (seq 0): the chain's handover.
    admitted_hash: str
    admitted_ms: int
    #: The emitter's version pin (the executor starts the run on the newest deployed version of that line); null: the newest version the executor hosts (or an unversioned agent, or a writer older than this field).
    agent_version: str | None = None
    #: The Delegation the run runs under (see AdmissionRequest.delegation_json), also in seq 0's attrs (delegation). Null: none.
    delegation_json: str | None = None
    #: The label the run's input carries when it is more than the admission input's (canonical JSON of a Label): a successor's (continue-as-new) is the join of everything its predecessor had read, so a conversation carried across does not come back trusted. Also in seq 0's attrs (input_label). Null: the admission input's label.
    input_label_json: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEvent(Record):
    """One event of a run's live stream (topic runs.stream): a view for people and clients watching, produced as it happens, best effort, never the truth (the journal is)."""

    avro_name: ClassVar[str] = "runplane.v1.StreamEvent"

    session_id: str
    era: int
    #: The slot's call_seq within the era; -1 for an event of no call (progress, parked, ended).
    call_seq: int
    #: Which attempt at the slot: the ms its executor began it, strictly increasing per executor; a new value for the same slot is a restart (a retry, or another executor after a crash), whose events supersede the earlier attempt's.
    attempt: int
    #: The event's place among its attempt's events, from 0: a gap is an event lost.
    seq: int
    kind: StreamKind
    #: The kind's facts as a JSON object (a text delta's text, a call's id, name, arguments).
    payload_json: str
    stamp_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskDecision(Record):
    """A human (or expiry) decided a task (topic runs.inbox)."""

    avro_name: ClassVar[str] = "runplane.v1.TaskDecision"

    session_id: str
    task_id: str
    era: int
    call_seq: int | None = None
    outcome: DecisionOutcome
    comment: str = ''
    #: Principals from authenticated requests; empty for unattended expiry.
    decided_by: tuple[str, ...] = ()
    decided_ms: int
    #: An APPROVED call approval with arguments changed by decided_by: a JSON object, argument name to the value set. The run records it as that person's release of exactly those fields. Null otherwise.
    edits_json: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRecord(Record):
    """A human task (topic tasks, key task_id)."""

    avro_name: ClassVar[str] = "runplane.v1.TaskRecord"

    task: OpenTask
    status: TaskStatus
    claimed_by: str | None = None
    approved_by: tuple[str, ...] = ()
    outcome: DecisionOutcome | None = None
    comment: str = ''
    updated_ms: int
    #: How the last claim was taken back without a decision, for the record: its lease lapsed (the worklist's tick) or a supervisor released it. null until that happens.
    claim_note: str | None = None
    #: The arguments the decider changed when approving a proposed call (DecideTask.edits_json), so a decision sent again carries them. Null otherwise.
    edits_json: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateAnswer(Record):
    """A run's answer to an update (topic runs.updates, key update_id): the handler's answer, or why the update was refused. Written by the executor in the step that decided it; a refused update leaves no journal record, only this answer."""

    avro_name: ClassVar[str] = "runplane.v1.UpdateAnswer"

    session_id: str
    #: The caller's idempotency id: the run answers one update per id, and an id delivered again is answered with the first answer.
    update_id: str
    #: The update's name (the agent's declared handler).
    name: str
    #: The agent's answer (canonical JSON); null when refused.
    answer_json: str | None = None
    #: Why the update was refused, as a code (invalid: its validator refused it; unknown_update: the agent declares no such update; too_large: over the run's signal limit; signals_full: the run buffers no more; ended: the run ended before answering it); null when answered.
    refused: str | None = None
    #: The refusal, in words (the validator's reason).
    reason: str | None = None
    answered_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Wake(Record):
    """Wake a parked or evicted run (topic runs.inbox)."""

    avro_name: ClassVar[str] = "runplane.v1.Wake"

    session_id: str
    reason: str
    sent_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class WarnDeadline(Record):
    """The sweeper saw an obligation pass warn time."""

    avro_name: ClassVar[str] = "runplane.v1.WarnDeadline"

    case_id: str
    #: Idempotency: the asking run's session/era/call_seq, or the sweeper's decision key.
    request_id: str
    #: Session id whose inbox gets the CaseReply; null for fire-and-forget.
    reply_to: str | None = None
    era: int = 0
    call_seq: int | None = None
    name: str
    due_ms: int


# Each named record's schema with every referenced type inlined (what is fingerprinted
# and registered); each parses on its own.
SCHEMAS: dict[str, str] = {
    'runplane.v1.AdmissionClaim': '{"type":"record","name":"AdmissionClaim","namespace":"runplane.v1","doc":"The dedup table row (topic admission.claims, key claim_key(tenant, admission_key), partitioned by admission_key; rows written before per-tenant claims are keyed by admission_key alone).","fields":[{"name":"admission_key","type":"string"},{"name":"run_id","type":"string"},{"name":"case_id","type":["null","string"],"default":null},{"name":"capability","type":"string"},{"name":"tenant","type":"string"},{"name":"status","type":{"type":"enum","name":"RunStatus","namespace":"runplane.v1","doc":"Where a run is. CANCELLED: an operator ended it (RUN_CANCELLED). A reader meeting a status it does not know (added by a newer writer) reads RUNNING: the run is past admission, in a state this reader cannot name.","default":"RUNNING","symbols":["ADMITTED","RUNNING","AWAITING_HUMAN","PARKED","COMPLETED","FAILED","QUARANTINED","CANCELLED"]}},{"name":"task_id","type":["null","string"],"default":null},{"name":"admitted_ms","type":"long"},{"name":"updated_ms","type":"long"},{"name":"status_seq","type":["null","long"],"default":null,"doc":"Journal seq of the status update last applied; a RunStatusUpdate with a seq not above it is stale."}]}',
    'runplane.v1.AdmissionReply': '{"type":"record","name":"AdmissionReply","namespace":"runplane.v1","doc":"The answer to an AdmissionRequest (topic admission.replies, key admission_key).","fields":[{"name":"admission_key","type":"string"},{"name":"outcome","type":{"type":"enum","name":"AdmissionOutcome","namespace":"runplane.v1","doc":"What admission decided. A reader meeting an outcome it does not know reads REFUSED: no run was admitted by this reply as far as it can tell; sending the request again with the same key is safe (an admitted key answers DUPLICATE).","default":"REFUSED","symbols":["ADMITTED","DUPLICATE","REFUSED"]}},{"name":"run_id","type":["null","string"],"default":null},{"name":"case_id","type":["null","string"],"default":null},{"name":"status","type":["null",{"type":"enum","name":"RunStatus","namespace":"runplane.v1","doc":"Where a run is. CANCELLED: an operator ended it (RUN_CANCELLED). A reader meeting a status it does not know (added by a newer writer) reads RUNNING: the run is past admission, in a state this reader cannot name.","default":"RUNNING","symbols":["ADMITTED","RUNNING","AWAITING_HUMAN","PARKED","COMPLETED","FAILED","QUARANTINED","CANCELLED"]}],"default":null},{"name":"task_id","type":["null","string"],"default":null},{"name":"reason","type":["null","string"],"default":null,"doc":"Why a request was refused."},{"name":"replied_ms","type":"long"},{"name":"tenant","type":["null","string"],"default":null,"doc":"The tenant of the request answered: a client waiting on a key takes only its own tenant\'s reply (two tenants may use one key). Null from admission versions that predate per-tenant claims."}]}',
    'runplane.v1.AdmissionRequest': '{"type":"record","name":"AdmissionRequest","namespace":"runplane.v1","doc":"An emitter asks for a run (topic admission, key admission_key).","fields":[{"name":"admission_key","type":"string","doc":"The emitter\'s idempotency key: one key, at most one run, ever (1..256 bytes)."},{"name":"capability","type":"string"},{"name":"input_json","type":"string","doc":"The run\'s input as JSON text."},{"name":"correlation_keys","type":{"type":"map","values":"string"},"default":{},"doc":"Business keys, e.g. {dispute: D-17}; resolve to the case deterministically."},{"name":"tenant","type":"string"},{"name":"initiator","type":"string","doc":"Who the run acts for; four-eyes refuses this principal on the run\'s tasks."},{"name":"requested_ms","type":"long","default":0},{"name":"agent_version","type":["null","string"],"default":null,"doc":"Pin the run to this agent version (or the newest of its line: \'1\' admits on \'1.2\'); null starts it on the newest deployed version."},{"name":"delegation_json","type":["null","string"],"default":null,"doc":"The commissioning run\'s Delegation (runplane.core.plan, canonical JSON {chain: [scope, ...]}) the child runs under: its sinks, the capabilities it may commission further, its expiry and audience. Null: no delegation (the run is bounded by policy alone)."}]}',
    'runplane.v1.AuditRecord': '{"type":"record","name":"AuditRecord","namespace":"runplane.v1","doc":"PUBLIC CONTRACT v1: one verified journal record, body-free (topic audit, key session_id). See schemas/README.md.","fields":[{"name":"schema_version","type":"int","default":1},{"name":"session_id","type":"string"},{"name":"seq","type":"long"},{"name":"era","type":"int"},{"name":"kind","type":{"type":"enum","name":"JournalKind","namespace":"runplane.v1","doc":"The event a journal record states. OTHER is never written: a reader meeting a kind it does not know (added by a newer writer) reads OTHER.","default":"OTHER","symbols":["RUN_ADMITTED","EFFECT_ANNOUNCED","EFFECT_RECORDED","EFFECT_IN_DOUBT","SIGNAL_RECEIVED","CHECKPOINT_REPORTED","TASK_OPENED","TASK_DECIDED","CASE_WRITTEN","DEADLINE_REGISTERED","DEADLINE_WARNED","DEADLINE_BREACHED","RUN_PARKED","RUN_RESUMED","RUN_RESTORED","RUN_COMPLETED","RUN_FAILED","RUN_QUARANTINED","RUN_CANCELLED","CANCEL_REQUESTED","RUN_ERASED","OTHER"]}},{"name":"call_seq","type":["null","long"],"default":null},{"name":"family","type":["null","string"],"default":null},{"name":"name","type":["null","string"],"default":null},{"name":"stamp_ms","type":"long"},{"name":"label","type":{"type":"record","name":"Label","namespace":"runplane.v1","doc":"Trust, sensitivity and provenance carried by every payload.","fields":[{"name":"trust","type":{"type":"enum","name":"Trust","namespace":"runplane.v1","doc":"Trusted or untrusted origin. A reader meeting a trust it does not know reads UNTRUSTED (fail closed).","default":"UNTRUSTED","symbols":["TRUSTED","UNTRUSTED"]}},{"name":"sensitivity","type":{"type":"enum","name":"Sensitivity","namespace":"runplane.v1","doc":"Egress class of the payload. A reader meeting a sensitivity it does not know reads SECRET (fail closed: the strictest egress class).","default":"SECRET","symbols":["PUBLIC","INTERNAL","CONFIDENTIAL","SECRET"]}},{"name":"provenance","type":{"type":"array","items":"string"},"doc":"Concrete origins, e.g. tool://billing/charge, model:openai/gpt-4o, agent/refund; sorted, unique."}]}},{"name":"cost","type":["null",{"type":"record","name":"Cost","namespace":"runplane.v1","doc":"What an effect cost: tokens for generations, abstract units for anything billed.","fields":[{"name":"tokens_in","type":"long","default":0},{"name":"tokens_out","type":"long","default":0},{"name":"units","type":"double","default":0.0}]}],"default":null},{"name":"attrs","type":{"type":"map","values":"string"},"default":{}},{"name":"hash","type":"string"},{"name":"verdict","type":{"type":"enum","name":"Verdict","namespace":"runplane.v1","doc":"The journal service\'s verdict on this record. A reader meeting a verdict it does not know reads BROKEN: fail closed, the record is not known to verify (re-verify the run with a current reader, runplane journal verify).","default":"BROKEN","symbols":["VERIFIED","BROKEN","BODY_MISSING"]}},{"name":"broken_at_seq","type":["null","long"],"default":null},{"name":"reason","type":["null","string"],"default":null},{"name":"capability","type":["null","string"],"default":null},{"name":"case_id","type":["null","string"],"default":null},{"name":"verified_ms","type":"long"}]}',
    'runplane.v1.BreachDeadline': '{"type":"record","name":"BreachDeadline","namespace":"runplane.v1","doc":"The sweeper decided a breach (sweep run sweep_run_id).","fields":[{"name":"case_id","type":"string"},{"name":"request_id","type":"string","doc":"Idempotency: the asking run\'s session/era/call_seq, or the sweeper\'s decision key."},{"name":"reply_to","type":["null","string"],"default":null,"doc":"Session id whose inbox gets the CaseReply; null for fire-and-forget."},{"name":"era","type":"int","default":0},{"name":"call_seq","type":["null","long"],"default":null},{"name":"name","type":"string"},{"name":"due_ms","type":"long"},{"name":"sweep_run_id","type":"string"}]}',
    'runplane.v1.CancelDeadline': '{"type":"record","name":"CancelDeadline","namespace":"runplane.v1","doc":"An obligation no longer applies.","fields":[{"name":"case_id","type":"string"},{"name":"request_id","type":"string","doc":"Idempotency: the asking run\'s session/era/call_seq, or the sweeper\'s decision key."},{"name":"reply_to","type":["null","string"],"default":null,"doc":"Session id whose inbox gets the CaseReply; null for fire-and-forget."},{"name":"era","type":"int","default":0},{"name":"call_seq","type":["null","long"],"default":null},{"name":"name","type":"string"}]}',
    'runplane.v1.CaseRecord': '{"type":"record","name":"CaseRecord","namespace":"runplane.v1","doc":"A case\'s versioned state and obligations (topic cases, key case_id).","fields":[{"name":"case_id","type":"string"},{"name":"version","type":"long"},{"name":"state_json","type":"string"},{"name":"obligations","type":{"type":"array","items":{"type":"record","name":"Obligation","namespace":"runplane.v1","doc":"A named deadline attached to a case.","fields":[{"name":"name","type":"string"},{"name":"due_ms","type":"long"},{"name":"warn_ms","type":["null","long"],"default":null},{"name":"calendar","type":"string"},{"name":"calendar_digest","type":"string"},{"name":"rule_json","type":"string"},{"name":"on_breach","type":["null","string"],"default":null},{"name":"status","type":{"type":"enum","name":"ObligationStatus","namespace":"runplane.v1","doc":"Where an obligation is. A reader meeting a status it does not know reads OPEN: the obligation still binds.","default":"OPEN","symbols":["OPEN","WARNED","MET","CANCELLED","BREACHED"]}},{"name":"sweep_run_id","type":["null","string"],"default":null},{"name":"registered_by","type":"string","doc":"Session that registered it."},{"name":"updated_ms","type":"long"},{"name":"owner_role","type":["null","string"],"default":null,"doc":"The role that owns the obligation: its warning opens a worklist task for this role (null: the cases service\'s default warning role)."}]}},"default":[]},{"name":"closed","type":"boolean","default":false},{"name":"correlation_keys","type":{"type":"map","values":"string"},"default":{}},{"name":"updated_ms","type":"long"},{"name":"applied","type":{"type":"array","items":"string"},"default":[],"doc":"Recent request ids already applied (idempotency window)."}]}',
    'runplane.v1.CaseReply': '{"type":"record","name":"CaseReply","namespace":"runplane.v1","doc":"The cases service answers a run\'s case command (topic runs.inbox).","fields":[{"name":"session_id","type":"string"},{"name":"request_id","type":"string"},{"name":"case_id","type":"string"},{"name":"era","type":"int"},{"name":"call_seq","type":["null","long"],"default":null},{"name":"op","type":"string","doc":"get_state, put_state, register_deadline, meet_deadline, cancel_deadline, close."},{"name":"accepted","type":"boolean"},{"name":"state_json","type":["null","string"],"default":null},{"name":"version","type":"long"},{"name":"reason","type":["null","string"],"default":null}]}',
    'runplane.v1.ClaimTask': '{"type":"record","name":"ClaimTask","namespace":"runplane.v1","doc":"A principal claims a task.","fields":[{"name":"task_id","type":"string"},{"name":"principal","type":"string","doc":"Set by the worklist from the authenticated token, never from a request body."},{"name":"at_ms","type":"long"}]}',
    'runplane.v1.CloseCase': '{"type":"record","name":"CloseCase","namespace":"runplane.v1","doc":"Close a case; refused while any obligation is open.","fields":[{"name":"case_id","type":"string"},{"name":"request_id","type":"string","doc":"Idempotency: the asking run\'s session/era/call_seq, or the sweeper\'s decision key."},{"name":"reply_to","type":["null","string"],"default":null,"doc":"Session id whose inbox gets the CaseReply; null for fire-and-forget."},{"name":"era","type":"int","default":0},{"name":"call_seq","type":["null","long"],"default":null}]}',
    'runplane.v1.CloseTask': '{"type":"record","name":"CloseTask","namespace":"runplane.v1","doc":"The task\'s run ended; close the task.","fields":[{"name":"task_id","type":"string"},{"name":"reason","type":"string"},{"name":"at_ms","type":"long"}]}',
    'runplane.v1.Cost': '{"type":"record","name":"Cost","namespace":"runplane.v1","doc":"What an effect cost: tokens for generations, abstract units for anything billed.","fields":[{"name":"tokens_in","type":"long","default":0},{"name":"tokens_out","type":"long","default":0},{"name":"units","type":"double","default":0.0}]}',
    'runplane.v1.DeadLetter': '{"type":"record","name":"DeadLetter","namespace":"runplane.v1","doc":"Something that could not be decoded or validated (topic deadletter, key = original key).","fields":[{"name":"source_topic","type":"string"},{"name":"partition","type":"int"},{"name":"offset","type":"long"},{"name":"service","type":"string"},{"name":"reason","type":"string"},{"name":"key","type":["null","bytes"],"default":null},{"name":"value","type":["null","bytes"],"default":null},{"name":"at_ms","type":"long"}]}',
    'runplane.v1.DecideTask': '{"type":"record","name":"DecideTask","namespace":"runplane.v1","doc":"A principal decides a task. An approval is decided by approve (with verdict null); an operator task (an in-doubt mutating call) by verdict: RETRY (it did not happen, perform it again), ABANDON (give up, record it failed) or APPROVED (it happened; comment = the observed result as JSON).","fields":[{"name":"task_id","type":"string"},{"name":"principal","type":"string","doc":"Set by the worklist from the authenticated token, never from a request body."},{"name":"at_ms","type":"long"},{"name":"approve","type":"boolean"},{"name":"comment","type":"string","default":""},{"name":"verdict","type":["null",{"type":"enum","name":"DecisionOutcome","namespace":"runplane.v1","doc":"How a task ended; RETRY/ABANDON are operator verdicts on an in-doubt call. A reader meeting an outcome it does not know reads REJECTED: an unknown decision never approves.","default":"REJECTED","symbols":["APPROVED","REJECTED","EXPIRED_PROCEEDED","EXPIRED_FAILED","ESCALATED","RETRY","ABANDON"]}],"default":null,"doc":"The operator\'s verdict on an OPERATOR task: RETRY, ABANDON or APPROVED (it happened). Null for approvals; added with a default so older records read as null."},{"name":"edits_json","type":["null","string"],"default":null,"doc":"An approval of a proposed call with some arguments changed: a JSON object, argument name to the value the decider sets. Only on a task with editable arguments, only those; null for every other decision."}]}',
    'runplane.v1.ErrorInfo': '{"type":"record","name":"ErrorInfo","namespace":"runplane.v1","doc":"A recorded failure; replays re-raise exactly this.","fields":[{"name":"type","type":"string","doc":"Error class name, e.g. ToolError."},{"name":"message","type":"string"},{"name":"retryable","type":"boolean","default":false}]}',
    'runplane.v1.ExpireTask': '{"type":"record","name":"ExpireTask","namespace":"runplane.v1","doc":"A task passed its expiry.","fields":[{"name":"task_id","type":"string"},{"name":"at_ms","type":"long"}]}',
    'runplane.v1.GetCaseState': '{"type":"record","name":"GetCaseState","namespace":"runplane.v1","doc":"Read a case\'s state and version (topic cases.commands, key case_id).","fields":[{"name":"case_id","type":"string"},{"name":"request_id","type":"string","doc":"Idempotency: the asking run\'s session/era/call_seq, or the sweeper\'s decision key."},{"name":"reply_to","type":["null","string"],"default":null,"doc":"Session id whose inbox gets the CaseReply; null for fire-and-forget."},{"name":"era","type":"int","default":0},{"name":"call_seq","type":["null","long"],"default":null}]}',
    'runplane.v1.JournalRecord': '{"type":"record","name":"JournalRecord","namespace":"runplane.v1","doc":"One event of a run\'s hash-chained, body-free event chain (topic journal, key session_id).","fields":[{"name":"session_id","type":"string"},{"name":"seq","type":"long","doc":"Contiguous from 0 per session."},{"name":"era","type":"int"},{"name":"kind","type":{"type":"enum","name":"JournalKind","namespace":"runplane.v1","doc":"The event a journal record states. OTHER is never written: a reader meeting a kind it does not know (added by a newer writer) reads OTHER.","default":"OTHER","symbols":["RUN_ADMITTED","EFFECT_ANNOUNCED","EFFECT_RECORDED","EFFECT_IN_DOUBT","SIGNAL_RECEIVED","CHECKPOINT_REPORTED","TASK_OPENED","TASK_DECIDED","CASE_WRITTEN","DEADLINE_REGISTERED","DEADLINE_WARNED","DEADLINE_BREACHED","RUN_PARKED","RUN_RESUMED","RUN_RESTORED","RUN_COMPLETED","RUN_FAILED","RUN_QUARANTINED","RUN_CANCELLED","CANCEL_REQUESTED","RUN_ERASED","OTHER"]}},{"name":"call_seq","type":["null","long"],"default":null,"doc":"Position of the effect call inside the era, where the record belongs to a call."},{"name":"family","type":["null","string"],"default":null,"doc":"Effect family: generation, tool, clock, random, observe, signal, checkpoint, approval, case, deadline, probe."},{"name":"name","type":["null","string"],"default":null,"doc":"Effect name, e.g. model:openai/gpt-4o, tool://billing/charge."},{"name":"request_witness","type":["null","string"],"default":null,"doc":"Hex SHA-256 of the canonical request body."},{"name":"body_digest","type":["null","string"],"default":null,"doc":"Hex SHA-256 of the canonical result body held in results."},{"name":"stamp_ms","type":"long","doc":"Platform timestamp (ms since epoch) this record was minted at."},{"name":"label","type":{"type":"record","name":"Label","namespace":"runplane.v1","doc":"Trust, sensitivity and provenance carried by every payload.","fields":[{"name":"trust","type":{"type":"enum","name":"Trust","namespace":"runplane.v1","doc":"Trusted or untrusted origin. A reader meeting a trust it does not know reads UNTRUSTED (fail closed).","default":"UNTRUSTED","symbols":["TRUSTED","UNTRUSTED"]}},{"name":"sensitivity","type":{"type":"enum","name":"Sensitivity","namespace":"runplane.v1","doc":"Egress class of the payload. A reader meeting a sensitivity it does not know reads SECRET (fail closed: the strictest egress class).","default":"SECRET","symbols":["PUBLIC","INTERNAL","CONFIDENTIAL","SECRET"]}},{"name":"provenance","type":{"type":"array","items":"string"},"doc":"Concrete origins, e.g. tool://billing/charge, model:openai/gpt-4o, agent/refund; sorted, unique."}]}},{"name":"cost","type":["null",{"type":"record","name":"Cost","namespace":"runplane.v1","doc":"What an effect cost: tokens for generations, abstract units for anything billed.","fields":[{"name":"tokens_in","type":"long","default":0},{"name":"tokens_out","type":"long","default":0},{"name":"units","type":"double","default":0.0}]}],"default":null},{"name":"attrs","type":{"type":"map","values":"string"},"default":{},"doc":"Small body-free facts: capability, case_id, tenant, initiator, admission_key, reason, parked_on, task_id, kind=sweep, ..."},{"name":"prev_hash","type":"string","doc":"Hex hash of the previous record; 64 zeros for seq 0."},{"name":"hash","type":"string","doc":"Hex SHA-256(prev_hash bytes || canonical(record without hash))."}]}',
    'runplane.v1.Label': '{"type":"record","name":"Label","namespace":"runplane.v1","doc":"Trust, sensitivity and provenance carried by every payload.","fields":[{"name":"trust","type":{"type":"enum","name":"Trust","namespace":"runplane.v1","doc":"Trusted or untrusted origin. A reader meeting a trust it does not know reads UNTRUSTED (fail closed).","default":"UNTRUSTED","symbols":["TRUSTED","UNTRUSTED"]}},{"name":"sensitivity","type":{"type":"enum","name":"Sensitivity","namespace":"runplane.v1","doc":"Egress class of the payload. A reader meeting a sensitivity it does not know reads SECRET (fail closed: the strictest egress class).","default":"SECRET","symbols":["PUBLIC","INTERNAL","CONFIDENTIAL","SECRET"]}},{"name":"provenance","type":{"type":"array","items":"string"},"doc":"Concrete origins, e.g. tool://billing/charge, model:openai/gpt-4o, agent/refund; sorted, unique."}]}',
    'runplane.v1.MeetDeadline': '{"type":"record","name":"MeetDeadline","namespace":"runplane.v1","doc":"Discharge an obligation.","fields":[{"name":"case_id","type":"string"},{"name":"request_id","type":"string","doc":"Idempotency: the asking run\'s session/era/call_seq, or the sweeper\'s decision key."},{"name":"reply_to","type":["null","string"],"default":null,"doc":"Session id whose inbox gets the CaseReply; null for fire-and-forget."},{"name":"era","type":"int","default":0},{"name":"call_seq","type":["null","long"],"default":null},{"name":"name","type":"string"}]}',
    'runplane.v1.Obligation': '{"type":"record","name":"Obligation","namespace":"runplane.v1","doc":"A named deadline attached to a case.","fields":[{"name":"name","type":"string"},{"name":"due_ms","type":"long"},{"name":"warn_ms","type":["null","long"],"default":null},{"name":"calendar","type":"string"},{"name":"calendar_digest","type":"string"},{"name":"rule_json","type":"string"},{"name":"on_breach","type":["null","string"],"default":null},{"name":"status","type":{"type":"enum","name":"ObligationStatus","namespace":"runplane.v1","doc":"Where an obligation is. A reader meeting a status it does not know reads OPEN: the obligation still binds.","default":"OPEN","symbols":["OPEN","WARNED","MET","CANCELLED","BREACHED"]}},{"name":"sweep_run_id","type":["null","string"],"default":null},{"name":"registered_by","type":"string","doc":"Session that registered it."},{"name":"updated_ms","type":"long"},{"name":"owner_role","type":["null","string"],"default":null,"doc":"The role that owns the obligation: its warning opens a worklist task for this role (null: the cases service\'s default warning role)."}]}',
    'runplane.v1.OpenTask': '{"type":"record","name":"OpenTask","namespace":"runplane.v1","doc":"Open a human task (topic tasks.commands, key task_id).","fields":[{"name":"task_id","type":"string"},{"name":"session_id","type":"string"},{"name":"era","type":"int"},{"name":"call_seq","type":["null","long"],"default":null},{"name":"kind","type":{"type":"enum","name":"TaskKind","namespace":"runplane.v1","doc":"Approval or an operator verdict on an in-doubt call. A reader meeting a kind it does not know reads OPERATOR: a person looks at it.","default":"OPERATOR","symbols":["APPROVAL","OPERATOR"]}},{"name":"question","type":"string"},{"name":"answer_json","type":"string","doc":"The run\'s actual proposed answer."},{"name":"case_id","type":["null","string"],"default":null},{"name":"capability","type":"string"},{"name":"role","type":"string"},{"name":"approvals","type":"int","default":1},{"name":"initiator","type":"string"},{"name":"expires_ms","type":["null","long"],"default":null},{"name":"on_expiry","type":{"type":"enum","name":"ExpiryPolicy","namespace":"runplane.v1","doc":"What expiry does. A reader meeting a policy it does not know reads FAIL (fail closed: expiry never proceeds on a policy it cannot read).","default":"FAIL","symbols":["FAIL","PROCEED","ESCALATE"]}},{"name":"allow_unattended","type":"boolean","default":false},{"name":"escalate_to","type":["null","string"],"default":null},{"name":"opened_ms","type":"long"},{"name":"tenant","type":["null","string"],"default":null,"doc":"The run\'s tenant: only principals of this tenant see and decide the task. Null from writers older than this field (read as the tenant default)."},{"name":"trace_parent","type":["null","string"],"default":null,"doc":"The W3C traceparent of the run\'s step that opened the task (runplane.tracing), so the decision joins the run\'s trace. Null when untraced."},{"name":"editable","type":{"type":"array","items":"string"},"default":[],"doc":"A call approval (ctx.approve_call): the arguments of the proposed call a decider may edit (answer_json shows the call). Empty for every other task: no edit is taken."}]}',
    'runplane.v1.ParkedOn': '{"type":"record","name":"ParkedOn","namespace":"runplane.v1","doc":"What a run waits for.","fields":[{"name":"kind","type":{"type":"enum","name":"ParkKind","namespace":"runplane.v1","doc":"The kind of wait. A reader meeting a kind it does not know reads WAKE: the run waits to be woken.","default":"WAKE","symbols":["SIGNAL","TASK","CASE_REPLY","OPERATOR","WAKE"]}},{"name":"ref","type":"string","doc":"Signal name, task id, case request id."},{"name":"call_seq","type":["null","long"],"default":null},{"name":"era","type":"int","default":0}]}',
    'runplane.v1.PutCaseState': '{"type":"record","name":"PutCaseState","namespace":"runplane.v1","doc":"Write a case\'s state if it is still at expected_version.","fields":[{"name":"case_id","type":"string"},{"name":"request_id","type":"string","doc":"Idempotency: the asking run\'s session/era/call_seq, or the sweeper\'s decision key."},{"name":"reply_to","type":["null","string"],"default":null,"doc":"Session id whose inbox gets the CaseReply; null for fire-and-forget."},{"name":"era","type":"int","default":0},{"name":"call_seq","type":["null","long"],"default":null},{"name":"expected_version","type":"long"},{"name":"state_json","type":"string"}]}',
    'runplane.v1.RefusedSignature': '{"type":"record","name":"RefusedSignature","namespace":"runplane.v1","doc":"A signed admission request admission refused: its signature stays refused for the replay window, so the same bytes produced again are refused again (topic admission.claims, key runplane.refused/<signature_sha256>, partitioned by admission_key; tombstoned once the window has passed).","fields":[{"name":"admission_key","type":"string"},{"name":"signature_sha256","type":"string","doc":"Lowercase hex SHA-256 of the runplane-signature header."},{"name":"signed_ms","type":"long","doc":"The runplane-signed-ms of the request (or the refusal\'s time when unreadable): the window runs from it."},{"name":"refused_ms","type":"long"},{"name":"code","type":"string","doc":"Why it was refused (admission\'s refusal code)."}]}',
    'runplane.v1.RegisterDeadline': '{"type":"record","name":"RegisterDeadline","namespace":"runplane.v1","doc":"Attach an obligation to a case.","fields":[{"name":"case_id","type":"string"},{"name":"request_id","type":"string","doc":"Idempotency: the asking run\'s session/era/call_seq, or the sweeper\'s decision key."},{"name":"reply_to","type":["null","string"],"default":null,"doc":"Session id whose inbox gets the CaseReply; null for fire-and-forget."},{"name":"era","type":"int","default":0},{"name":"call_seq","type":["null","long"],"default":null},{"name":"name","type":"string"},{"name":"due_ms","type":"long"},{"name":"warn_ms","type":["null","long"],"default":null},{"name":"calendar","type":"string"},{"name":"calendar_digest","type":"string"},{"name":"rule_json","type":"string","doc":"The rule resolved, e.g. {\\"days\\": 1}."},{"name":"on_breach","type":["null","string"],"default":null,"doc":"Capability of the follow-up run."},{"name":"tenant","type":["null","string"],"default":null,"doc":"The registering run\'s tenant: the case\'s (admission binds case ids to tenants). The breach follow-up run is admitted for it; null from writers older than this field."},{"name":"owner_role","type":["null","string"],"default":null,"doc":"The role that owns the obligation: its warning opens a worklist task for this role (null: the cases service\'s default warning role)."}]}',
    'runplane.v1.ReleaseTask': '{"type":"record","name":"ReleaseTask","namespace":"runplane.v1","doc":"A principal releases its claim.","fields":[{"name":"task_id","type":"string"},{"name":"principal","type":"string","doc":"Set by the worklist from the authenticated token, never from a request body."},{"name":"at_ms","type":"long"}]}',
    'runplane.v1.ResultEntry': '{"type":"record","name":"ResultEntry","namespace":"runplane.v1","doc":"One call\'s result, with body (topic results, key session/era/call_seq, partitioned by session).","fields":[{"name":"session_id","type":"string"},{"name":"era","type":"int"},{"name":"call_seq","type":"long"},{"name":"family","type":"string"},{"name":"name","type":"string"},{"name":"request_witness","type":"string"},{"name":"ok","type":"boolean"},{"name":"value_json","type":["null","string"],"default":null,"doc":"Canonical JSON of the returned value when ok."},{"name":"error","type":["null",{"type":"record","name":"ErrorInfo","namespace":"runplane.v1","doc":"A recorded failure; replays re-raise exactly this.","fields":[{"name":"type","type":"string","doc":"Error class name, e.g. ToolError."},{"name":"message","type":"string"},{"name":"retryable","type":"boolean","default":false}]}],"default":null},{"name":"stamp_ms","type":"long"},{"name":"attempts","type":"int","default":1},{"name":"body_digest","type":"string","doc":"Hex SHA-256 of the canonical body {ok, value, error}."},{"name":"label","type":{"type":"record","name":"Label","namespace":"runplane.v1","doc":"Trust, sensitivity and provenance carried by every payload.","fields":[{"name":"trust","type":{"type":"enum","name":"Trust","namespace":"runplane.v1","doc":"Trusted or untrusted origin. A reader meeting a trust it does not know reads UNTRUSTED (fail closed).","default":"UNTRUSTED","symbols":["TRUSTED","UNTRUSTED"]}},{"name":"sensitivity","type":{"type":"enum","name":"Sensitivity","namespace":"runplane.v1","doc":"Egress class of the payload. A reader meeting a sensitivity it does not know reads SECRET (fail closed: the strictest egress class).","default":"SECRET","symbols":["PUBLIC","INTERNAL","CONFIDENTIAL","SECRET"]}},{"name":"provenance","type":{"type":"array","items":"string"},"doc":"Concrete origins, e.g. tool://billing/charge, model:openai/gpt-4o, agent/refund; sorted, unique."}]}}]}',
    'runplane.v1.RunStatusUpdate': '{"type":"record","name":"RunStatusUpdate","namespace":"runplane.v1","doc":"The executor tells admission where a run is, so duplicates are answered with it (topic admission, key admission_key).","fields":[{"name":"admission_key","type":"string"},{"name":"run_id","type":"string"},{"name":"status","type":{"type":"enum","name":"RunStatus","namespace":"runplane.v1","doc":"Where a run is. CANCELLED: an operator ended it (RUN_CANCELLED). A reader meeting a status it does not know (added by a newer writer) reads RUNNING: the run is past admission, in a state this reader cannot name.","default":"RUNNING","symbols":["ADMITTED","RUNNING","AWAITING_HUMAN","PARKED","COMPLETED","FAILED","QUARANTINED","CANCELLED"]}},{"name":"task_id","type":["null","string"],"default":null},{"name":"updated_ms","type":"long"},{"name":"seq","type":["null","long"],"default":null,"doc":"Journal seq of the record that set this status (orders updates; wall clocks of two owners do not). Null from writers that predate it."},{"name":"tenant","type":["null","string"],"default":null,"doc":"The run\'s tenant: admission finds the claim by (tenant, admission key). Null from writers that predate per-tenant claims (the claim written under the admission key alone is then the one updated)."}]}',
    'runplane.v1.Schedule': '{"type":"record","name":"Schedule","namespace":"runplane.v1","doc":"A schedule: start a run of a capability on a timetable (topic schedules, key tenant/name; a tombstone deletes it). Written by operators (runplane schedules); read by the sweeper.","fields":[{"name":"tenant","type":"string","doc":"The tenant every tick\'s run is admitted for."},{"name":"name","type":"string","doc":"Unique within the tenant: 1 to 63 of a-z 0-9 . _ -."},{"name":"capability","type":"string"},{"name":"input_json","type":"string","doc":"Every tick\'s run input, as JSON text."},{"name":"initiator","type":"string","doc":"Who the runs act for (the principal that created the schedule)."},{"name":"cron","type":["null","string"],"default":null,"doc":"Five-field cron expression read in tz; null for an interval."},{"name":"tz","type":"string","default":"UTC","doc":"IANA time zone of the cron expression."},{"name":"every_ms","type":["null","long"],"default":null,"doc":"Plain interval: ticks at anchor_ms + k * every_ms; null for cron."},{"name":"anchor_ms","type":"long","default":0,"doc":"Where an interval\'s ticks are counted from (the creation instant)."},{"name":"catch_up","type":{"type":"enum","name":"CatchUp","namespace":"runplane.v1","doc":"What a schedule fires after downtime: SKIP the ticks older than the sweeper\'s grace, fire ONCE (the latest), or EACH (the latest catch_up_max). A reader meeting a rule it does not know reads SKIP: it fires no missed tick rather than guess how many.","default":"SKIP","symbols":["SKIP","ONCE","EACH"]},"default":"SKIP","doc":"What fires after downtime."},{"name":"catch_up_max","type":"int","default":1,"doc":"EACH: at most this many missed ticks are fired (the latest)."},{"name":"paused","type":"boolean","default":false,"doc":"A paused schedule fires nothing; its ticks meanwhile are skipped."},{"name":"since_ms","type":"long","doc":"Only ticks after this instant fire (set on creation and on resume)."},{"name":"created_ms","type":"long"},{"name":"updated_ms","type":"long"},{"name":"updated_by","type":["null","string"],"default":null,"doc":"Who wrote this version (create, pause, resume)."}]}',
    'runplane.v1.ScheduleFired': '{"type":"record","name":"ScheduleFired","namespace":"runplane.v1","doc":"How far the sweeper has fired a schedule, and how its ticks were answered (topic schedules.fired, key tenant/name, co-partitioned with schedules). The sweeper owning the partition is its single writer.","fields":[{"name":"tenant","type":"string"},{"name":"name","type":"string"},{"name":"through_ms","type":"long","doc":"The latest tick behind the schedule, fired or skipped: the next fires after it."},{"name":"fired","type":"long","default":0,"doc":"Ticks sent to admission so far."},{"name":"skipped","type":"long","default":0,"doc":"Ticks passed over by the catch-up rule or a pause."},{"name":"last_tick_ms","type":["null","long"],"default":null,"doc":"The last tick sent to admission."},{"name":"last_outcome","type":["null","string"],"default":null,"doc":"How admission answered the latest answered tick: ADMITTED, DUPLICATE or REFUSED."},{"name":"last_outcome_tick_ms","type":["null","long"],"default":null,"doc":"The tick last_outcome answers."},{"name":"last_run_id","type":["null","string"],"default":null,"doc":"The run of the latest admitted (or duplicate) tick."},{"name":"refused","type":"long","default":0,"doc":"Ticks admission refused."},{"name":"last_refusal","type":["null","string"],"default":null,"doc":"Why admission refused the latest refused tick."},{"name":"last_refused_tick_ms","type":["null","long"],"default":null},{"name":"updated_ms","type":"long"}]}',
    'runplane.v1.SessionSnapshot': '{"type":"record","name":"SessionSnapshot","namespace":"runplane.v1","doc":"The executor\'s compacted view of one session (topic sessions, key session_id).","fields":[{"name":"session_id","type":"string"},{"name":"capability","type":"string"},{"name":"status","type":{"type":"enum","name":"RunStatus","namespace":"runplane.v1","doc":"Where a run is. CANCELLED: an operator ended it (RUN_CANCELLED). A reader meeting a status it does not know (added by a newer writer) reads RUNNING: the run is past admission, in a state this reader cannot name.","default":"RUNNING","symbols":["ADMITTED","RUNNING","AWAITING_HUMAN","PARKED","COMPLETED","FAILED","QUARANTINED","CANCELLED"]}},{"name":"era","type":"int"},{"name":"next_seq","type":"long"},{"name":"last_hash","type":"string"},{"name":"parked_on","type":["null",{"type":"record","name":"ParkedOn","namespace":"runplane.v1","doc":"What a run waits for.","fields":[{"name":"kind","type":{"type":"enum","name":"ParkKind","namespace":"runplane.v1","doc":"The kind of wait. A reader meeting a kind it does not know reads WAKE: the run waits to be woken.","default":"WAKE","symbols":["SIGNAL","TASK","CASE_REPLY","OPERATOR","WAKE"]}},{"name":"ref","type":"string","doc":"Signal name, task id, case request id."},{"name":"call_seq","type":["null","long"],"default":null},{"name":"era","type":"int","default":0}]}],"default":null},{"name":"case_id","type":["null","string"],"default":null},{"name":"admission_key","type":"string"},{"name":"tenant","type":"string"},{"name":"initiator","type":"string"},{"name":"input_json","type":"string"},{"name":"checkpoint_json","type":["null","string"],"default":null,"doc":"Last reported checkpoint state (checkpointed runs)."},{"name":"output_json","type":["null","string"],"default":null},{"name":"error","type":["null",{"type":"record","name":"ErrorInfo","namespace":"runplane.v1","doc":"A recorded failure; replays re-raise exactly this.","fields":[{"name":"type","type":"string","doc":"Error class name, e.g. ToolError."},{"name":"message","type":"string"},{"name":"retryable","type":"boolean","default":false}]}],"default":null},{"name":"started_ms","type":"long"},{"name":"updated_ms","type":"long"},{"name":"in_flight_json","type":["null","string"],"default":null,"doc":"The announced call with no recorded outcome, as canonical JSON {era, call_seq, family, name, witness, recovery}: what a restore finds in doubt."},{"name":"pending_signals","type":{"type":"array","items":{"type":"record","name":"Signal","namespace":"runplane.v1","doc":"An external event for a run (topic runs.inbox).","fields":[{"name":"session_id","type":"string"},{"name":"name","type":"string"},{"name":"payload_json","type":"string"},{"name":"sent_ms","type":"long"},{"name":"signal_id","type":["null","string"],"default":null,"doc":"The sender\'s idempotency id: a second signal with the same id for the run is not delivered again. Null = no deduplication (older senders)."},{"name":"sent_by","type":["null","string"],"default":null,"doc":"The authenticated principal that sent it (from the credential, never the body); journaled with the signal."}]}},"default":[],"doc":"Signals delivered before the run waited for them, in delivery order."},{"name":"era_started_ms","type":"long","default":0,"doc":"Stamp that opened the current era (the logical clock before its first call); 0 = started_ms."},{"name":"open_request_json","type":["null","string"],"default":null,"doc":"The request the run waits an answer for (an approval task or a case command), as canonical JSON {kind, ref, era, call_seq, family, name, witness, value}: kept across a checkpointed restore so the new era adopts it instead of asking again."},{"name":"doubts_json","type":["null","string"],"default":null,"doc":"Announced calls from earlier eras whose outcome is still unknown (checkpointed runs), as a canonical JSON list of {era, call_seq, family, name, witness, recovery, origin}: every later restore runs each one\'s declared recovery before the same call can be performed live again. Null = none."},{"name":"wake_at_ms","type":["null","long"],"default":null,"doc":"The journaled instant a durable timer (ctx.sleep, or a wait\'s timeout) wakes the run; the executor owning the partition delivers a Wake at or after it. Null = no timer."},{"name":"signal_ids","type":{"type":"array","items":"string"},"default":[],"doc":"Ids of the signals already accepted by the run (the most recent ones, bounded), so a redelivered signal is not delivered twice."},{"name":"cancel_json","type":["null","string"],"default":null,"doc":"A cancel request accepted and not yet ended, as canonical JSON {reason, by, at_ms, delivered}: the run ends RUN_CANCELLED once the agent has observed it and finished its clean-up."},{"name":"agent_version","type":["null","string"],"default":null,"doc":"The agent version serving the run (runplane.core.versions): a run continues on the newest deployed version of its line. Null: unversioned, or a writer older than this field."},{"name":"stranded_json","type":["null","string"],"default":null,"doc":"Set while no deployed version of the run\'s line can serve it (runplane.core.versions): canonical JSON {version, status, wake_at_ms} - the version it waits for and the status and timer it had, given back when an executor hosting its line takes it. The run is PARKED meanwhile (RUN_PARKED parked_on version:<v> journaled). Null = not stranded."},{"name":"held_json","type":["null","string"],"default":null,"doc":"Inbox records for the run that arrived while it was stranded, in arrival order, as a canonical JSON list of {topic, partition, offset, key, value, at_ms, reason} (key and value base64): served in that order, before anything newer, once a version of its line is deployed; never dead-lettered. Null = none."},{"name":"delegation_json","type":["null","string"],"default":null,"doc":"The Delegation the run runs under (from its StartRun), kept so a rebuilt run stays bounded by it. Null: none."},{"name":"parts","type":{"type":"map","values":"string"},"default":{},"doc":"Each effect family\'s own part of the run\'s state, by part name (the family\'s registry row says how its value is written and read): text a newer writer adds while it still writes the older fields above (wake_at_ms, signal_ids, cancel_json) for older readers. A reader takes a part from here first, from the older fields when it is absent. Absent = the part\'s default."}]}',
    'runplane.v1.Signal': '{"type":"record","name":"Signal","namespace":"runplane.v1","doc":"An external event for a run (topic runs.inbox).","fields":[{"name":"session_id","type":"string"},{"name":"name","type":"string"},{"name":"payload_json","type":"string"},{"name":"sent_ms","type":"long"},{"name":"signal_id","type":["null","string"],"default":null,"doc":"The sender\'s idempotency id: a second signal with the same id for the run is not delivered again. Null = no deduplication (older senders)."},{"name":"sent_by","type":["null","string"],"default":null,"doc":"The authenticated principal that sent it (from the credential, never the body); journaled with the signal."}]}',
    'runplane.v1.StartRun': '{"type":"record","name":"StartRun","namespace":"runplane.v1","doc":"Start a run (topic runs.inbox, key session_id).","fields":[{"name":"session_id","type":"string"},{"name":"capability","type":"string"},{"name":"input_json","type":"string"},{"name":"case_id","type":["null","string"],"default":null},{"name":"admission_key","type":"string"},{"name":"tenant","type":"string"},{"name":"initiator","type":"string"},{"name":"admitted_hash","type":"string","doc":"Hash of the RunAdmitted record (seq 0): the chain\'s handover."},{"name":"admitted_ms","type":"long"},{"name":"agent_version","type":["null","string"],"default":null,"doc":"The emitter\'s version pin (the executor starts the run on the newest deployed version of that line); null: the newest version the executor hosts (or an unversioned agent, or a writer older than this field)."},{"name":"delegation_json","type":["null","string"],"default":null,"doc":"The Delegation the run runs under (see AdmissionRequest.delegation_json), also in seq 0\'s attrs (delegation). Null: none."},{"name":"input_label_json","type":["null","string"],"default":null,"doc":"The label the run\'s input carries when it is more than the admission input\'s (canonical JSON of a Label): a successor\'s (continue-as-new) is the join of everything its predecessor had read, so a conversation carried across does not come back trusted. Also in seq 0\'s attrs (input_label). Null: the admission input\'s label."}]}',
    'runplane.v1.StreamEvent': '{"type":"record","name":"StreamEvent","namespace":"runplane.v1","doc":"One event of a run\'s live stream (topic runs.stream): a view for people and clients watching, produced as it happens, best effort, never the truth (the journal is).","fields":[{"name":"session_id","type":"string"},{"name":"era","type":"int"},{"name":"call_seq","type":"int","doc":"The slot\'s call_seq within the era; -1 for an event of no call (progress, parked, ended)."},{"name":"attempt","type":"long","doc":"Which attempt at the slot: the ms its executor began it, strictly increasing per executor; a new value for the same slot is a restart (a retry, or another executor after a crash), whose events supersede the earlier attempt\'s."},{"name":"seq","type":"long","doc":"The event\'s place among its attempt\'s events, from 0: a gap is an event lost."},{"name":"kind","type":{"type":"enum","name":"StreamKind","namespace":"runplane.v1","doc":"What happened. A reader meeting a kind it does not know (added by a newer writer) reads PROGRESS: an ephemeral note, shown and otherwise ignored.","default":"PROGRESS","symbols":["TURN_STARTED","TEXT_DELTA","TOOL_CALL_DELTA","TOOL_CALL_PROPOSED","TOOL_CALL_STARTED","TOOL_CALL_FINISHED","TOOL_CALL_REFUSED","PARKED","RESUMED","ENDED","PROGRESS"]}},{"name":"payload_json","type":"string","doc":"The kind\'s facts as a JSON object (a text delta\'s text, a call\'s id, name, arguments)."},{"name":"stamp_ms","type":"long"}]}',
    'runplane.v1.TaskDecision': '{"type":"record","name":"TaskDecision","namespace":"runplane.v1","doc":"A human (or expiry) decided a task (topic runs.inbox).","fields":[{"name":"session_id","type":"string"},{"name":"task_id","type":"string"},{"name":"era","type":"int"},{"name":"call_seq","type":["null","long"],"default":null},{"name":"outcome","type":{"type":"enum","name":"DecisionOutcome","namespace":"runplane.v1","doc":"How a task ended; RETRY/ABANDON are operator verdicts on an in-doubt call. A reader meeting an outcome it does not know reads REJECTED: an unknown decision never approves.","default":"REJECTED","symbols":["APPROVED","REJECTED","EXPIRED_PROCEEDED","EXPIRED_FAILED","ESCALATED","RETRY","ABANDON"]}},{"name":"comment","type":"string","default":""},{"name":"decided_by","type":{"type":"array","items":"string"},"default":[],"doc":"Principals from authenticated requests; empty for unattended expiry."},{"name":"decided_ms","type":"long"},{"name":"edits_json","type":["null","string"],"default":null,"doc":"An APPROVED call approval with arguments changed by decided_by: a JSON object, argument name to the value set. The run records it as that person\'s release of exactly those fields. Null otherwise."}]}',
    'runplane.v1.TaskRecord': '{"type":"record","name":"TaskRecord","namespace":"runplane.v1","doc":"A human task (topic tasks, key task_id).","fields":[{"name":"task","type":{"type":"record","name":"OpenTask","namespace":"runplane.v1","doc":"Open a human task (topic tasks.commands, key task_id).","fields":[{"name":"task_id","type":"string"},{"name":"session_id","type":"string"},{"name":"era","type":"int"},{"name":"call_seq","type":["null","long"],"default":null},{"name":"kind","type":{"type":"enum","name":"TaskKind","namespace":"runplane.v1","doc":"Approval or an operator verdict on an in-doubt call. A reader meeting a kind it does not know reads OPERATOR: a person looks at it.","default":"OPERATOR","symbols":["APPROVAL","OPERATOR"]}},{"name":"question","type":"string"},{"name":"answer_json","type":"string","doc":"The run\'s actual proposed answer."},{"name":"case_id","type":["null","string"],"default":null},{"name":"capability","type":"string"},{"name":"role","type":"string"},{"name":"approvals","type":"int","default":1},{"name":"initiator","type":"string"},{"name":"expires_ms","type":["null","long"],"default":null},{"name":"on_expiry","type":{"type":"enum","name":"ExpiryPolicy","namespace":"runplane.v1","doc":"What expiry does. A reader meeting a policy it does not know reads FAIL (fail closed: expiry never proceeds on a policy it cannot read).","default":"FAIL","symbols":["FAIL","PROCEED","ESCALATE"]}},{"name":"allow_unattended","type":"boolean","default":false},{"name":"escalate_to","type":["null","string"],"default":null},{"name":"opened_ms","type":"long"},{"name":"tenant","type":["null","string"],"default":null,"doc":"The run\'s tenant: only principals of this tenant see and decide the task. Null from writers older than this field (read as the tenant default)."},{"name":"trace_parent","type":["null","string"],"default":null,"doc":"The W3C traceparent of the run\'s step that opened the task (runplane.tracing), so the decision joins the run\'s trace. Null when untraced."},{"name":"editable","type":{"type":"array","items":"string"},"default":[],"doc":"A call approval (ctx.approve_call): the arguments of the proposed call a decider may edit (answer_json shows the call). Empty for every other task: no edit is taken."}]}},{"name":"status","type":{"type":"enum","name":"TaskStatus","namespace":"runplane.v1","doc":"Where a task is. A reader meeting a status it does not know reads CLOSED: not actionable by this reader.","default":"CLOSED","symbols":["OPEN","CLAIMED","DECIDED","EXPIRED","CLOSED"]}},{"name":"claimed_by","type":["null","string"],"default":null},{"name":"approved_by","type":{"type":"array","items":"string"},"default":[]},{"name":"outcome","type":["null",{"type":"enum","name":"DecisionOutcome","namespace":"runplane.v1","doc":"How a task ended; RETRY/ABANDON are operator verdicts on an in-doubt call. A reader meeting an outcome it does not know reads REJECTED: an unknown decision never approves.","default":"REJECTED","symbols":["APPROVED","REJECTED","EXPIRED_PROCEEDED","EXPIRED_FAILED","ESCALATED","RETRY","ABANDON"]}],"default":null},{"name":"comment","type":"string","default":""},{"name":"updated_ms","type":"long"},{"name":"claim_note","type":["null","string"],"default":null,"doc":"How the last claim was taken back without a decision, for the record: its lease lapsed (the worklist\'s tick) or a supervisor released it. null until that happens."},{"name":"edits_json","type":["null","string"],"default":null,"doc":"The arguments the decider changed when approving a proposed call (DecideTask.edits_json), so a decision sent again carries them. Null otherwise."}]}',
    'runplane.v1.UpdateAnswer': '{"type":"record","name":"UpdateAnswer","namespace":"runplane.v1","doc":"A run\'s answer to an update (topic runs.updates, key update_id): the handler\'s answer, or why the update was refused. Written by the executor in the step that decided it; a refused update leaves no journal record, only this answer.","fields":[{"name":"session_id","type":"string"},{"name":"update_id","type":"string","doc":"The caller\'s idempotency id: the run answers one update per id, and an id delivered again is answered with the first answer."},{"name":"name","type":"string","doc":"The update\'s name (the agent\'s declared handler)."},{"name":"answer_json","type":["null","string"],"default":null,"doc":"The agent\'s answer (canonical JSON); null when refused."},{"name":"refused","type":["null","string"],"default":null,"doc":"Why the update was refused, as a code (invalid: its validator refused it; unknown_update: the agent declares no such update; too_large: over the run\'s signal limit; signals_full: the run buffers no more; ended: the run ended before answering it); null when answered."},{"name":"reason","type":["null","string"],"default":null,"doc":"The refusal, in words (the validator\'s reason)."},{"name":"answered_ms","type":"long"}]}',
    'runplane.v1.Wake': '{"type":"record","name":"Wake","namespace":"runplane.v1","doc":"Wake a parked or evicted run (topic runs.inbox).","fields":[{"name":"session_id","type":"string"},{"name":"reason","type":"string"},{"name":"sent_ms","type":"long"}]}',
    'runplane.v1.WarnDeadline': '{"type":"record","name":"WarnDeadline","namespace":"runplane.v1","doc":"The sweeper saw an obligation pass warn time.","fields":[{"name":"case_id","type":"string"},{"name":"request_id","type":"string","doc":"Idempotency: the asking run\'s session/era/call_seq, or the sweeper\'s decision key."},{"name":"reply_to","type":["null","string"],"default":null,"doc":"Session id whose inbox gets the CaseReply; null for fire-and-forget."},{"name":"era","type":"int","default":0},{"name":"call_seq","type":["null","long"],"default":null},{"name":"name","type":"string"},{"name":"due_ms","type":"long"}]}',
}

RECORD_TYPES: tuple[type[Record], ...] = (
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
    Cost,
    DeadLetter,
    DecideTask,
    ErrorInfo,
    ExpireTask,
    GetCaseState,
    JournalRecord,
    Label,
    MeetDeadline,
    Obligation,
    OpenTask,
    ParkedOn,
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

ENUM_TYPES: tuple[type[enum.StrEnum], ...] = (
    AdmissionOutcome,
    CatchUp,
    DecisionOutcome,
    ExpiryPolicy,
    JournalKind,
    ObligationStatus,
    ParkKind,
    RunStatus,
    Sensitivity,
    StreamKind,
    TaskKind,
    TaskStatus,
    Trust,
    Verdict,
)

register(SCHEMAS, RECORD_TYPES, ENUM_TYPES)
