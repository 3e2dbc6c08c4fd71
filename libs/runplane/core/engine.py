"""The replay engine: given a run's recorded history and one input, decide what happens next.

A ``Runtime`` is one run's live coroutine plus the state needed to extend its chain. It is
pure: it never reads a clock (every public method takes ``now_ms``), never performs a call,
never touches Kafka. Each public method returns a ``Step`` — the decisions the executor
carries out: journal records (already sealed and chained), result entries, commands for
other services, live calls to perform, the new snapshot.

Every effect the agent awaits takes the next ``call_seq`` of the era and goes through the
three-way branch of seed 001:

1. slot (era, call_seq) in the result journal → **replay**: family, name and request witness
   must equal the record's, then the recorded value is returned (or the recorded failure
   re-raised). Any difference → the run is **quarantined** with a positioned diagnostic;
   the call is never answered.
2. slot announced but not recorded (``in_flight`` in the snapshot) → **in doubt**: the
   effect's declared recovery decides (retry / reconcile with the probe / operator task).
3. slot absent → **live**: the handler of the effect's kind runs (see ``_LIVE``).

Announce before act (``LiveCall.announce_first``): a live call emits EFFECT_ANNOUNCED in the
step that requests it. If its recovery is ``retry`` the executor may perform the call first
and commit the announce together with the outcome (a crash loses both and the call is made
again — harmless by declaration). For ``reconcile`` and ``requires_operator`` the executor
must commit the step *before* performing the call, so that a crash leaves an announce to be
found in doubt instead of an invisible applied effect.

Checkpointed runs are restored in a new era from their last checkpoint; in that era a tool,
approval, case or deadline call whose (family, name, witness) was recorded in an earlier era
is served from that record (the side-effect log), so a recorded mutation is never applied
twice; generations and observations are re-executed.

**Asked once.** A request sent to another service and not yet answered — an approval task,
a case command (state read/write, deadline register/meet/cancel) — is the run's
``OpenRequest``, persisted in the snapshot with its witness. A checkpointed restore does not
forget it: when the new era issues the same request again (same family, name and witness),
the run *adopts* it — parks on the old task id / request id, sends nothing, opens no second
task — so a person is asked once and the old task's decision resumes the run. An answer that
arrives before the new era has reached the request again is journaled at the request's own
slot (its era and call_seq) and served from there through the side-effect log. A carried
task the new era never asks for again is withdrawn (``CloseTask``) when superseded or when the
run ends. (Carrying is chosen over accepting a late decision for a re-opened task because the
latter still shows the same question twice on the worklist.) Operator tasks for calls in
doubt are not carried: the new era runs the call's recovery again (the old task is withdrawn).

**In doubt until resolved.** A checkpointed restore that finds an announced call with no
outcome journals EFFECT_IN_DOUBT for it (at the announce's own era and call_seq, before
RUN_RESTORED) and carries it in the snapshot (``doubts_json``) — not in memory — through any
number of further restores, until an era issues the same call (family, name, witness) again:
then its declared recovery runs (retry / probe / operator task) before it can be performed
live. A doubt the run never reaches again is named in its end record (``in_doubt``). An
operator's RETRY verdict is announced again and committed before the call is performed
(``announce_first``), so a crash after the act finds the call in doubt again instead of
re-reading the verdict and performing it once more; a repeated operator task for the same slot
gets a new id (``…/operator/<n>``).
"""

from __future__ import annotations

import contextlib
import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, NamedTuple

from runplane.core.agents import AgentSpec, Durability, EffectDecl, Recovery, RetryPolicy, evictable
from runplane.core.canonical import canonical_json
from runplane.core.chain import body_digest, default_label, record_hash, request_witness
from runplane.core.ctx import (
    ApprovalExpired,
    CaseConflict,
    CaseRefused,
    CaseState,
    Decision,
    Effect,
    EffectError,
    StepCtx,
)
from runplane.core.determinism import session_seed
from runplane.core.labels import at_source, join
from runplane.errors import CalendarError, TerminalError
from runplane.wire import (
    ZERO_HASH,
    CancelDeadline,
    CaseReply,
    CloseTask,
    Cost,
    DecisionOutcome,
    ErrorInfo,
    ExpiryPolicy,
    GetCaseState,
    JournalKind,
    JournalRecord,
    Label,
    MeetDeadline,
    OpenTask,
    ParkedOn,
    ParkKind,
    PutCaseState,
    RegisterDeadline,
    ResultEntry,
    RunStatus,
    RunStatusUpdate,
    SessionSnapshot,
    Signal,
    StartRun,
    TaskDecision,
    TaskKind,
    Wake,
)

__all__ = [
    "Command",
    "Event",
    "InFlight",
    "LiveCall",
    "OpenRequest",
    "Outcome",
    "ReplayReport",
    "Runtime",
    "Step",
    "replay_history",
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
)
Event = Signal | TaskDecision | CaseReply | Wake

TERMINAL: Final = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED})
# Families reconstructed through the side-effect log across eras (checkpointed restores).
_CROSS_ERA: Final = frozenset({"tool", "approval", "case", "deadline", "signal"})
_WALL_UNITS_MS: Final = {"minutes": 60_000, "hours": 3_600_000, "days": 86_400_000}
# Signals sent before the run waits for them, kept in its snapshot; more are refused.
MAX_BUFFERED_SIGNALS: Final = 256
_GENERATION_DECL: Final = EffectDecl(
    "generation", mutating=False, recovery=Recovery.RETRY, timeout_s=120.0
)


class _Quarantined(TerminalError):
    """Internal: a divergence was found; carries the positioned diagnostic."""


@dataclass(frozen=True)
class Outcome:
    """What the executor learned from performing a live call (retries already collapsed)."""

    ok: bool
    value: Any = None
    error: ErrorInfo | None = None
    attempts: int = 1
    cost: Cost | None = None
    label: Label | None = None

    def __post_init__(self) -> None:
        if self.ok == (self.error is not None):
            raise ValueError("an Outcome is ok with no error, or failed with an error")
        if self.attempts < 1:
            raise ValueError("attempts must be >= 1")

    @classmethod
    def success(
        cls, value: Any, *, attempts: int = 1, cost: Cost | None = None, label: Label | None = None
    ) -> Outcome:
        return cls(ok=True, value=value, attempts=attempts, cost=cost, label=label)

    @classmethod
    def failure(
        cls,
        type_: str,
        message: str,
        *,
        retryable: bool = False,
        attempts: int = 1,
        cost: Cost | None = None,
    ) -> Outcome:
        return cls(
            ok=False,
            error=ErrorInfo(type=type_, message=message, retryable=retryable),
            attempts=attempts,
            cost=cost,
        )


@dataclass(frozen=True)
class LiveCall:
    """A call the executor must perform, then report with ``Runtime.complete``.

    ``family``: generation (``target`` = provider name; request: provider, model, prompt,
    params), tool (``target`` = tool name; request: tool, args, idempotency_key) or probe
    (``target`` = the probe tool; request: tool, args and idempotency_key of the call in
    doubt, plus probe_for; its Outcome value: ``None`` = never happened, any other value = it
    happened and that is its result, or explicitly ``{"applied": bool, "result": value}``).
    ``announce_first``: commit this step before performing the call (see module docstring).
    ``idempotency_key``: the key to perform the call under (tools and probes): the agent's own
    key, or — for a mutating call that named none — ``<session>/<origin>``, where origin is
    the ``era/call_seq`` of the call's *first* announce. It is the same on every attempt, every
    replay, every owner, for the probe of a call in doubt, and in the later era a doubt is
    carried into (its slot moves, its origin does not), so a peer can deduplicate and a probe
    can look the call up.
    """

    session_id: str
    era: int
    call_seq: int
    family: str
    name: str
    target: str
    request: Mapping[str, Any]
    witness: str
    mutating: bool
    recovery: Recovery
    retry: RetryPolicy
    timeout_s: float
    announce_first: bool
    idempotency_key: str | None = None


@dataclass(frozen=True)
class InFlight:
    """An announced call with no recorded outcome (persisted in the snapshot: the current
    era's as ``in_flight_json``, earlier eras' unresolved ones in ``doubts_json``).

    ``origin``: ``"era/call_seq"`` of the announce first found in doubt (a doubt carried into a
    new era moves to a new slot but keeps it). ``asks``: operator tasks already opened for
    this slot — a repeat gets a new task id, because the worklist ignores an OpenTask whose id
    it has seen (a run parked on an already decided task would wait forever).
    """

    era: int
    call_seq: int
    family: str
    name: str
    witness: str
    recovery: Recovery
    origin: str = ""
    asks: int = 0

    def __post_init__(self) -> None:
        if not self.origin:
            object.__setattr__(self, "origin", f"{self.era}/{self.call_seq}")
        if self.asks < 0:
            raise ValueError("InFlight.asks must be >= 0")

    def key(self) -> tuple[str, str, str]:
        return (self.family, self.name, self.witness)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "era": self.era,
            "call_seq": self.call_seq,
            "family": self.family,
            "name": self.name,
            "witness": self.witness,
            "recovery": str(self.recovery),
        }
        # Written only when they say something, so a snapshot with a plain in-flight call reads
        # the same as before doubts were carried.
        if self.origin != f"{self.era}/{self.call_seq}":
            d["origin"] = self.origin
        if self.asks:
            d["asks"] = self.asks
        return d

    def to_json(self) -> str:
        return canonical_json(self.to_dict())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InFlight:
        return cls(
            int(d["era"]),
            int(d["call_seq"]),
            str(d["family"]),
            str(d["name"]),
            str(d["witness"]),
            Recovery(d["recovery"]),
            str(d.get("origin") or ""),
            int(d.get("asks", 0)),
        )

    @classmethod
    def from_json(cls, text: str) -> InFlight:
        return cls.from_dict(json.loads(text))


def _doubts_to_json(doubts: Sequence[InFlight]) -> str | None:
    return canonical_json([d.to_dict() for d in doubts]) if doubts else None


def _doubts_from_json(text: str | None) -> list[InFlight]:
    return [InFlight.from_dict(d) for d in json.loads(text)] if text else []


