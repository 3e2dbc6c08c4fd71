"""Admission, the pure part: one key, at most one run, ever.

``decide(claims, position, request, capabilities, now_ms) -> Decision`` takes values and
returns values; ``handler.py`` adapts it to the processor, which moves records. For a new,
valid key the decision is four records that the processor commits in **one** transaction
with the input offset:

    admission.claims   AdmissionClaim(run_id, case_id, status=ADMITTED)   key = (tenant, admission key)
    journal            RunAdmitted, seq 0 of the run's chain                key = run id
    runs.inbox         StartRun carrying the RunAdmitted hash (handover)    key = run id
    admission.replies  AdmissionReply(ADMITTED, run_id)                     key = admission key

A capability the deployment policy gives a queue (``CapabilitySpec.queue``) waits its turn
instead: the claim and the reply say QUEUED, seq 0 names the queue in its attrs, and the
StartRun travels inside an ``EnterQueue`` on ``queues.commands`` (key = the queue), which the
queue service sends on to ``runs.inbox`` when a slot frees. When such a run's claim first
moves to an end (a RunStatusUpdate from the executor), the same transaction writes a
``LeaveQueue`` there: the release of its slot (docs/decisions.md 33).

So the key is taken at the instant the run becomes real: a claim without a run, or a run
without a claim, cannot be observed by a read_committed reader.

Idempotency from position (DBOS): the run id is derived from the admission key *and* the
input record's (topic, partition, offset). A record handled again after an abort or a crash
— against the state restored from what was committed — mints the same id, so even the
aborted attempt's records (never visible) name the run the retry commits.

Case ids are bound to their tenant: ``c-`` + 8 hex of H(tenant) (the tenant tag) + 16 hex of
H(tenant, business keys). Correlation keys starting with ``runplane.`` are reserved.
``runplane.case`` names an existing case outright: the run lands on that case whatever the
other keys say — if the case id carries the request tenant's tag; a case id of another tenant
is refused, so one tenant cannot attach runs to (and read or write the state of) another
tenant's case. The cases service's follow-up run on a breach uses it, for the case's tenant,
so the follow-up works on the case whose obligation breached. Any other ``runplane.*`` key, or
a ``runplane.case`` that is not a case id, is refused (``bad_correlation``). Admission cannot
see the cases table: "existing" is the emitter's promise, as for any other key.

Identity: ``initiator`` names the worklist principal on whose behalf the run acts; four-eyes
refuses that principal on the run's tasks. An empty or blank initiator is refused
(``bad_request``): the worklist would refuse the run's first task and the run would wait
forever on a task that never opened. Which tenant and initiators an emitter may name comes
from its signature (``identity.py``: the emitters registry, ``runplane.signing.admission``); those
checks come first, and their refusals are also dead-lettered by the adapter.

A key is claimed per tenant: the claims table's row is ``runplane.core.keys.claim_key(tenant,
key)`` (partitioned by the admission key, so it lives on the partition of the key's requests),
and two tenants using one key get two runs. A key the request's tenant already claimed gets
DUPLICATE with the original run, its case and its status (AWAITING_HUMAN with the task id:
"already waiting for you"); a claim of another tenant is never a duplicate, so no answer names,
counts or reveals another tenant's run. Claims written before per-tenant claims (the row keyed
by the admission key alone) are read as the tenant they record (:func:`find_claim`) and stay
where they are. Every reply names the tenant of the request it answers, so a client waiting
on a key takes its own tenant's answer. A request admission will not run gets REFUSED with a
reason and claims nothing.
"""

from __future__ import annotations

import enum
import hashlib
import io
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fastavro import schemaless_reader

from runplane.core import canonical_bytes
from runplane.core.chain import run_start
from runplane.core.keys import (
    CASE_ID,
    CASE_KEY,
    RESERVED_PREFIX,
    case_belongs_to,
    case_id_for,
    claim_key,
    parent_of,
)
from runplane.core.limits import DEFAULT_MAX_INPUT_BYTES
from runplane.core.plan import Bounds
from runplane.core.schedules import SCHEDULE_KEY_PREFIX
from runplane.core.versions import VersionNotDeployed, resolve
from runplane.errors import TerminalError
from runplane.signing.admission import Unsigned, Verification, Verified
from runplane.wire import (
    AdmissionClaim,
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    EnterQueue,
    JournalRecord,
    LeaveQueue,
    Record,
    RefusedSignature,
    RunStatus,
    RunStatusUpdate,
    StartRun,
    TenantId,
    admission_key_problem,
    parsed_schema,
    schema_fingerprint,
    tenant_problem,
)
from services.admission.identity import identity_problem

