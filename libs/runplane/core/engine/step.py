"""What one engine step hands the executor: the ``Step`` (records, results, commands, live
calls, the snapshot built on first read), and the vocabulary of what goes in and out of a
run: ``Command`` (for other services) and ``Event`` (from the run's inbox)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from runplane.core.chain import INPUT_LABEL
from runplane.core.engine.table import snapshot_parts
from runplane.core.engine.values import InFlight, LiveCall, OpenRequest, doubts_to_json
from runplane.wire import (
    AdmissionRequest,
    CancelDeadline,
    CaseReply,
    CloseCase,
    CloseTask,
    ErrorInfo,
    GetCaseState,
    JournalRecord,
    MeetDeadline,
    OpenTask,
    ParkedOn,
    PutCaseState,
    RegisterDeadline,
    ResultEntry,
    RunStatus,
    RunStatusUpdate,
    SessionSnapshot,
    Signal,
    StartRun,
    TaskDecision,
    TenantId,
    UpdateAnswer,
    Wake,
)

__all__ = [
    "QUARANTINE_PREFIX",
    "TERMINAL",
    "Command",
    "Event",
    "Quarantine",
    "SnapState",
    "Step",
    "inbox_event",
]

Command = (
    OpenTask
    | CloseTask
    | GetCaseState
    | PutCaseState
    | RegisterDeadline
    | MeetDeadline
    | CancelDeadline
    | RunStatusUpdate
    | CloseCase
    | JournalRecord  # seq 0 of a successor (continue-as-new), on its own chain
    | StartRun  # ... and its start, on its own inbox
    | AdmissionRequest  # a commissioned child (engine/commission.py) → admission
    | Signal  # a child's result → its parent's inbox
    | UpdateAnswer  # an update's answer (or refusal) → its caller (engine/updates.py)
)

TERMINAL: Final = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED})

# On the wire a request to quarantine a run is a Wake on runs.inbox whose reason carries this
# prefix (the journal service sends it); the engine reads that convention in one place only.
QUARANTINE_PREFIX: Final = "quarantine:"


@dataclass(frozen=True)
class Quarantine:
    """An inbox request to quarantine the run (its chain was found broken)."""

    session_id: str
    reason: str


Event = Signal | TaskDecision | CaseReply | Wake | Quarantine


def inbox_event(event: Event) -> Event:
    """The typed event an inbox event stands for: a Wake whose reason says so is a
    ``Quarantine``; every other event is itself."""
    if not isinstance(event, Wake) or not event.reason.startswith(QUARANTINE_PREFIX):
        return event
    wake = event
    reason = wake.reason.removeprefix(QUARANTINE_PREFIX).strip()
    return Quarantine(wake.session_id, reason or "quarantined by request")


class SnapState(NamedTuple):
    """What a SessionSnapshot says, captured when a step is flushed (the runtime moves on
    after it). A plain tuple: capturing it costs a fraction of building the snapshot, which
    validates every field and encodes the in-flight call; ``build`` does that on demand."""

    session_id: str
    capability: str
    status: RunStatus
    era: int
    next_seq: int
    last_hash: str
    parked_on: ParkedOn | None
    case_id: str | None
    admission_key: str
    tenant: TenantId
    initiator: str
    input_json: str
    checkpoint_json: str | None
    output_json: str | None
    error: ErrorInfo | None
    started_ms: int
    updated_ms: int
    in_flight: InFlight | None
    pending_signals: tuple[Signal, ...]
    era_started_ms: int
    open_request: OpenRequest | None
    doubts: tuple[InFlight, ...]
    agent_version: str | None  # the version serving the run (runplane.core.versions)
    delegation_json: str | None  # the Delegation the run runs under (a commissioned child)
    parts: dict[str, Any]  # each family's part (Run.parts), written as its row's Part says

    def build(self) -> SessionSnapshot:
        # Each part as text in ``parts`` and, this release, in the fields older readers know.
        parts, old = snapshot_parts(self.parts)
        return SessionSnapshot(
            session_id=self.session_id,
            capability=self.capability,
            status=self.status,
            era=self.era,
            next_seq=self.next_seq,
            last_hash=self.last_hash,
            parked_on=self.parked_on,
            case_id=self.case_id,
            admission_key=self.admission_key,
            tenant=self.tenant,
            initiator=self.initiator,
            input_json=self.input_json,
            checkpoint_json=self.checkpoint_json,
            output_json=self.output_json,
            error=self.error,
            started_ms=self.started_ms,
            updated_ms=self.updated_ms,
            in_flight_json=None if self.in_flight is None else self.in_flight.to_json(),
            pending_signals=self.pending_signals,
            era_started_ms=self.era_started_ms,
            open_request_json=None if self.open_request is None else self.open_request.to_json(),
            doubts_json=doubts_to_json(self.doubts),
            agent_version=self.agent_version,
            delegation_json=self.delegation_json,
            parts=parts,
            **old,
        )


def snapshot_at_start(
    start: StartRun,
    *,
    status: RunStatus,
    next_seq: int,
    last_hash: str,
    now_ms: int,
    error: ErrorInfo | None = None,
    stranded_json: str | None = None,
    held_json: str | None = None,
    delegation_json: str | None = None,
) -> SessionSnapshot:
    """A snapshot of a run that never reached its runtime, taken from its StartRun: what the
    run is (session, capability, case, admission key, tenant, initiator, input, version) comes
    from the start alone; the rest is what the caller knows besides (an error, holdings)."""
    return SessionSnapshot(
        session_id=start.session_id,
        capability=start.capability,
        status=status,
        era=0,
        next_seq=next_seq,
        last_hash=last_hash,
        case_id=start.case_id,
        admission_key=start.admission_key,
        tenant=start.tenant,
        initiator=start.initiator,
        input_json=start.input_json,
        started_ms=start.admitted_ms,
        updated_ms=now_ms,
        agent_version=start.agent_version,
        error=error,
        stranded_json=stranded_json,
        held_json=held_json,
        delegation_json=delegation_json,
        # A successor's input label (its StartRun's), so a run started later from this
        # snapshot (a stranded one released) still labels its input as carried.
        parts={} if start.input_label_json is None else {INPUT_LABEL: start.input_label_json},
    )


@dataclass(frozen=True)
class Step:
    """The decisions of one engine step, to be committed together (except as
    ``performs_after_commit`` says). ``end`` is set when the run ended in this step; ``rejected``
    says why an event did not apply (nothing else in the step then)."""

    records: tuple[JournalRecord, ...]
    results: tuple[ResultEntry, ...]
    commands: tuple[Command, ...]
    live_calls: tuple[LiveCall, ...]
    # The run's state as the step left it, from which ``snapshot`` is built on first read:
    # a SessionSnapshot is validated and carries the in-flight call as canonical JSON, which
    # a caller that never reads it (a replay, a rejected event) need not pay for.
    # (A step the engine builds around an existing snapshot — fail_from_snapshot — holds it.)
    _state: SnapState | SessionSnapshot = field(repr=False, compare=False)
    parked_on: ParkedOn | None
    end: RunStatus | None
    replayed: int
    rejected: str | None = None
    # Why, as a typed code for metrics, when it is not just "does not apply": "signals_full".
    rejected_kind: str | None = None

    @property
    def snapshot(self) -> SessionSnapshot:
        """The run's snapshot after this step (what the executor writes to ``sessions``);
        built once, on first read, from the state captured when the step was flushed."""
        # Cached by hand: functools.cached_property takes a lock on every first read (3.11).
        built: SessionSnapshot | None = self.__dict__.get("_built")
        if built is None:
            state = self._state
            built = state if isinstance(state, SessionSnapshot) else state.build()
            object.__setattr__(self, "_built", built)
        return built

    @property
    def announce_first(self) -> bool:
        """True when one of this step's live calls must have its announce durable before it is
        performed (whether the step waits for its commit is ``performs_after_commit``)."""
        return any(call.announce_first for call in self.live_calls)

    @property
    def records_cost(self) -> bool:
        """True when this step records an outcome that was paid for (a generation's, with its
        cost): it must be durable before any of its live calls is performed, announce or
        not — else a crash during those calls (an agent loop's reads, fanned out, whose
        announce rides with their outcome) loses it with them, and the turn is paid again."""
        return any(r.cost is not None for r in self.records)

    def performs_after_commit(self, call: LiveCall) -> bool:
        """Whether ``call``, one of this step's live calls, waits until the step is durable:
        its announce must be (announce-before-act), or the step records a paid outcome
        (``records_cost``). The one rule the executor and the Driver both follow."""
        return call.announce_first or self.records_cost