@dataclass(frozen=True)
class OpenRequest:
    """A request the run sent and waits an answer for (persisted as ``open_request_json``).

    ``kind``: ``task`` (an approval; ``ref`` = task id) or ``case`` (a case command; ``ref`` =
    request id). ``era``/``call_seq``: the slot it was issued at — an early answer after a
    checkpointed restore is journaled there. ``value``: what the answer alone cannot
    rebuild (a deadline's resolved instant, resolved once when the request was issued).
    """

    kind: str
    ref: str
    era: int
    call_seq: int
    family: str
    name: str
    witness: str
    value: Any = None

    def __post_init__(self) -> None:
        if self.kind not in ("task", "case"):
            raise ValueError(f"OpenRequest.kind must be task or case, got {self.kind!r}")
        if not self.ref:
            raise ValueError("OpenRequest.ref must not be empty")

    def matches(self, effect: Effect, witness: str) -> bool:
        return (self.family, self.name, self.witness) == (effect.family, effect.name, witness)

    def to_json(self) -> str:
        return canonical_json(
            {
                "kind": self.kind,
                "ref": self.ref,
                "era": self.era,
                "call_seq": self.call_seq,
                "family": self.family,
                "name": self.name,
                "witness": self.witness,
                "value": self.value,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> OpenRequest:
        d = json.loads(text)
        return cls(
            str(d["kind"]),
            str(d["ref"]),
            int(d["era"]),
            int(d["call_seq"]),
            str(d["family"]),
            str(d["name"]),
            str(d["witness"]),
            d.get("value"),
        )


class _SnapState(NamedTuple):
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
    tenant: str
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

    def build(self) -> SessionSnapshot:
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
            doubts_json=_doubts_to_json(self.doubts),
        )


@dataclass(frozen=True)
class Step:
    """The decisions of one engine step, to be committed together (except as
    ``announce_first`` says). ``end`` is set when the run ended in this step; ``rejected``
    says why an event did not apply (nothing else in the step then)."""

    records: tuple[JournalRecord, ...]
    results: tuple[ResultEntry, ...]
    commands: tuple[Command, ...]
    live_calls: tuple[LiveCall, ...]
    # The run's state as the step left it, from which ``snapshot`` is built on first read:
    # a SessionSnapshot is validated and carries the in-flight call as canonical JSON, which
    # a caller that never reads it (a replay, a rejected event) need not pay for.
    _state: _SnapState = field(repr=False, compare=False)
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
            built = self._state.build()
            object.__setattr__(self, "_built", built)
        return built

    @property
    def announce_first(self) -> bool:
        """True when this step must be durable before any of its live calls is performed."""
        return any(call.announce_first for call in self.live_calls)


@dataclass
class _Wait:
    """What the suspended coroutine waits for."""

    kind: str  # live | probe | signal | approval | operator | case
    effect: Effect
    call_seq: int
    witness: str
    decl: EffectDecl | None = None
    value: Any = None  # case waits: the OpenRequest's value (a deadline's resolved instant)


class _Out:
    """What one step accumulates (two per step: a plain class, not default factories)."""

    __slots__ = ("commands", "live", "records", "replayed", "results")

    def __init__(self) -> None:
        self.records: list[JournalRecord] = []
        self.results: list[ResultEntry] = []
        self.commands: list[Command] = []
        self.live: list[LiveCall] = []
        self.replayed = 0


_Resolution = tuple[str, Any]  # ("value", v) | ("throw", exc) | ("suspend", None)
_SUSPEND: Final[_Resolution] = ("suspend", None)


class _Mark(NamedTuple):
    """What ``Runtime._dispatch`` may change, taken before it runs so that a handler raising
    halfway can be undone (``Runtime._dispatch_guarded``). Records already sealed are dropped
    from the step and the chain tip goes back with them: nothing of it was ever emitted.
    A tuple, not a frozen dataclass: one is taken per effect, and a frozen dataclass sets its
    fields one ``object.__setattr__`` at a time."""

    cursor: int
    next_seq: int
    last_hash: str
    outs: tuple[int, int, int, int]
    status: RunStatus
    parked: ParkedOn | None
    in_flight: InFlight | None
    open: OpenRequest | None
    waiting: _Wait | None
    pending_live: LiveCall | None
    pending: tuple[Signal, ...]
    doubts: tuple[InFlight, ...]
    checkpoint_json: str | None
    clock_ms: int

    @classmethod
    def take(cls, rt: Runtime) -> _Mark:
        o = rt._out
        return cls(
            rt._cursor,
            rt._next_seq,
            rt._last_hash,
            (len(o.records), len(o.results), len(o.commands), len(o.live)),
            rt._status,
            rt._parked,
            rt._in_flight,
            rt._open,
            rt._waiting,
            rt._pending_live,
            tuple(rt._pending),
            tuple(rt._doubts),
            rt._checkpoint_json,
            rt.clock_ms,
        )

    def restore(self, rt: Runtime) -> None:
        o = rt._out
        for entry in o.results[self.outs[1] :]:
            rt.results.pop((entry.era, entry.call_seq), None)
        del (
            o.records[self.outs[0] :],
            o.results[self.outs[1] :],
            o.commands[self.outs[2] :],
            o.live[self.outs[3] :],
        )
        rt._cursor, rt._next_seq, rt._last_hash = self.cursor, self.next_seq, self.last_hash
        rt._status, rt._parked, rt._in_flight, rt._open = (
            self.status,
            self.parked,
            self.in_flight,
            self.open,
        )
        rt._waiting, rt._pending_live = self.waiting, self.pending_live
        rt._pending, rt._doubts = list(self.pending), list(self.doubts)
        rt._checkpoint_json, rt.clock_ms = self.checkpoint_json, self.clock_ms


class Calendars:
    """The calendar lookup ``ctx.deadline`` needs: ``resolve(name, rule, start_ms) ->
    (due_ms, digest)``. Any object with that method works (``CalendarRegistry`` does)."""

    def resolve(self, name: str, rule: Mapping[str, Any], start_ms: int) -> tuple[int, str]:
        raise NotImplementedError


class Runtime:
    """One run's resident runtime. Build with ``Runtime.start`` or ``Runtime.restore``."""

    def __init__(
        self,
        spec: AgentSpec,
        *,
        session_id: str,
        case_id: str | None,
        admission_key: str,
        tenant: str,
        initiator: str,
        input_json: str,
        started_ms: int,
        era: int,
        next_seq: int,
        last_hash: str,
        results: Mapping[tuple[int, int], ResultEntry],
        calendars: Any = None,
        tools: Mapping[str, EffectDecl] | None = None,
    ) -> None:
        self.spec = spec
        self.session_id = session_id
        self.case_id = case_id
        self.admission_key = admission_key
        self.tenant = tenant
        self.initiator = initiator
        self.input_json = input_json
        self.started_ms = started_ms
        self.era = era
        self.seed = session_seed(session_id)
        # The label of every record the engine writes without one of its own.
        self._label = default_label([f"agent/{spec.capability}"])
        # at_source labels by (family, name): a Label is immutable, so one per source is shared.
        self._source_labels: dict[tuple[str, str], Label] = {}
        self.clock_ms = started_ms
        self.restored: Any = None
        self.results: dict[tuple[int, int], ResultEntry] = dict(results)
        self._max_slot: dict[int, int] = {}
        for e, s in self.results:
            self._max_slot[e] = max(self._max_slot.get(e, -1), s)
        self._calendars = calendars
        self._tools = dict(tools or {})
        self._next_seq = next_seq
        self._last_hash = last_hash
        self._status = RunStatus.RUNNING
        self._parked: ParkedOn | None = None
        self._in_flight: InFlight | None = None
        self._open: OpenRequest | None = None
        self._pending: list[Signal] = []
        self._checkpoint_json: str | None = None
        self._output_json: str | None = None
        self._error: ErrorInfo | None = None
        self._updated_ms = started_ms
        self._cursor = 0
        self._coro: Any = None
        self._waiting: _Wait | None = None
        self._fault: str | None = None
        self._prior: dict[tuple[str, str, str], deque[ResultEntry]] = {}
        # Calls announced in earlier eras and never resolved (see _new_era): durable in the
        # snapshot until the new era re-reaches the call and its recovery resolves it.
        self._doubts: list[InFlight] = []
        self._verify_only = False
        self._pending_live: LiveCall | None = None
        self._decoded: tuple[ResultEntry, Any] | None = None  # see _record
        self._era_started_ms = 0  # 0: the era began at started_ms (era 0)
        self._now = started_ms
        self._out = _Out()
        self._status_before = self._status

    # ------------------------------------------------------------------ construction
    @classmethod
    def start(
        cls,
        spec: AgentSpec,
        start: StartRun,
        *,
        now_ms: int,
        calendars: Any = None,
        tools: Mapping[str, EffectDecl] | None = None,
    ) -> tuple[Runtime, Step]:
        """A new run from its StartRun (seq 0 was written by admission; we continue at 1)."""
        rt = cls(
            spec,
            session_id=start.session_id,
            case_id=start.case_id,
            admission_key=start.admission_key,
            tenant=start.tenant,
            initiator=start.initiator,
            input_json=start.input_json,
            started_ms=start.admitted_ms,
            era=0,
            next_seq=1,
            last_hash=start.admitted_hash,
            results={},
            calendars=calendars,
            tools=tools,
        )
        rt._begin(now_ms)
        rt._status_before = RunStatus.ADMITTED
        rt._launch()
        return rt, rt._flush()

    @classmethod
    def restore(
        cls,
        spec: AgentSpec,
        snapshot: SessionSnapshot,
        results: Mapping[tuple[int, int], ResultEntry],
        *,
        now_ms: int,
        calendars: Any = None,
        tools: Mapping[str, EffectDecl] | None = None,
    ) -> tuple[Runtime, Step]:
        """Rebuild a non-resident run from its snapshot and result journal.

        Replayable: replay in the same era — O(k) lookups, zero live calls — up to where the
        run was (parked: stays parked, nothing re-sent; a call in doubt: its recovery).
        Checkpointed: a new era from the last checkpoint (RUN_RESTORED), tools through the
        side-effect log. A finished run cannot be restored (``TerminalError``); use
        ``replay_history`` to check one.
        """
        if snapshot.status in TERMINAL:
            raise TerminalError(f"run {snapshot.session_id} already ended ({snapshot.status})")
        rt = cls._from_snapshot(spec, snapshot, results, calendars=calendars, tools=tools)
        rt._begin(now_ms)
        if spec.durability is Durability.CHECKPOINTED:
            rt._new_era(snapshot)
        rt._launch()
        return rt, rt._flush()

    @classmethod
    def _from_snapshot(
        cls,
        spec: AgentSpec,
        snapshot: SessionSnapshot,
        results: Mapping[tuple[int, int], ResultEntry],
        *,
        calendars: Any,
        tools: Mapping[str, EffectDecl] | None,
    ) -> Runtime:
        rt = cls(
            spec,
            session_id=snapshot.session_id,
            case_id=snapshot.case_id,
            admission_key=snapshot.admission_key,
            tenant=snapshot.tenant,
            initiator=snapshot.initiator,
            input_json=snapshot.input_json,
            started_ms=snapshot.started_ms,
            era=snapshot.era,
            next_seq=snapshot.next_seq,
            last_hash=snapshot.last_hash,
            results=results,
            calendars=calendars,
            tools=tools,
        )
        rt._status = snapshot.status
        rt._status_before = snapshot.status
        rt._parked = snapshot.parked_on
        rt._in_flight = (
            InFlight.from_json(snapshot.in_flight_json) if snapshot.in_flight_json else None
        )
        rt._open = (
            OpenRequest.from_json(snapshot.open_request_json)
            if snapshot.open_request_json
            else None
        )
        rt._doubts = _doubts_from_json(snapshot.doubts_json)
        rt._pending = list(snapshot.pending_signals)
        rt._checkpoint_json = snapshot.checkpoint_json
        rt._output_json = snapshot.output_json
        rt._error = snapshot.error
        rt._updated_ms = snapshot.updated_ms
        rt._era_started_ms = snapshot.era_started_ms
        rt.clock_ms = snapshot.era_started_ms if snapshot.era_started_ms else snapshot.started_ms
        return rt

    def _new_era(self, snapshot: SessionSnapshot) -> None:
        old = self.era
        self.era = old + 1
        self._prior = {
            key: deque(entries) for key, entries in _side_effect_log(self.results, self.era).items()
        }
        found, self._in_flight = self._in_flight, None
        if found is not None:
            # The durable fact, journaled before anything of the new era: this announce has no
            # outcome. It joins the doubts carried in the snapshot, so a crash before the new
            # era re-reaches the call cannot turn it into a fresh live call (issue 3).
            self._emit(
                JournalKind.EFFECT_IN_DOUBT,
                era=found.era,
                call_seq=found.call_seq,
                family=found.family,
                name=found.name,
                request_witness=found.witness,
                attrs={"recovery": str(found.recovery), "found": "restore", "origin": found.origin},
            )
            self._doubts.append(found)
        parked = self._parked
        if parked is not None and parked.kind is ParkKind.OPERATOR:
            # Operator tasks are not carried: the new era runs the call's recovery again (a probe
            # may answer now) and asks anew if it must. The old question is withdrawn.
            self._out.commands.append(
                CloseTask(
                    task_id=parked.ref,
                    reason=f"superseded: run restored in era {self.era}",
                    at_ms=self._now,
                )
            )
        # The open request (task or case command) stays in ``_open``: the new era adopts it when
        # it issues the same request again (see "Asked once" in the module docstring).
        self._parked = None
        self._status = RunStatus.RUNNING
        self.restored = json.loads(snapshot.checkpoint_json) if snapshot.checkpoint_json else None
        self.clock_ms = self._now  # a fresh era's first observation is the restore's stamp
        self._era_started_ms = self._now
        attrs = {"from_era": str(old), "checkpoint": "yes" if self.restored is not None else "no"}
        if self._doubts:
            attrs["in_doubt"] = ",".join(d.origin for d in self._doubts)
        self._emit(JournalKind.RUN_RESTORED, attrs=attrs)

    # ------------------------------------------------------------------ public API
    @property
    def status(self) -> RunStatus:
        return self._status

    @property
    def parked_on(self) -> ParkedOn | None:
        return self._parked

    @property
    def outstanding(self) -> LiveCall | None:
        """The live call this run waits for (None when parked on something else or idle)."""
        return (
            None
            if self._waiting is None or self._waiting.kind not in ("live", "probe")
            else self._pending_live
        )

    @property
    def ended(self) -> bool:
        return self._status in TERMINAL

    def evictable(self, idle_for_s: float, grace_s: float) -> bool:
        """The pure eviction rule applied to this runtime (see ``agents.evictable``)."""
        return evictable(self.spec.durability, idle_for_s, grace_s, self.outstanding is not None)

    def snapshot(self) -> SessionSnapshot:
        """The run's current snapshot (what the executor writes to ``sessions``)."""
        return self._capture().build()

    def _capture(self) -> _SnapState:
        # Everything captured is immutable or copied: _pending and _doubts change in place.
        return _SnapState(
            self.session_id,
            self.spec.capability,
            self._status,
            self.era,
            self._next_seq,
            self._last_hash,
            self._parked,
            self.case_id,
            self.admission_key,
            self.tenant,
            self.initiator,
            self.input_json,
            self._checkpoint_json,
            self._output_json,
            self._error,
            self.started_ms,
            self._updated_ms,
            self._in_flight,
            tuple(self._pending) if self._pending else (),
            self._era_started_ms,
            self._open,
            tuple(self._doubts) if self._doubts else (),
        )

    def complete(self, call_seq: int, outcome: Outcome, *, now_ms: int) -> Step:
        """The executor performed the outstanding live call ``call_seq``; record and go on."""
        self._begin(now_ms)
        wait = self._waiting
        if wait is None or wait.kind not in ("live", "probe") or wait.call_seq != call_seq:
            return self._flush(rejected=f"no live call outstanding at call_seq {call_seq}")
        self._waiting = None
        self._pending_live = None
        if wait.kind == "probe":
            self._run(self._probe_done(wait, outcome))
        else:
            entry = self._record(
                wait.effect,
                call_seq,
                wait.witness,
                JournalKind.EFFECT_RECORDED,
                outcome.ok,
                outcome.value,
                outcome.error,
                attempts=outcome.attempts,
                cost=outcome.cost,
                label=outcome.label,
            )
            self._in_flight = None
            self._run(self._resolve(wait.effect, entry))
        return self._flush()

    def in_doubt(self, call_seq: int, *, now_ms: int) -> Step:
        """The executor performed the outstanding live call ``call_seq`` and cannot tell whether
        it took effect (a timeout after sending, a 5xx): its declared recovery runs now —
        retry, probe or operator task — exactly as for an announce found without outcome on
        restore, but at the same era and slot. Nothing is rebuilt: a checkpointed run does not
        start a new era (which would re-execute, and re-pay, everything since its checkpoint)."""
        self._begin(now_ms)
        wait = self._waiting
        if wait is None or wait.kind != "live" or wait.call_seq != call_seq:
            return self._flush(rejected=f"no live call outstanding at call_seq {call_seq}")
        flight = self._in_flight
        if flight is not None and (flight.era, flight.call_seq) == (self.era, call_seq):
            recovery = flight.recovery
        else:  # pragma: no cover - every live call is announced first (see _live)
            recovery = (
                wait.decl.effective_recovery
                if wait.decl is not None
                else Recovery.REQUIRES_OPERATOR
            )
        self._waiting = None
        self._pending_live = None
        try:
            resolution = self._in_doubt(wait.effect, call_seq, wait.witness, recovery)
        except Exception as exc:  # as in _dispatch_guarded: never an exception out of the engine
            self._fail(
                ErrorInfo(
                    type="InvalidRequest",
                    message=f"in-doubt recovery failed: {type(exc).__name__}: {exc}"[:500],
                    retryable=False,
                )
            )
            return self._flush()
        self._run(resolution)
        return self._flush()

    def deliver(self, event: Event, *, now_ms: int) -> Step:
        """An inbox event for this run: a signal, a task decision, a case reply or a wake."""
        self._begin(now_ms)
        if event.session_id != self.session_id:
            return self._flush(
                rejected=f"event for session {event.session_id!r} delivered to {self.session_id!r}"
            )
        if self.ended:
            return self._flush(rejected=f"run already ended ({self._status})")
        if isinstance(event, Signal):
            problem = self._on_signal(event)
            if problem:
                return self._flush(rejected=problem, rejected_kind="signals_full")
        elif isinstance(event, TaskDecision):
            problem = self._on_decision(event)
            if problem:
                return self._flush(rejected=problem)
        elif isinstance(event, CaseReply):
            problem = self._on_case_reply(event)
            if problem:
                return self._flush(rejected=problem)
        elif isinstance(event, Wake):
            if event.reason.startswith("quarantine:"):
                self._quarantine(
                    event.reason.removeprefix("quarantine:").strip() or "quarantined by request"
                )
        else:  # pragma: no cover - typed callers cannot get here
            return self._flush(rejected=f"unknown event type {type(event).__name__}")
        return self._flush()

    def quarantine(self, reason: str, *, now_ms: int) -> Step:
        """Quarantine the run from outside (e.g. the journal service found its chain broken)."""
        self._begin(now_ms)
        if not self.ended:
            self._quarantine(reason)
        return self._flush()

    def close(self) -> None:
        """Drop the coroutine (eviction). ``GeneratorExit`` runs the agent's ``finally``s."""
        if self._coro is not None:
            self._coro.close()
            self._coro = None

    # ------------------------------------------------------------------ driving the agent
    def _begin(self, now_ms: int) -> None:
        self._now = now_ms
        self._updated_ms = now_ms
        self._out = _Out()
        self._status_before = self._status

    def _launch(self) -> None:
        ctx = StepCtx(self)
        try:
            value = json.loads(self.input_json)
            self._coro = self.spec.fn(ctx, value)
            if not hasattr(self._coro, "send"):
                raise TypeError(f"agent {self.spec.capability!r} must be an async def")
        except Exception as exc:
            self._fail(ErrorInfo(type=type(exc).__name__, message=str(exc), retryable=False))
            return
        self._run(("value", None))

    def _run(self, resolution: _Resolution) -> None:
        """Drive the coroutine until it suspends on something outside, or ends."""
        try:
            while resolution[0] != "suspend" and self._coro is not None:
                try:
                    if resolution[0] == "throw":
                        request = self._coro.throw(resolution[1])
                    else:
                        request = self._coro.send(resolution[1])
                except StopIteration as stop:
                    self._finish(stop.value)
                    return
                except Exception as exc:
                    if self._fault is not None:
                        raise _Quarantined(self._fault) from None
                    self._fail(_error_info(exc))
                    return
                if self._fault is not None:
                    raise _Quarantined(self._fault)
                if not isinstance(request, Effect):
                    self._fail(
                        ErrorInfo(
                            type="TerminalError",
                            message=f"agents may only await StepCtx effects, got {type(request).__name__}",
                            retryable=False,
                        )
                    )
                    return
                resolution = self._dispatch_guarded(request)
        except _Quarantined as q:
            self._quarantine(str(q))

    def _dispatch_guarded(self, effect: Effect) -> _Resolution:
        """``_dispatch``, where a bad argument is the agent's error, never the engine's crash.

        An exception out of a handler (``int("x")`` for an expected version, a wire record's
        validator refusing a field) would otherwise escape ``Runtime`` and crash the executor
        on the same inbox record again and again (a poison pill). Whatever the handler did
        before raising is undone; then the failure is *recorded* at the call's slot, so a
        replay serves the same failure instead of meeting an empty slot followed by later
        calls (which would quarantine the run). A slot that already holds something (a
        replayed result, a call in doubt, a park) cannot take a record: the run fails.
        """
        mark = _Mark.take(self)
        try:
            return self._dispatch(effect)
        except _Quarantined:
            raise
        except Exception as exc:
            mark.restore(self)
            error = ErrorInfo(
                type="InvalidRequest",
                message=f"{effect.family}:{effect.name}: {type(exc).__name__}: {exc}"[:500],
                retryable=False,
            )
            call_seq = mark.cursor
            self._cursor = call_seq + 1
            if self._slot_taken(call_seq) or self._verify_only:
                self._fail(error)
                return _SUSPEND
            try:
                witness = request_witness(effect.request)
            except (TypeError, ValueError):  # _dispatch answers that itself; belt and braces
                self._fail(error)
                return _SUSPEND
            entry = self._record(
                effect, call_seq, witness, JournalKind.EFFECT_RECORDED, False, None, error
            )
            return self._resolve(effect, entry)

    def take_derived_slot(self, family: str) -> int:
        """A call_seq for a derived (unjournaled) draw; notes a divergence if history has a
        journaled call there (the engine quarantines at the agent's next suspension)."""
        call_seq = self._cursor
        self._cursor += 1
        if self._fault is None and self._slot_taken(call_seq):
            self._fault = self._diverged(
                call_seq, f"{family} (derived, unjournaled)", self._slot_desc(call_seq)
            )
        return call_seq

    def _slot_taken(self, call_seq: int) -> bool:
        if (self.era, call_seq) in self.results:
            return True
        for mark in (self._in_flight, self._parked):
            if mark is not None and mark.era == self.era and mark.call_seq == call_seq:
                return True
        return False

    def _slot_desc(self, call_seq: int) -> str:
        entry = self.results.get((self.era, call_seq))
        if entry is not None:
            return f"{entry.family}:{entry.name} (witness {entry.request_witness[:12]})"
        if self._in_flight is not None and self._in_flight.call_seq == call_seq:
            return f"{self._in_flight.family}:{self._in_flight.name} (announced, witness {self._in_flight.witness[:12]})"
        return "a parked call"

    def _diverged(self, call_seq: int, issued: str, recorded: str) -> str:
        return f"non-determinism at era {self.era} call_seq {call_seq}: history has {recorded}, agent issued {issued}"

    def _dispatch(self, effect: Effect) -> _Resolution:
        call_seq = self._cursor
        self._cursor += 1
        try:
            witness = request_witness(effect.request)
        except (TypeError, ValueError) as exc:
            return ("throw", EffectError("InvalidRequest", f"request is not canonical JSON: {exc}"))
        entry = self.results.get((self.era, call_seq))
        if entry is not None:
            if (
                entry.family != effect.family
                or entry.name != effect.name
                or entry.request_witness != witness
            ):
                raise _Quarantined(
                    self._diverged(
                        call_seq,
                        f"{effect.family}:{effect.name} (witness {witness[:12]})",
                        self._slot_desc(call_seq),
                    )
                )
            self._out.replayed += 1
            self.clock_ms = entry.stamp_ms
            return self._resolve(effect, entry)
        if self._verify_only:
            raise _Quarantined(
                f"history ends at era {self.era} call_seq {call_seq}: agent issued {effect.family}:{effect.name}, which was never recorded"
            )
        flight = self._in_flight
        if flight is not None and flight.era == self.era and flight.call_seq == call_seq:
            if (flight.family, flight.name, flight.witness) != (
                effect.family,
                effect.name,
                witness,
            ):
                raise _Quarantined(
                    self._diverged(
                        call_seq,
                        f"{effect.family}:{effect.name} (witness {witness[:12]})",
                        self._slot_desc(call_seq),
                    )
                )
            if (
                self._parked is not None
                and self._parked.kind is ParkKind.OPERATOR
                and self._parked.call_seq == call_seq
            ):
                self._waiting = _Wait("operator", effect, call_seq, witness, self._decl(effect))
                return _SUSPEND
            return self._in_doubt(effect, call_seq, witness, flight.recovery)
        parked = self._parked
        if parked is not None and parked.era == self.era and parked.call_seq == call_seq:
            # Rebuilding a parked run: its command was sent when it parked; just wait again.
            kind = {
                ParkKind.SIGNAL: "signal",
                ParkKind.TASK: "approval",
                ParkKind.CASE_REPLY: "case",
            }.get(parked.kind, "signal")
            value = (
                self._open.value
                if self._open is not None and self._open.ref == parked.ref
                else None
            )
            self._waiting = _Wait(kind, effect, call_seq, witness, value=value)
            return _SUSPEND
        if self._max_slot.get(self.era, -1) > call_seq:
            raise _Quarantined(
                self._diverged(
                    call_seq,
                    f"{effect.family}:{effect.name}",
                    "no journaled call (a derived draw) but later calls",
                )
            )
        if self._prior:
            served = self._from_prior_era(effect, call_seq, witness)
            if served is not None:
                return served
        doubt = next(
            (d for d in self._doubts if d.key() == (effect.family, effect.name, witness)), None
        )
        if doubt is not None:
            # An earlier era's call in doubt, asked again: its declared recovery runs before it
            # can be performed. It moves to this slot (still durable: the snapshot's in-flight
            # call, carried again by the next restore) and keeps its origin.
            self._doubts.remove(doubt)
            self._in_flight = InFlight(
                self.era,
                call_seq,
                effect.family,
                effect.name,
                witness,
                doubt.recovery,
                doubt.origin,
            )
            return self._in_doubt(effect, call_seq, witness, doubt.recovery)
        carried = self._open
        if carried is not None and carried.era < self.era and carried.matches(effect, witness):
            return self._adopt(carried, effect, call_seq, witness)
        return _LIVE[effect.op](self, effect, call_seq, witness)

    def _adopt(
        self, carried: OpenRequest, effect: Effect, call_seq: int, witness: str
    ) -> _Resolution:
        """The new era asks what an earlier era already asked and nobody answered yet: wait on
        that task / request instead of sending it again (a person is asked once)."""
        if carried.kind == "task":
            kind, park, status, wait = (
                ParkKind.TASK,
                f"task:{carried.ref}",
                RunStatus.AWAITING_HUMAN,
                "approval",
            )
        else:
            kind, park, status, wait = (
                ParkKind.CASE_REPLY,
                f"case:{carried.ref}",
                RunStatus.PARKED,
                "case",
            )
        attrs = {"parked_on": park, "carried_from": f"{carried.era}/{carried.call_seq}"}
        if carried.kind == "task":
            attrs["task_id"] = carried.ref
        self._emit(
            JournalKind.RUN_PARKED,
            call_seq=call_seq,
            family=effect.family,
            name=effect.name,
            request_witness=witness,
            attrs=attrs,
        )
        self._park(kind, carried.ref, call_seq, status)
        self._waiting = _Wait(wait, effect, call_seq, witness, value=carried.value)
        return _SUSPEND

    def _set_open(self, request: OpenRequest) -> None:
        """Remember the request now waited on; a carried task it supersedes is withdrawn."""
        self._withdraw_carried(f"superseded: era {self.era} asked {request.name}")
        self._open = request

    def _withdraw_carried(self, reason: str) -> None:
        carried, self._open = self._open, None
        if (
            carried is not None
            and carried.kind == "task"
            and (self._parked is None or self._parked.ref != carried.ref)
        ):
            # Nobody waits for this task any more; an unwithdrawn one would sit on the worklist.
            self._out.commands.append(
                CloseTask(task_id=carried.ref, reason=reason[:200], at_ms=self._now)
            )

    def _from_prior_era(self, effect: Effect, call_seq: int, witness: str) -> _Resolution | None:
        if effect.family not in _CROSS_ERA:
            return None
        queue = self._prior.get((effect.family, effect.name, witness))
        if not queue:
            return None
        old = queue.popleft()
        value = json.loads(old.value_json) if old.ok and old.value_json is not None else None
        entry = self._record(
            effect,
            call_seq,
            witness,
            JournalKind.EFFECT_RECORDED,
            old.ok,
            value,
            old.error,
            attempts=old.attempts,
            label=old.label,
            attrs={"reconstructed_from": f"{old.era}/{old.call_seq}"},
        )
        return self._resolve(effect, entry)

    # ------------------------------------------------------------------ recording
    def _emit(
        self,
        kind: JournalKind,
        *,
        call_seq: int | None = None,
        family: str | None = None,
        name: str | None = None,
        request_witness: str | None = None,
        body_digest: str | None = None,
        label: Label | None = None,
        cost: Cost | None = None,
        attrs: Mapping[str, str] | None = None,
        era: int | None = None,
    ) -> JournalRecord:
        # What chain.seal(Draft(...), last_hash) returns, without the Draft: the record is
        # built (and validated) once with the placeholder hash, then given the hash of its
        # canonical bytes, as seal does — record_hash is the one rule for that hash.
        record = JournalRecord(
            session_id=self.session_id,
            seq=self._next_seq,
            era=self.era if era is None else era,
            kind=kind,
            call_seq=call_seq,
            family=family,
            name=name,
            request_witness=request_witness,
            body_digest=body_digest,
            stamp_ms=self._now,
            label=label or self._label,
            cost=cost,
            attrs=dict(attrs) if attrs else {},
            prev_hash=self._last_hash,
            hash=ZERO_HASH,
        )
        object.__setattr__(record, "hash", record_hash(record))
        self._next_seq += 1
        self._last_hash = record.hash
        self._out.records.append(record)
        return record

    def _record(
        self,
        effect: Effect,
        call_seq: int,
        witness: str,
        kind: JournalKind,
        ok: bool,
        value: Any,
        error: ErrorInfo | None,
        *,
        attempts: int = 1,
        cost: Cost | None = None,
        label: Label | None = None,
        attrs: Mapping[str, str] | None = None,
        era: int | None = None,
    ) -> ResultEntry:
        """Write the slot's ResultEntry and the chain record carrying its body digest.

        ``era``: the slot's era when it is not the current one (an early answer to a request
        carried from an earlier era); the chain record names the same era, so the verifier
        finds the body where the record says it is.
        """
        era = self.era if era is None else era
        value_json: str | None = None
        if ok:
            try:
                value_json = canonical_json(value)
            except (TypeError, ValueError) as exc:
                ok, error = (
                    False,
                    ErrorInfo(
                        type="NotJsonValue",
                        message=f"result is not canonical JSON: {exc}",
                        retryable=False,
                    ),
                )
        # The agent sees the decoded canonical value on the first run too, so it cannot tell
        # a fresh serve from a replay (tuples become lists, 2.0 becomes 2, on both paths).
        decoded = json.loads(value_json) if ok and value_json is not None else None
        digest = body_digest(ok, decoded, None if ok else error)
        # Applied at the source; a label the performer supplies can add to it, never lower it.
        source = self._source_labels.get((effect.family, effect.name))
        if source is None:
            source = self._source_labels[(effect.family, effect.name)] = at_source(
                effect.family, effect.name, self.spec.capability
            )
        label = source if label is None else join(source, label)
        entry = ResultEntry(
            session_id=self.session_id,
            era=era,
            call_seq=call_seq,
            family=effect.family,
            name=effect.name,
            request_witness=witness,
            ok=ok,
            value_json=value_json,
            error=None if ok else error,
            stamp_ms=self._now,
            attempts=attempts,
            body_digest=digest,
            label=label,
        )
        self.results[(era, call_seq)] = entry
        self._out.results.append(entry)
        self._emit(
            kind,
            call_seq=call_seq,
            family=effect.family,
            name=effect.name,
            request_witness=witness,
            body_digest=digest,
            cost=cost,
            label=label,
            attrs=attrs,
            era=era,
        )
        self.clock_ms = self._now
        # The value just decoded from value_json, for _resolve to hand over instead of decoding
        # the same text again. Taken once: only the first serve of this entry gets this object.
        self._decoded = (entry, decoded)
        return entry

    def _resolve(self, effect: Effect, entry: ResultEntry) -> _Resolution:
        if not entry.ok:
            assert entry.error is not None  # the wire validator guarantees it
            return ("throw", _error_from(entry.error))
        fresh, self._decoded = self._decoded, None
        if fresh is not None and fresh[0] is entry:
            raw = fresh[1]
        else:
            raw = json.loads(entry.value_json) if entry.value_json is not None else None
        try:
            return ("value", _DECODE.get(effect.op, _identity)(effect, raw))
        except EffectError as exc:
            return ("throw", exc)

    # ------------------------------------------------------------------ ends
    def _finish(self, output: Any) -> None:
        self._coro = None
        if self._max_slot.get(self.era, -1) >= self._cursor:
            raise_at = self._cursor
            self._quarantine(
                f"non-determinism at era {self.era} call_seq {raise_at}: history has {self._slot_desc(raise_at)}, agent returned instead"
            )
            return
        try:
            self._output_json = canonical_json(output)
        except (TypeError, ValueError) as exc:
            self._fail(
                ErrorInfo(
                    type="NotJsonValue",
                    message=f"agent output is not canonical JSON: {exc}",
                    retryable=False,
                )
            )
            return
        self._status = RunStatus.COMPLETED
        self._clear_waits()
        self._emit(
            JournalKind.RUN_COMPLETED,
            request_witness=None,
            attrs={
                "output_digest": request_witness(json.loads(self._output_json)),
                **self._unresolved(),
            },
        )

    def _fail(self, error: ErrorInfo) -> None:
        self._close_coro()
        self._status = RunStatus.FAILED
        self._error = error
        self._clear_waits()
        self._emit(
            JournalKind.RUN_FAILED,
            attrs={"error_type": error.type, "reason": error.message[:500], **self._unresolved()},
        )

    def _quarantine(self, reason: str) -> None:
        self._close_coro()
        self._status = RunStatus.QUARANTINED
        self._error = ErrorInfo(type="NonDeterminismError", message=reason, retryable=False)
        self._clear_waits()
        self._out.live.clear()
        self._emit(JournalKind.RUN_QUARANTINED, attrs={"reason": reason[:500]})

    def _unresolved(self) -> dict[str, str]:
        """Doubts the run ended without asking again (a re-executed generation took another
        path): nobody knows whether they took effect, so the end record names them for an
        operator (the terminal snapshot keeps them too). A retry-recovery call is left out: it
        is safe to repeat by declaration, so there is nothing to check."""
        unsure = [d.origin for d in self._doubts if d.recovery is not Recovery.RETRY]
        return {"in_doubt": ",".join(unsure)} if unsure else {}

    def _close_coro(self) -> None:
        coro, self._coro = self._coro, None
        if coro is not None:
            # An agent's `finally` raising must not stop the end of the run.
            with contextlib.suppress(Exception):
                coro.close()

    def _clear_waits(self) -> None:
        self._withdraw_carried(f"run {self._status}")
        self._waiting = None
        self._pending_live = None
        self._parked = None

    def _flush(self, rejected: str | None = None, rejected_kind: str | None = None) -> Step:
        if self._status != self._status_before:
            task_id = (
                self._parked.ref
                if self._parked is not None
                and self._parked.kind in (ParkKind.TASK, ParkKind.OPERATOR)
                else None
            )
            # seq: where in the chain the status changed — admission orders updates by it, not by
            # the wall clocks of whichever executors owned the run.
            self._out.commands.append(
                RunStatusUpdate(
                    admission_key=self.admission_key,
                    run_id=self.session_id,
                    status=self._status,
                    task_id=task_id,
                    updated_ms=self._now,
                    seq=self._next_seq - 1,
                )
            )
        out, self._out = self._out, _Out()
        self._decoded = None  # a value recorded but not served this step is not kept around
        self._status_before = self._status
        return Step(
            records=tuple(out.records),
            results=tuple(out.results),
            commands=tuple(out.commands),
            live_calls=tuple(out.live),
            _state=self._capture(),
            parked_on=self._parked,
            end=self._status if self._status in TERMINAL and out.records else None,
            replayed=out.replayed,
            rejected=rejected,
            rejected_kind=rejected_kind if rejected is not None else None,
        )

    # ------------------------------------------------------------------ live handlers
    def _decl(self, effect: Effect) -> EffectDecl:
        if effect.family == "generation":
            return _GENERATION_DECL
        tool = str(effect.options.get("tool", effect.name))
        base = self.spec.decl_for(tool) or self._tools.get(tool) or EffectDecl(tool)
        mutating = effect.options.get("mutating")
        recovery = effect.options.get("recovery")
        if mutating is None and recovery is None:
            return base
        return EffectDecl(
            tool,
            mutating=base.mutating if mutating is None else bool(mutating),
            recovery=recovery if recovery is not None else base.recovery,
            retry=base.retry,
            timeout_s=base.timeout_s,
            probe=base.probe,
        )

    def _live(self, effect: Effect, call_seq: int, witness: str) -> _Resolution:
        try:
            decl = self._decl(effect)
        except ValueError as exc:
            # Recorded, not just raised: a replay must find this slot taken by the same failure.
            error = ErrorInfo(type="InvalidDeclaration", message=str(exc)[:500], retryable=False)
            return self._resolve(
                effect,
                self._record(
                    effect, call_seq, witness, JournalKind.EFFECT_RECORDED, False, None, error
                ),
            )
        recovery = decl.effective_recovery
        self._emit(
            JournalKind.EFFECT_ANNOUNCED,
            call_seq=call_seq,
            family=effect.family,
            name=effect.name,
            request_witness=witness,
            attrs={"recovery": str(recovery), "mutating": "true" if decl.mutating else "false"},
        )
        self._in_flight = InFlight(
            self.era, call_seq, effect.family, effect.name, witness, recovery
        )
        # Announce-before-act: only a RETRY effect may let the announce ride with its outcome.
        return self._request_live(
            effect, call_seq, witness, decl, announce_first=recovery is not Recovery.RETRY
        )

    def _request_live(
        self, effect: Effect, call_seq: int, witness: str, decl: EffectDecl, *, announce_first: bool
    ) -> _Resolution:
        target = (
            str(effect.request["provider"])
            if effect.family == "generation"
            else str(effect.options.get("tool", effect.name))
        )
        call = LiveCall(
            self.session_id,
            self.era,
            call_seq,
            effect.family,
            effect.name,
            target,
            effect.request,
            witness,
            decl.mutating,
            decl.effective_recovery,
            decl.retry,
            decl.timeout_s,
            announce_first,
            self._idempotency_key(effect, call_seq, decl),
        )
        self._out.live.append(call)
        self._pending_live = call
        self._waiting = _Wait("live", effect, call_seq, witness, decl)
        self._status = RunStatus.RUNNING
        return _SUSPEND

    def _idempotency_key(self, effect: Effect, call_seq: int, decl: EffectDecl) -> str | None:
        """The key a tool call is performed (and probed) under; see ``LiveCall``."""
        if effect.family != "tool":
            return None
        explicit = effect.request.get("idempotency_key")
        if explicit is not None:
            return str(explicit)
        if not decl.mutating:
            return None
        flight = self._in_flight
        here = flight is not None and (flight.era, flight.call_seq) == (self.era, call_seq)
        origin = flight.origin if here and flight is not None else f"{self.era}/{call_seq}"
        return f"{self.session_id}/{origin}"

    def _in_doubt(
        self, effect: Effect, call_seq: int, witness: str, recovery: Recovery
    ) -> _Resolution:
        decl = self._decl(effect)
        attrs = {"recovery": str(recovery)}
        flight = self._in_flight
        if flight is not None and flight.origin != f"{self.era}/{call_seq}":
            attrs["origin"] = flight.origin  # carried from an earlier era's announce
        self._emit(
            JournalKind.EFFECT_IN_DOUBT,
            call_seq=call_seq,
            family=effect.family,
            name=effect.name,
            request_witness=witness,
            attrs=attrs,
        )
        if recovery is Recovery.RETRY:
            # The announce is already durable; repeating is safe by declaration.
            return self._request_live(effect, call_seq, witness, decl, announce_first=False)
        if recovery is Recovery.RECONCILE and decl.probe:
            return self._probe(effect, call_seq, witness, decl)
        return self._open_operator_task(effect, call_seq, witness, decl)

    def _probe(self, effect: Effect, call_seq: int, witness: str, decl: EffectDecl) -> _Resolution:
        assert decl.probe is not None
        # The probe is called like the tool it checks: same args, same idempotency key, so a
        # peer can look the call up by key (billing: GET /charges/{idempotency_key}).
        key = self._idempotency_key(effect, call_seq, decl)
        request = {
            "tool": decl.probe,
            "args": effect.request.get("args"),
            "idempotency_key": key,
            "probe_for": effect.name,
        }
        probe_witness = request_witness(request)
        name = f"tool://{decl.probe}"
        self._emit(
            JournalKind.EFFECT_ANNOUNCED,
            call_seq=call_seq,
            family="probe",
            name=name,
            request_witness=probe_witness,
            attrs={"probe_for": effect.name},
        )
        call = LiveCall(
            self.session_id,
            self.era,
            call_seq,
            "probe",
            name,
            decl.probe,
            request,
            probe_witness,
            False,
            Recovery.RETRY,
            decl.retry,
            decl.timeout_s,
            False,
            key,
        )
        self._out.live.append(call)
        self._pending_live = call
        self._waiting = _Wait("probe", effect, call_seq, witness, decl)
        return _SUSPEND

    def _probe_done(self, wait: _Wait, outcome: Outcome) -> _Resolution:
        """Read the probe's answer: ``None`` → the call never happened; ``{"applied": bool,
        "result": v}`` → as it says; any other value → it happened and that is its result; a
        failed probe → nobody knows, ask an operator."""
        assert wait.decl is not None
        applied: bool | None = None
        result: Any = None
        if outcome.ok:
            value = outcome.value
            if value is None:
                applied = False
            elif (
                isinstance(value, Mapping)
                and isinstance(value.get("applied"), bool)
                and set(value) <= {"applied", "result"}
            ):
                applied, result = bool(value["applied"]), value.get("result")
            else:
                applied, result = True, value
        self._emit(
            JournalKind.EFFECT_RECORDED,
            call_seq=wait.call_seq,
            family="probe",
            name=f"tool://{wait.decl.probe}",
            attrs={
                "applied": "unknown" if applied is None else str(applied).lower(),
                "probe_for": wait.effect.name,
            },
        )
        if applied is True:
            entry = self._record(
                wait.effect,
                wait.call_seq,
                wait.witness,
                JournalKind.EFFECT_RECORDED,
                True,
                result,
                None,
                attrs={"reconciled": "applied"},
            )
            self._in_flight = None
            return self._resolve(wait.effect, entry)
        if applied is False:
            # The peer says it never happened: performing it now is the first application.
            return self._request_live(
                wait.effect, wait.call_seq, wait.witness, wait.decl, announce_first=False
            )
        return self._open_operator_task(wait.effect, wait.call_seq, wait.witness, wait.decl)

    def _open_operator_task(
        self, effect: Effect, call_seq: int, witness: str, decl: EffectDecl
    ) -> _Resolution:
        task_id = f"{self.session_id}/{self.era}/{call_seq}/operator"
        flight = self._in_flight
        if flight is not None and (flight.era, flight.call_seq) == (self.era, call_seq):
            # The same slot can be in doubt again in the same era (a replayable run: RETRY
            # verdict, then a crash after the act): the repeat needs a task id of its own.
            if flight.asks:
                task_id = f"{task_id}/{flight.asks}"
            self._in_flight = replace(flight, asks=flight.asks + 1)
        question = (
            f"Did {effect.name} (call {call_seq} of run {self.session_id}) take effect? APPROVED = it happened "
            "(comment: its result as JSON), RETRY = perform it again, ABANDON = record it as failed."
        )
        self._out.commands.append(
            OpenTask(
                task_id=task_id,
                session_id=self.session_id,
                era=self.era,
                call_seq=call_seq,
                kind=TaskKind.OPERATOR,
                question=question,
                answer_json=canonical_json({"effect": effect.name, "request": effect.request}),
                case_id=self.case_id,
                capability=self.spec.capability,
                role="operator",
                approvals=1,
                initiator=self.initiator,
                expires_ms=None,
                on_expiry=ExpiryPolicy.ESCALATE,
                allow_unattended=False,
                escalate_to=None,
                opened_ms=self._now,
                tenant=self.tenant,  # the worklist shows it to this tenant's principals only
            )
        )
        self._emit(
            JournalKind.TASK_OPENED,
            call_seq=call_seq,
            family=effect.family,
            name=effect.name,
            request_witness=witness,
            attrs={"task_id": task_id, "kind": "OPERATOR"},
        )
        self._park(ParkKind.OPERATOR, task_id, call_seq, RunStatus.AWAITING_HUMAN)
        self._waiting = _Wait("operator", effect, call_seq, witness, decl)
        return _SUSPEND

    def _park(self, kind: ParkKind, ref: str, call_seq: int, status: RunStatus) -> None:
        self._parked = ParkedOn(kind=kind, ref=ref, call_seq=call_seq, era=self.era)
        self._status = status

    def _unpark(self) -> None:
        self._parked = None
        self._status = RunStatus.RUNNING

    def _observe(self, effect: Effect, call_seq: int, witness: str) -> _Resolution:
        fn: Callable[[], Any] = effect.options["fn"]
        try:
            value = fn()
        except Exception as exc:
            entry = self._record(
                effect,
                call_seq,
                witness,
                JournalKind.EFFECT_RECORDED,
                False,
                None,
                _error_info(exc),
            )
        else:
            entry = self._record(
                effect, call_seq, witness, JournalKind.EFFECT_RECORDED, True, value, None
            )
        return self._resolve(effect, entry)

    def _checkpoint(self, effect: Effect, call_seq: int, witness: str) -> _Resolution:
        state = effect.request["state"]
        entry = self._record(
            effect, call_seq, witness, JournalKind.CHECKPOINT_REPORTED, True, state, None
        )
        if entry.ok:
            self._checkpoint_json = entry.value_json
        return self._resolve(effect, entry)

    def _signal(self, effect: Effect, call_seq: int, witness: str) -> _Resolution:
        for i, signal in enumerate(self._pending):
            if signal.name == effect.name:
                del self._pending[i]
                return self._resolve(effect, self._record_signal(effect, call_seq, witness, signal))
        self._park(ParkKind.SIGNAL, effect.name, call_seq, RunStatus.PARKED)
        self._emit(
            JournalKind.RUN_PARKED, call_seq=call_seq, attrs={"parked_on": f"signal:{effect.name}"}
        )
        self._waiting = _Wait("signal", effect, call_seq, witness)
        return _SUSPEND

    def _record_signal(
        self, effect: Effect, call_seq: int, witness: str, signal: Signal
    ) -> ResultEntry:
        try:
            payload = json.loads(signal.payload_json)
        except ValueError:
            payload = signal.payload_json  # not JSON: delivered as the raw text
        return self._record(
            effect,
            call_seq,
            witness,
            JournalKind.SIGNAL_RECEIVED,
            True,
            payload,
            None,
            attrs={"signal": signal.name},
        )

    def _approval(self, effect: Effect, call_seq: int, witness: str) -> _Resolution:
        req = effect.request
        task_id = f"{self.session_id}/{self.era}/{call_seq}"
        expires = None if req["expires_in"] is None else self.clock_ms + int(req["expires_in"])
        try:
            answer_json = canonical_json(req["answer"])
        except (TypeError, ValueError) as exc:
            return ("throw", EffectError("InvalidRequest", str(exc)))
        self._out.commands.append(
            OpenTask(
                task_id=task_id,
                session_id=self.session_id,
                era=self.era,
                call_seq=call_seq,
                kind=TaskKind.APPROVAL,
                question=str(req["question"]),
                answer_json=answer_json,
                case_id=self.case_id,
                capability=self.spec.capability,
                role=str(req["role"]),
                approvals=int(req["approvals"]),
                initiator=self.initiator,
                expires_ms=expires,
                on_expiry=ExpiryPolicy(str(req["on_expiry"]).upper()),
                allow_unattended=bool(req["allow_unattended"]),
                escalate_to=req.get("escalate_to"),
                opened_ms=self._now,
                tenant=self.tenant,  # the worklist shows it to this tenant's principals only
            )
        )
        self._emit(
            JournalKind.TASK_OPENED,
            call_seq=call_seq,
            family=effect.family,
            name=effect.name,
            request_witness=witness,
            attrs={"task_id": task_id, "kind": "APPROVAL", "role": str(req["role"])},
        )
        unattended_ok = req["on_expiry"] == "proceed" and bool(req["allow_unattended"])
        self._set_open(
            OpenRequest(
                "task",
                task_id,
                self.era,
                call_seq,
                effect.family,
                effect.name,
                witness,
                {"unattended_ok": unattended_ok},
            )
        )
        self._park(ParkKind.TASK, task_id, call_seq, RunStatus.AWAITING_HUMAN)
        self._waiting = _Wait("approval", effect, call_seq, witness)
        return _SUSPEND

    def _case_command(self, effect: Effect, call_seq: int, witness: str) -> _Resolution:
        if self.case_id is None:
            return ("throw", EffectError("NoCase", f"run {self.session_id} belongs to no case"))
        request_id = f"{self.session_id}/{self.era}/{call_seq}"
        if effect.op == "case_get":
            command: Command = GetCaseState(
                case_id=self.case_id,
                request_id=request_id,
                reply_to=self.session_id,
                era=self.era,
                call_seq=call_seq,
            )
        else:
            try:
                state_json = canonical_json(effect.request["state"])
            except (TypeError, ValueError) as exc:
                return ("throw", EffectError("InvalidRequest", str(exc)))
            command = PutCaseState(
                case_id=self.case_id,
                request_id=request_id,
                reply_to=self.session_id,
                era=self.era,
                call_seq=call_seq,
                expected_version=int(effect.request["expected_version"]),
                state_json=state_json,
            )
        return self._ask_case(effect, call_seq, witness, command)

    def _ask_case(
        self, effect: Effect, call_seq: int, witness: str, command: Command, value: Any = None
    ) -> _Resolution:
        """Send a case command with ``reply_to`` = this session and park until its CaseReply
        (request id ``<session>/<era>/<call_seq>``); the reply is journaled as the result."""
        assert isinstance(
            command, (GetCaseState, PutCaseState, RegisterDeadline, MeetDeadline, CancelDeadline)
        )
        self._out.commands.append(command)
        self._emit(
            JournalKind.EFFECT_ANNOUNCED,
            call_seq=call_seq,
            family=effect.family,
            name=effect.name,
            request_witness=witness,
            attrs={"request_id": command.request_id, "case_id": command.case_id},
        )
        self._set_open(
            OpenRequest(
                "case",
                command.request_id,
                self.era,
                call_seq,
                effect.family,
                effect.name,
                witness,
                value,
            )
        )
        self._park(ParkKind.CASE_REPLY, command.request_id, call_seq, RunStatus.PARKED)
        self._waiting = _Wait("case", effect, call_seq, witness, value=value)
        return _SUSPEND

    def _deadline(self, effect: Effect, call_seq: int, witness: str) -> _Resolution:
        """Deadline commands ask and wait like the other case commands: a refusal (a closed
        case, no such obligation, one already open with another due) must reach the agent."""
        if self.case_id is None:
            return ("throw", EffectError("NoCase", f"run {self.session_id} belongs to no case"))
        req = effect.request
        request_id = f"{self.session_id}/{self.era}/{call_seq}"
        if effect.op != "deadline":
            make = MeetDeadline if effect.op == "deadline_meet" else CancelDeadline
            command = make(
                case_id=self.case_id,
                request_id=request_id,
                reply_to=self.session_id,
                era=self.era,
                call_seq=call_seq,
                name=str(req["name"]),
            )
            return self._ask_case(effect, call_seq, witness, command)
        try:
            due, digest = self._calendar_lookup().resolve(
                str(req["calendar"]), req["rule"], self.clock_ms
            )
            warn = (
                None if req["warn_before"] is None else due - _wall_duration_ms(req["warn_before"])
            )
        except CalendarError as exc:
            entry = self._record(
                effect,
                call_seq,
                witness,
                JournalKind.EFFECT_RECORDED,
                False,
                None,
                _error_info(exc),
            )
            return self._resolve(effect, entry)
        # Resolved once, here: the instant rides in the OpenRequest until the reply comes, so a
        # rebuilt run journals what was sent even if the calendar changed meanwhile.
        value = {
            "due_ms": due,
            "warn_ms": warn,
            "calendar": req["calendar"],
            "calendar_digest": digest,
        }
        register = RegisterDeadline(
            case_id=self.case_id,
            request_id=request_id,
            reply_to=self.session_id,
            era=self.era,
            call_seq=call_seq,
            name=str(req["name"]),
            due_ms=due,
            warn_ms=warn,
            calendar=str(req["calendar"]),
            calendar_digest=digest,
            rule_json=canonical_json(req["rule"]),
            on_breach=req["on_breach"],
            tenant=self.tenant,  # the follow-up on a breach runs for this tenant
        )
        return self._ask_case(effect, call_seq, witness, register, value)

    def _calendar_lookup(self) -> Any:
        if self._calendars is None:
            from runplane.core.calendars import CalendarRegistry  # built-in wall clock only

            self._calendars = CalendarRegistry()
        return self._calendars

    # ------------------------------------------------------------------ inbox events
    def _on_signal(self, signal: Signal) -> str | None:
        wait = self._waiting
        if wait is not None and wait.kind == "signal" and wait.effect.name == signal.name:
            self._waiting = None
            self._unpark()
            entry = self._record_signal(wait.effect, wait.call_seq, wait.witness, signal)
            self._run(self._resolve(wait.effect, entry))
            return None
        if len(self._pending) >= MAX_BUFFERED_SIGNALS:
            # Every buffered signal rides in every snapshot of the run: unbounded, a chatty
            # sender would grow each commit (and the sessions row) without limit.
            return f"{MAX_BUFFERED_SIGNALS} signals already buffered and not awaited; refused {signal.name!r}"
        # Not awaited yet: keep it (in the snapshot) for the wait_signal that will consume it.
        self._pending.append(signal)
        self._emit(JournalKind.SIGNAL_RECEIVED, attrs={"signal": signal.name, "buffered": "true"})
        return None

    def _on_decision(self, decision: TaskDecision) -> str | None:
        wait = self._waiting
        parked = self._parked
        waited = (
            wait is not None
            and parked is not None
            and parked.ref == decision.task_id
            and wait.kind in ("approval", "operator")
        )
        carried = (
            self._open
            if self._open is not None
            and self._open.kind == "task"
            and self._open.ref == decision.task_id
            else None
        )
        if not waited and carried is None:
            return f"no open task {decision.task_id!r} for this run"
        required = (
            int(wait.effect.request["approvals"])
            if waited and wait is not None and wait.kind == "approval"
            else 1
        )
        problem = decision_identity_problem(decision, initiator=self.initiator, approvals=required)
        if problem is not None:
            return problem  # rejected: the executor dead-letters it with this reason
        attrs = {"task_id": decision.task_id, "outcome": str(decision.outcome)}
        if decision.outcome is DecisionOutcome.ESCALATED:
            self._escalated(decision, wait if waited else None, carried, attrs)
            return None
        if not waited:
            assert carried is not None
            return self._early_decision(carried, decision, attrs)
        assert wait is not None
        if wait.kind == "approval":
            return self._decide_approval(wait, decision, attrs)
        return self._decide_operator(wait, decision, attrs)

    def _escalated(
        self,
        decision: TaskDecision,
        wait: _Wait | None,
        carried: OpenRequest | None,
        attrs: dict[str, str],
    ) -> None:
        """The worklist reopened the task for another role; the run keeps waiting on the same
        task. Journaled (TASK_DECIDED outcome ESCALATED, then RUN_PARKED on that task) so the
        chain shows why the run still waits and who it waits for now."""
        declared = (
            wait.effect.request.get("escalate_to")
            if wait is not None and isinstance(wait.effect.request, Mapping)
            else None
        )
        # The TaskDecision names no role; without a declared one it is the deployment's default.
        attrs["escalate_to"] = str(declared) if declared else "deployment-default"
        if decision.comment:
            attrs["reason"] = decision.comment[:200]
        if wait is None:
            assert carried is not None
            attrs["carried_from"] = f"{carried.era}/{carried.call_seq}"
            self._emit(
                JournalKind.TASK_DECIDED, family=carried.family, name=carried.name, attrs=attrs
            )
            return
        self._emit(
            JournalKind.TASK_DECIDED,
            call_seq=wait.call_seq,
            family=wait.effect.family,
            name=wait.effect.name,
            attrs=attrs,
        )
        self._emit(
            JournalKind.RUN_PARKED,
            call_seq=wait.call_seq,
            attrs={
                "parked_on": f"task:{decision.task_id}",
                "task_id": decision.task_id,
                "escalated": "true",
            },
        )

    def _early_decision(
        self, carried: OpenRequest, decision: TaskDecision, attrs: dict[str, str]
    ) -> str | None:
        """A decision on a task carried from an earlier era, before the new era has asked again:
        journal it at the task's own slot; the side-effect log serves it when the era asks."""
        if decision.outcome in (DecisionOutcome.RETRY, DecisionOutcome.ABANDON):
            return f"{decision.outcome} is an operator verdict, not an approval decision"
        unattended_ok = bool((carried.value or {}).get("unattended_ok"))
        ok, value, error = _approval_result(decision, unattended_ok)
        effect = Effect(carried.family, carried.name, None, "approval")
        attrs["answers"] = f"{carried.era}/{carried.call_seq}"
        self._open = None
        self._record_early(carried, effect, JournalKind.TASK_DECIDED, ok, value, error, attrs)
        return None

    def _record_early(
        self,
        carried: OpenRequest,
        effect: Effect,
        kind: JournalKind,
        ok: bool,
        value: Any,
        error: ErrorInfo | None,
        attrs: Mapping[str, str],
    ) -> None:
        clock = self.clock_ms  # the agent is suspended elsewhere: its logical clock does not move
        entry = self._record(
            effect,
            carried.call_seq,
            carried.witness,
            kind,
            ok,
            value,
            error,
            attrs=attrs,
            era=carried.era,
        )
        self.clock_ms = clock
        self._prior.setdefault((carried.family, carried.name, carried.witness), deque()).append(
            entry
        )

    def _decide_approval(
        self, wait: _Wait, decision: TaskDecision, attrs: dict[str, str]
    ) -> str | None:
        outcome = decision.outcome
        req = wait.effect.request
        if outcome in (DecisionOutcome.RETRY, DecisionOutcome.ABANDON):
            return f"{outcome} is an operator verdict, not an approval decision"
        unattended_ok = req["on_expiry"] == "proceed" and bool(req["allow_unattended"])
        self._waiting = None
        self._open = None
        self._unpark()
        ok, value, error = _approval_result(decision, unattended_ok)
        entry = self._record(
            wait.effect,
            wait.call_seq,
            wait.witness,
            JournalKind.TASK_DECIDED,
            ok,
            value,
            error,
            attrs=attrs,
        )
        self._run(self._resolve(wait.effect, entry))
        return None

    def _decide_operator(
        self, wait: _Wait, decision: TaskDecision, attrs: dict[str, str]
    ) -> str | None:
        """Operator verdict on a call in doubt: APPROVED = it happened (comment: its result
        as JSON, or null); RETRY = perform it again; ABANDON/REJECTED = record it failed."""
        outcome = decision.outcome
        if outcome not in (
            DecisionOutcome.APPROVED,
            DecisionOutcome.RETRY,
            DecisionOutcome.ABANDON,
            DecisionOutcome.REJECTED,
        ):
            return f"{outcome} is not an operator verdict"
        self._waiting = None
        self._unpark()
        self._emit(
            JournalKind.TASK_DECIDED,
            call_seq=wait.call_seq,
            family=wait.effect.family,
            name=wait.effect.name,
            attrs=attrs,
        )
        decl = wait.decl or self._decl(wait.effect)
        if outcome is DecisionOutcome.RETRY:
            # Announced again, and durable before the call is performed: if the process dies
            # after the act, the restored run finds the call in doubt (and asks again) instead
            # of re-reading the verdict from the inbox and performing it once more.
            self._emit(
                JournalKind.EFFECT_ANNOUNCED,
                call_seq=wait.call_seq,
                family=wait.effect.family,
                name=wait.effect.name,
                request_witness=wait.witness,
                attrs={
                    "recovery": str(decl.effective_recovery),
                    "verdict": "retry",
                    "mutating": "true" if decl.mutating else "false",
                },
            )
            self._run(
                self._request_live(
                    wait.effect, wait.call_seq, wait.witness, decl, announce_first=True
                )
            )
            return None
        if outcome is DecisionOutcome.APPROVED:
            try:
                value = json.loads(decision.comment) if decision.comment.strip() else None
            except ValueError:
                value = decision.comment
            entry = self._record(
                wait.effect,
                wait.call_seq,
                wait.witness,
                JournalKind.EFFECT_RECORDED,
                True,
                value,
                None,
                attrs={"verdict": "applied"},
            )
        else:
            error = ErrorInfo(
                type="EffectAbandoned",
                message=decision.comment or f"operator abandoned {wait.effect.name}",
                retryable=False,
            )
            entry = self._record(
                wait.effect,
                wait.call_seq,
                wait.witness,
                JournalKind.EFFECT_RECORDED,
                False,
                None,
                error,
                attrs={"verdict": "abandoned"},
            )
        self._in_flight = None
        self._run(self._resolve(wait.effect, entry))
        return None

    def _on_case_reply(self, reply: CaseReply) -> str | None:
        wait = self._waiting
        parked = self._parked
        if (
            wait is not None
            and wait.kind == "case"
            and parked is not None
            and parked.ref == reply.request_id
        ):
            self._waiting = None
            self._open = None
            self._unpark()
            entry = self._record_case_reply(
                wait.effect, wait.call_seq, wait.witness, wait.value, reply
            )
            self._run(self._resolve(wait.effect, entry))
            return None
        carried = self._open
        if (
            carried is not None
            and carried.kind == "case"
            and carried.ref == reply.request_id
            and carried.era < self.era
        ):
            # Answered before the new era asked again: journal it at its own slot (see _early_decision).
            op = _CASE_OPS.get(reply.op)
            if op is None:
                return f"case reply op {reply.op!r} is not a run's case command"
            self._open = None
            clock = self.clock_ms
            entry = self._record_case_reply(
                Effect(carried.family, carried.name, None, op),
                carried.call_seq,
                carried.witness,
                carried.value,
                reply,
                era=carried.era,
            )
            self.clock_ms = clock
            self._prior.setdefault((carried.family, carried.name, carried.witness), deque()).append(
                entry
            )
            return None
        return f"no case request {reply.request_id!r} outstanding for this run"

    def _record_case_reply(
        self,
        effect: Effect,
        call_seq: int,
        witness: str,
        value: Any,
        reply: CaseReply,
        *,
        era: int | None = None,
    ) -> ResultEntry:
        """Journal a CaseReply as the result of the case command that asked for it."""
        attrs = {"request_id": reply.request_id, "case_id": reply.case_id}
        if era is not None:
            attrs["answers"] = f"{era}/{call_seq}"
        op = effect.op
        if op == "case_put":
            recorded = {
                "accepted": reply.accepted,
                "version": reply.version,
                "reason": reply.reason,
            }
            kind = JournalKind.CASE_WRITTEN if reply.accepted else JournalKind.EFFECT_RECORDED
            return self._record(
                effect, call_seq, witness, kind, True, recorded, None, attrs=attrs, era=era
            )
        if not reply.accepted:
            error = ErrorInfo(
                type="CaseRefused", message=reply.reason or "refused", retryable=False
            )
            return self._record(
                effect,
                call_seq,
                witness,
                JournalKind.EFFECT_RECORDED,
                False,
                None,
                error,
                attrs=attrs,
                era=era,
            )
        if op == "case_get":
            state = json.loads(reply.state_json) if reply.state_json else None
            return self._record(
                effect,
                call_seq,
                witness,
                JournalKind.EFFECT_RECORDED,
                True,
                {"state": state, "version": reply.version},
                None,
                attrs=attrs,
                era=era,
            )
        attrs["deadline"] = effect.name.removeprefix("deadline:")
        if op != "deadline":  # meet / cancel
            return self._record(
                effect,
                call_seq,
                witness,
                JournalKind.EFFECT_RECORDED,
                True,
                None,
                None,
                attrs=attrs,
                era=era,
            )
        if not isinstance(value, Mapping) or "due_ms" not in value:
            # Only a snapshot written before deadlines waited for replies could lack it.
            error = ErrorInfo(
                type="DeadlineUnknown",
                message="the resolved due instant was not kept with the request",
                retryable=False,
            )
            return self._record(
                effect,
                call_seq,
                witness,
                JournalKind.EFFECT_RECORDED,
                False,
                None,
                error,
                attrs=attrs,
                era=era,
            )
        attrs.update(
            {"calendar": str(value["calendar"]), "calendar_digest": str(value["calendar_digest"])}
        )
        return self._record(
            effect,
            call_seq,
            witness,
            JournalKind.DEADLINE_REGISTERED,
            True,
            dict(value),
            None,
            attrs=attrs,
            era=era,
        )


_LIVE: Final[dict[str, Callable[[Runtime, Effect, int, str], _Resolution]]] = {
    "live": Runtime._live,
    "observe": Runtime._observe,
    "checkpoint": Runtime._checkpoint,
    "signal": Runtime._signal,
    "approval": Runtime._approval,
    "case_get": Runtime._case_command,
    "case_put": Runtime._case_command,
    "deadline": Runtime._deadline,
    "deadline_meet": Runtime._deadline,
    "deadline_cancel": Runtime._deadline,
}


def _side_effect_log(
    results: Mapping[tuple[int, int], ResultEntry], before_era: int
) -> dict[tuple[str, str, str], list[ResultEntry]]:
    """Each distinct recorded call of the eras before ``before_era``, per (family, name,
    witness), in the order the calls were first made.

    An era serves its i-th call of a key from the log's i-th entry and records that serve as
    an entry of its own (a reconstruction); only calls beyond the log are new. So, era by era,
    the i-th entry of a key extends the log only when i is past its end — counting the
    reconstructions again would serve a stale copy to a later call with the same witness
    (two reads of the case after two restores)."""
    log: dict[tuple[str, str, str], list[ResultEntry]] = {}
    seen: dict[tuple[str, str, str], int] = {}
    era = -1
    for (entry_era, _seq), entry in sorted(results.items()):
        if entry_era >= before_era:
            break
        if entry_era != era:
            era, seen = entry_era, {}
        if entry.family not in _CROSS_ERA:
            continue
        key = (entry.family, entry.name, entry.request_witness)
        index = seen.get(key, 0)
        seen[key] = index + 1
        entries = log.setdefault(key, [])
        if index >= len(entries):
            entries.append(entry)
    return log


# CaseReply.op → the engine op of the command that asked (for replies journaled early).
_CASE_OPS: Final = {
    "get_state": "case_get",
    "put_state": "case_put",
    "register_deadline": "deadline",
    "meet_deadline": "deadline_meet",
    "cancel_deadline": "deadline_cancel",
}


def decision_identity_problem(
    decision: TaskDecision, *, initiator: str, approvals: int
) -> str | None:
    """Why ``decision`` breaks four-eyes for a run started by ``initiator``, or None.

    Defence in depth behind the worklist (security review C1): the worklist already refuses the
    initiator and a second approval by the same person, but a TaskDecision is only a record on
    ``runs.inbox``; one produced around the worklist must not resume the run. The run's
    initiator may not appear among ``decided_by`` at all, and an APPROVED decision needs at
    least ``approvals`` distinct, non-blank principals.
    """
    if initiator in decision.decided_by:
        return f"four-eyes: decided_by names the run's initiator {initiator!r}"
    if decision.outcome is DecisionOutcome.APPROVED:
        distinct = {p for p in decision.decided_by if p.strip()}
        if len(distinct) < approvals:
            return f"four-eyes: {len(distinct)} distinct principal(s) decided, the task needs {approvals}"
    return None


def _approval_result(
    decision: TaskDecision, unattended_ok: bool
) -> tuple[bool, Any, ErrorInfo | None]:
    """What an approval's decision records: (ok, value, error)."""
    outcome = decision.outcome
    if outcome is DecisionOutcome.EXPIRED_FAILED or (
        outcome is DecisionOutcome.EXPIRED_PROCEEDED and not unattended_ok
    ):
        return (
            False,
            None,
            ErrorInfo(
                type="ApprovalExpired", message=f"task {decision.task_id} expired", retryable=False
            ),
        )
    approved = outcome in (DecisionOutcome.APPROVED, DecisionOutcome.EXPIRED_PROCEEDED)
    return (
        True,
        {
            "outcome": str(outcome),
            "approved": approved,
            "comment": decision.comment,
            "decided_by": list(decision.decided_by),
        },
        None,
    )


def _identity(effect: Effect, raw: Any) -> Any:
    decode = effect.options.get("decode")
    return decode(raw) if decode is not None else raw


def _decode_case_put(effect: Effect, raw: Any) -> int:
    if not raw["accepted"]:
        raise CaseConflict(int(raw["version"]), str(raw.get("reason") or "the case moved"))
    return int(raw["version"])


_DECODE: Final[dict[str, Callable[[Effect, Any], Any]]] = {
    "live": _identity,
    "approval": lambda _e, raw: Decision(
        str(raw["outcome"]), bool(raw["approved"]), str(raw["comment"]), tuple(raw["decided_by"])
    ),
    "case_get": lambda _e, raw: CaseState(raw["state"], int(raw["version"])),
    "case_put": _decode_case_put,
    "deadline": lambda _e, raw: int(raw["due_ms"]),
    "deadline_meet": lambda _e, raw: None,
    "deadline_cancel": lambda _e, raw: None,
    "checkpoint": lambda _e, raw: None,
}


def _error_info(exc: BaseException) -> ErrorInfo:
    if isinstance(exc, EffectError):
        return ErrorInfo(type=exc.type, message=exc.message, retryable=exc.retryable)
    return ErrorInfo(type=type(exc).__name__, message=str(exc), retryable=False)


def _error_from(error: ErrorInfo) -> EffectError:
    if error.type == "ApprovalExpired":
        return ApprovalExpired(error.type, error.message, retryable=error.retryable)
    if error.type == "CaseRefused":
        return CaseRefused(error.message)
    return EffectError(error.type, error.message, retryable=error.retryable)


def _wall_duration_ms(rule: Mapping[str, Any]) -> int:
    if len(rule) != 1:
        raise CalendarError(f"warn_before must be one of minutes/hours/days, got {dict(rule)!r}")
    ((unit, n),) = rule.items()
    if unit not in _WALL_UNITS_MS or not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise CalendarError(
            f"warn_before must be {{minutes|hours|days: n >= 0}}, got {dict(rule)!r}"
        )
    return int(n) * _WALL_UNITS_MS[unit]


@dataclass(frozen=True)
class ReplayReport:
    """What replaying a recorded history found: ``live_calls`` must be 0 for a faithful
    history; ``divergence`` is the positioned diagnostic when it is not."""

    status: RunStatus
    output: Any
    replayed: int
    live_calls: int
    divergence: str | None


def replay_history(
    spec: AgentSpec,
    snapshot: SessionSnapshot,
    results: Mapping[tuple[int, int], ResultEntry],
    *,
    calendars: Any = None,
) -> ReplayReport:
    """Replay a run's whole history in its last era without extending it (audit, tests,
    golden journals). Any call the history cannot answer is a divergence, never performed."""
    rt = Runtime._from_snapshot(spec, snapshot, results, calendars=calendars, tools=None)
    rt._status = RunStatus.RUNNING
    rt._parked = None
    rt._in_flight = None
    rt._doubts = []
    rt._verify_only = True
    rt._begin(snapshot.updated_ms)
    rt._launch()
    out = rt._out
    divergence = (
        rt._error.message if rt._status is RunStatus.QUARANTINED and rt._error is not None else None
    )
    output = (
        json.loads(rt._output_json)
        if rt._status is RunStatus.COMPLETED and rt._output_json is not None
        else None
    )
    return ReplayReport(rt._status, output, out.replayed, len(out.live), divergence)