# Domain separation: these digests can never collide with any other hash runplane computes.
_RUN_ID_DOMAIN = b"runplane/admission/run-id/v1\x00"

# How deeply an input may nest. Business inputs are a few levels deep; a deeper one is refused
# here rather than blowing the recursion limit of a JSON encoder, schema validator or the
# canonical hasher later (in admission or in the executor).
MAX_INPUT_DEPTH = 64


class Refusal(enum.StrEnum):
    """Why admission refused a request (a bounded set: it labels a metric)."""

    BAD_KEY = "bad_key"
    BAD_TENANT = "bad_tenant"
    UNKNOWN_CAPABILITY = "unknown_capability"
    UNAVAILABLE = "unavailable"  # the executor does not offer a tool or model it needs
    INVALID_INPUT = "invalid_input"
    BAD_REQUEST = "bad_request"
    BAD_CORRELATION = "bad_correlation"
    # Identity (``identity.py``): answered and dead-lettered.
    UNAUTHENTICATED = "unauthenticated"
    FORGED_TENANT = "forged_tenant"
    FORBIDDEN_INITIATOR = "forbidden_initiator"


@dataclass(frozen=True)
class CapabilitySpec:
    """What admission knows of a capability: its input JSON Schema, or None (any JSON)."""

    input_schema: Mapping[str, Any] | None = None
    # Why the executor cannot run it (a tool or model it needs is not offered), or None.
    unavailable: str | None = None
    # The versions deployed (runplane.core.versions), any order; () for an unversioned agent.
    versions: tuple[str, ...] = ()
    # The queue its runs wait in (the policy declares one: docs/decisions.md 33), or None:
    # they start at once.
    queue: str | None = None
    _validator: Callable[[Any], str | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.input_schema is None:
            return
        import jsonschema

        # A broken schema is a configuration error at start-up, not a refusal per request.
        schema = dict(self.input_schema)
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)

        def check(value: Any) -> str | None:
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
            if error is None:
                return None
            where = "/".join(str(p) for p in error.absolute_path) or "input"
            return f"{where}: {error.message}"

        object.__setattr__(self, "_validator", check)

    def input_problem(self, value: Any) -> str | None:
        return None if self._validator is None else self._validator(value)


@dataclass(frozen=True)
class Position:
    """Where the request was read: the source of the run id's idempotency."""

    topic: str  # logical
    partition: int
    offset: int


@dataclass(frozen=True)
class Admitted:
    """A new run. ``enter`` set: its capability has a queue, and the StartRun goes there
    (inside the EnterQueue) instead of to ``runs.inbox``."""

    claim: AdmissionClaim
    journal: JournalRecord
    start: StartRun
    reply: AdmissionReply
    enter: EnterQueue | None = None


@dataclass(frozen=True)
class Duplicate:
    reply: AdmissionReply


@dataclass(frozen=True)
class Refused:
    code: Refusal
    reply: AdmissionReply


@dataclass(frozen=True)
class StatusUpdated:
    claim: AdmissionClaim
    row_key: str  # where the claim is: claim_key(tenant, key), or the key alone (older rows)
    release: LeaveQueue | None = None  # a queued run ended: its slot is released


# The statuses that end a run: a queued run's end releases its slot.
ENDED = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED, RunStatus.CANCELLED}
)


@dataclass(frozen=True)
class Ignored:
    reason: str


Decision = Admitted | Duplicate | Refused | StatusUpdated | Ignored


def mint_run_id(admission_key: str, position: Position) -> str:
    """``r-`` + a UUID derived from the key and the input position (never random)."""
    material = b"\x00".join(
        (
            admission_key.encode("utf-8", "surrogatepass"),
            position.topic.encode(),
            str(position.partition).encode(),
            str(position.offset).encode(),
        )
    )
    digest = hashlib.sha256(_RUN_ID_DOMAIN + material).digest()
    return f"r-{uuid.UUID(bytes=digest[:16], version=5)}"


def correlation_problem(correlation: Mapping[str, str], tenant: str | None = None) -> str | None:
    """Why these correlation keys cannot be admitted for ``tenant``, or None.

    Reserved keys misused, a ``runplane.case`` that is not a case id, or (with ``tenant``) one
    that is another tenant's case.
    """
    for name in sorted(correlation):
        if name.startswith(RESERVED_PREFIX) and name != CASE_KEY:
            return f"correlation key {name!r} is reserved (only {CASE_KEY!r} is defined)"
    explicit = correlation.get(CASE_KEY)
    if explicit is None:
        return None
    if not CASE_ID.fullmatch(explicit):
        return f"{CASE_KEY} must be a case id (c- and 24 lowercase hex), got {explicit[:80]!r}"
    if tenant is not None and not case_belongs_to(explicit, tenant):
        return f"{CASE_KEY} {explicit} is not a case of tenant {tenant!r}"
    return None


def initiator_problem(initiator: str) -> str | None:
    """Why ``initiator`` cannot start a run (empty or blank), or None."""
    if not initiator.strip():
        return (
            "initiator is empty: it must name the worklist principal the run acts for "
            "(four-eyes refuses that principal on the run's tasks)"
        )
    return None


def _nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests deeper than ``limit`` (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def refusal(
    key: str, code: Refusal, reason: str, now_ms: int, tenant: TenantId | None = None
) -> Refused:
    reply = AdmissionReply(
        admission_key=key,
        outcome=AdmissionOutcome.REFUSED,
        reason=reason,
        replied_ms=now_ms,
        tenant=tenant,
    )
    return Refused(code, reply)


def find_claim(
    get: Callable[[str], Record | None], tenant: str | None, key: str
) -> tuple[str, AdmissionClaim] | None:
    """(row key, claim) of ``key`` for ``tenant`` in the claims table ``get`` reads, or None.

    The per-tenant row first; else a row written before per-tenant claims (keyed by ``key``
    alone), read as the tenant it records — another tenant's is not this tenant's claim.
    ``tenant`` None (a status update from an executor that predates per-tenant claims) finds
    only such an older row.
    """
    if tenant is not None:
        row = claim_key(tenant, key)
        mine = get(row)
        if isinstance(mine, AdmissionClaim):
            return row, mine
    older = get(key)
    if isinstance(older, AdmissionClaim) and tenant in (None, older.tenant):
        return key, older
    return None


def _duplicate(claim: AdmissionClaim, key: str, now_ms: int) -> Duplicate:
    waiting = claim.status == RunStatus.AWAITING_HUMAN
    return Duplicate(
        AdmissionReply(
            admission_key=key,
            outcome=AdmissionOutcome.DUPLICATE,
            run_id=claim.run_id,
            case_id=claim.case_id,
            status=claim.status,
            task_id=claim.task_id if waiting else None,
            replied_ms=now_ms,
            tenant=claim.tenant,
        )
    )


def _platform_key(key: str) -> str | None:
    """What a key the platform mints is for — a commissioned child's (``keys.child_key``) or a
    schedule's tick (``schedules.tick_key``) — or None for an emitter's own key."""
    if parent_of(key) is not None:
        return "runplane.child/ keys are the platform's (commissions)"
    if key.startswith(SCHEDULE_KEY_PREFIX):
        return "runplane.schedule/ keys are the platform's (schedule ticks)"
    return None


def _claims_a_platform_key(key: str, verification: Verification) -> str | None:
    """Why a tenant's emitter may not send ``key``: a child's key could pre-empt the child and
    answer its parent, a tick's key pre-empt the tick. Only the platform's own emitter (any
    tenant) — or dev mode, unsigned — may name one."""
    why = _platform_key(key)
    if why is None:
        return None
    tenants = isinstance(verification, Verified) and not verification.emitter.any_tenant
    return why if tenants else None


def _problem(
    key: str,
    req: AdmissionRequest,
    capabilities: Mapping[str, CapabilitySpec],
    max_input_bytes: int,
) -> tuple[Refusal, str] | None:
    """Why the request cannot start a run, checked in order: the request itself, the
    capability it names, then its input; None when it can."""
    spec = capabilities.get(req.capability)
    return (
        _request_problem(key, req)
        or _capability_problem(req, spec)
        or (None if spec is None else _input_problem(req, spec, max_input_bytes))
    )


def _request_problem(key: str, req: AdmissionRequest) -> tuple[Refusal, str] | None:
    if req.admission_key != key:
        return Refusal.BAD_KEY, "the record key must equal admission_key"
    bad_initiator = initiator_problem(req.initiator)
    if bad_initiator is not None:
        return Refusal.BAD_REQUEST, bad_initiator
    if req.delegation_json is not None:
        # Read through the constructor: a chain that widens anywhere never starts a run.
        try:
            Bounds.read(req.delegation_json)
        except TerminalError as exc:
            return Refusal.BAD_REQUEST, f"delegation: {exc}"
    return None


def _capability_problem(
    req: AdmissionRequest, spec: CapabilitySpec | None
) -> tuple[Refusal, str] | None:
    if spec is None:
        return Refusal.UNKNOWN_CAPABILITY, f"unknown capability {req.capability!r}"
    if spec.unavailable is not None:
        return Refusal.UNAVAILABLE, spec.unavailable
    if req.agent_version is not None:
        try:
            if not spec.versions:
                raise VersionNotDeployed(f"{req.capability} declares no versions to pin")
            resolve(spec.versions, req.agent_version)
        except VersionNotDeployed as exc:
            return Refusal.UNAVAILABLE, f"{req.capability}: {exc}"
    bad_keys = correlation_problem(req.correlation_keys, req.tenant)
    if bad_keys is not None:
        return Refusal.BAD_CORRELATION, bad_keys
    return None


def _input_problem(
    req: AdmissionRequest, spec: CapabilitySpec, max_input_bytes: int
) -> tuple[Refusal, str] | None:
    if len(req.input_json.encode("utf-8", "surrogatepass")) > max_input_bytes:
        return Refusal.INVALID_INPUT, f"input is larger than {max_input_bytes} bytes"
    try:
        value = json.loads(req.input_json)
    except ValueError as exc:
        return Refusal.INVALID_INPUT, f"input is not JSON: {exc}"
    except RecursionError:
        # json's C scanner gives up past the interpreter's recursion limit (~1000 levels).
        return Refusal.INVALID_INPUT, f"input nests deeper than {MAX_INPUT_DEPTH} levels"
    if _nesting_exceeds(value, MAX_INPUT_DEPTH):
        return Refusal.INVALID_INPUT, f"input nests deeper than {MAX_INPUT_DEPTH} levels"
    problem = spec.input_problem(value)
    if problem is not None:
        return Refusal.INVALID_INPUT, f"input does not match the {req.capability} schema: {problem}"
    try:
        canonical_bytes(value)  # the chain hashes the input: refuse what cannot be hashed
    except (TypeError, ValueError) as exc:
        return Refusal.INVALID_INPUT, f"input cannot be hashed canonically: {exc}"
    return None


def admit(
    req: AdmissionRequest,
    position: Position,
    now_ms: int,
    agent_version: str | None = None,
    queue: str | None = None,
) -> Admitted:
    """The four records of a new run (the caller has checked the request); ``agent_version``:
    the emitter's pin (the executor starts the run on the newest version of its line), or
    None (on the newest version the executor hosts). ``queue``: the queue the run waits in
    (seq 0 names it in its attrs, the claim and the reply say QUEUED, and the StartRun
    travels in an EnterQueue), or None."""
    run_id = mint_run_id(req.admission_key, position)
    status = RunStatus.ADMITTED if queue is None else RunStatus.QUEUED
    case_id = case_id_for(req.tenant, req.correlation_keys)
    seq0, start = run_start(
        run_id,
        capability=req.capability,
        admission_key=req.admission_key,
        tenant=req.tenant,
        initiator=req.initiator,
        input_json=req.input_json,
        now_ms=now_ms,
        case_id=case_id,
        agent_version=agent_version,
        delegation_json=req.delegation_json,  # the child runs under it (its executor enforces)
        attrs=None if queue is None else {"queue": queue},
    )
    claim = AdmissionClaim(
        admission_key=req.admission_key,
        run_id=run_id,
        case_id=case_id,
        capability=req.capability,
        tenant=req.tenant,
        status=status,
        admitted_ms=now_ms,
        updated_ms=now_ms,
        queue=queue,
    )
    reply = AdmissionReply(
        admission_key=req.admission_key,
        outcome=AdmissionOutcome.ADMITTED,
        run_id=run_id,
        case_id=case_id,
        status=status,
        replied_ms=now_ms,
        tenant=req.tenant,
    )
    enter = (
        None
        if queue is None
        else EnterQueue(queue=queue, priority=req.priority, start=start, entered_ms=now_ms)
    )
    return Admitted(claim, seq0, start, reply, enter)


def decide(
    claim: Record | None,
    key: str,
    position: Position,
    record: Record | None,
    capabilities: Mapping[str, CapabilitySpec],
    now_ms: int,
    *,
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES,
    verification: Verification = Unsigned(),
    allow_unsigned: bool = True,
    row_key: str | None = None,
) -> Decision:
    """What admission does with one record of the ``admission`` topic.

    ``claim`` is the claims-table row :func:`find_claim` found for ``key`` and the record's
    tenant (None when the key is new to it), ``row_key`` where (default: the per-tenant row).
    ``verification`` is what the record's signature headers say (``runplane.signing.admission.verify``);
    ``allow_unsigned`` is dev mode. The defaults (unsigned, allowed) are the test Driver's.
    """
    if isinstance(record, RunStatusUpdate):
        return apply_status(claim, record, row_key)
    if not isinstance(record, AdmissionRequest):
        kind = "a tombstone" if record is None else type(record).__name__
        return refusal(
            key, Refusal.BAD_REQUEST, f"expected an AdmissionRequest, got {kind}", now_ms
        )
    # Before the duplicate lookup: an unauthenticated request learns nothing of an existing run.
    tenant = record.tenant
    who = identity_problem(record, verification, allow_unsigned=allow_unsigned)
    if who is not None:
        return refusal(key, Refusal(who[0].value), who[1], now_ms, tenant)
    reserved = _claims_a_platform_key(key, verification)
    if reserved is not None:
        return refusal(key, Refusal.BAD_KEY, reserved, now_ms, tenant)
    # Only this tenant's claim makes a duplicate: another tenant's key is not this one's.
    if isinstance(claim, AdmissionClaim) and claim.tenant == tenant:
        return _duplicate(claim, key, now_ms)
    problem = _problem(key, record, capabilities, max_input_bytes)
    if problem is not None:
        return refusal(key, problem[0], problem[1], now_ms, tenant)
    # The pin (checked above), not the newest version: the executor that starts the run
    # resolves "newest" against what it hosts, so a rolling upgrade (admission on the new
    # version, an executor still on the old one) starts runs instead of stranding them.
    spec = capabilities[record.capability]  # known: _problem checked it
    return admit(record, position, now_ms, record.agent_version, spec.queue)


def apply_status(
    claim: Record | None, update: RunStatusUpdate, row_key: str | None = None
) -> Decision:
    """The executor reports where a run is; the claim follows (for duplicates' answers) in
    its row, ``row_key`` (default: the per-tenant row)."""
    if not isinstance(claim, AdmissionClaim):
        return Ignored(f"no claim for {update.admission_key!r}")
    if update.tenant is not None and update.tenant != claim.tenant:
        return Ignored(f"claim is tenant {claim.tenant!r}'s, update names {update.tenant!r}")
    if claim.run_id != update.run_id:
        return Ignored(f"claim names run {claim.run_id}, update names {update.run_id}")
    # Ordered by where in the run's chain the status changed, never by wall clock: after a
    # rebalance the new owner's clock may be behind the old one's, and a COMPLETED stamped
    # earlier than the RUNNING before it must still win. Updates without a seq (older
    # writers) are applied in arrival order: one executor at a time writes a run's updates,
    # and they land on the admission key's partition in the order they were committed.
    if update.seq is not None and claim.status_seq is not None and update.seq < claim.status_seq:
        return Ignored(f"stale update (seq {update.seq} < {claim.status_seq})")
    task_id = update.task_id if update.status == RunStatus.AWAITING_HUMAN else None
    return StatusUpdated(
        replace(
            claim,
            status=update.status,
            task_id=task_id,
            updated_ms=max(claim.updated_ms, update.updated_ms),
            status_seq=update.seq if update.seq is not None else claim.status_seq,
        ),
        row_key if row_key is not None else claim_key(claim.tenant, claim.admission_key),
        _release(claim, update),
    )


def _release(claim: AdmissionClaim, update: RunStatusUpdate) -> LeaveQueue | None:
    """A queued run's slot is released when its claim first moves to an end: only on that
    transition, so a repeated or late update releases nothing twice (the queue would ignore
    it too, by run id)."""
    if claim.queue is None or update.status not in ENDED or claim.status in ENDED:
        return None
    return LeaveQueue(
        queue=claim.queue, run_id=claim.run_id, status=update.status, left_ms=update.updated_ms
    )


def refuse_unreadable(
    key: str, fields: Mapping[str, Any] | None, error: str, now_ms: int
) -> Refused | None:
    """A request that decodes but fails validation (bad key or tenant) → a refusal.

    ``fields`` is the request read without validation (None when it could not be read at
    all: then it is not an admission request and belongs in the dead-letter topic).
    """
    if fields is None:
        return None
    if admission_key_problem(key) is not None:
        code = Refusal.BAD_KEY
    else:
        raw_key = fields.get("admission_key")
        if isinstance(raw_key, str) and admission_key_problem(raw_key) is not None:
            code = Refusal.BAD_KEY
        elif isinstance(fields.get("tenant"), str) and tenant_problem(fields["tenant"]):
            code = Refusal.BAD_TENANT
        else:
            code = Refusal.BAD_REQUEST
    stated = fields.get("tenant")
    tenant = (
        TenantId(stated) if isinstance(stated, str) and tenant_problem(stated) is None else None
    )
    return refusal(key, code, error, now_ms, tenant)


def outputs(decision: Decision) -> Sequence[tuple[str, str, Record]]:
    """(logical topic, key, record) for every record a decision writes (a claim's row is
    partitioned by its admission key: :func:`partition_key`)."""
    match decision:
        case Admitted(claim, journal, start, reply, enter):
            # A queued run's StartRun waits in its queue (the queue service sends it on).
            begin: tuple[str, str, Record] = (
                ("runs.inbox", start.session_id, start)
                if enter is None
                else ("queues.commands", enter.queue, enter)
            )
            return [
                ("admission.claims", claim_key(claim.tenant, claim.admission_key), claim),
                ("journal", journal.session_id, journal),
                begin,
                ("admission.replies", reply.admission_key, reply),
            ]
        case Duplicate(reply) | Refused(_, reply):
            return [("admission.replies", reply.admission_key, reply)]
        case StatusUpdated(claim, row_key, release):
            released = [] if release is None else [("queues.commands", release.queue, release)]
            return [("admission.claims", row_key, claim), *released]
        case Ignored():
            return []
    raise AssertionError(decision)


def partition_key(record: Record) -> str | None:
    """What an output is partitioned by when it is not its key: a claim's row lives on the
    partition of its admission key (the requests' and replies'), whatever its row key."""
    return record.admission_key if isinstance(record, AdmissionClaim | RefusedSignature) else None


def read_request_leniently(data: bytes) -> Mapping[str, Any] | None:
    """An AdmissionRequest's fields *without* validation, or None if it is not one.

    Only for answering a request that failed validation (bad key or tenant) with a refusal
    instead of silence; the result is never used to admit anything.
    """
    header = b"\xc3\x01" + schema_fingerprint(AdmissionRequest)
    if not data.startswith(header):
        return None
    try:
        fields = schemaless_reader(
            io.BytesIO(data[len(header) :]), parsed_schema(AdmissionRequest), None
        )
    except Exception:  # any parse failure means: not readable, dead-letter it
        return None
    return fields if isinstance(fields, dict) else None
