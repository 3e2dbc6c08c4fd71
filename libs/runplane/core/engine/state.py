"""A run's resident state: what the handlers read and change, one object per run.

``Run`` is the engine's working memory for one run (internal to the engine package; the
public face is ``Runtime``). It provides what ``StepCtx`` reads (``ctx.RunHost``), the slot
bookkeeping the replay decision needs, parking, and the undo mark that lets a handler that
raised halfway leave nothing behind.

What is the kernel's (status, era, chain tip, cursor, park, call in flight, open request,
doubts, buffered signals, checkpoint) is named here; what a family owns is its *part*
(``table.Part``, declared in its registry row) in ``Run.parts``, which the snapshot capture,
the undo mark and the restore carry by looping over the rows — a new family's part needs
nothing here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Coroutine, Mapping
from typing import Any, NamedTuple

from runplane.core.agents import AgentSpec, EffectDecl
from runplane.core.calendars import CalendarRegistry
from runplane.core.determinism import session_seed
from runplane.core.engine import timeouts
from runplane.core.engine.recorder import Recorder
from runplane.core.engine.replay import describe_slot, divergence
from runplane.core.engine.step import SnapState
from runplane.core.engine.table import parts_of
from runplane.core.engine.values import InFlight, LiveCall, OpenRequest, doubts_from_json
from runplane.core.engine.vocab import Calendars, Resolution, Slot, Wait
from runplane.core.limits import DEFAULT_LIMITS, Limits
from runplane.core.policy import Policy
from runplane.wire import (
    ErrorInfo,
    JournalKind,
    ParkedOn,
    ParkKind,
    ResultEntry,
    RunStatus,
    SessionSnapshot,
    Signal,
    TenantId,
)

__all__ = ["Mark", "Run", "run_from_snapshot"]


class Run:
    """One run's state inside the engine. Build through ``Runtime``."""

    def __init__(
        self,
        spec: AgentSpec,
        rec: Recorder,
        *,
        case_id: str | None,
        admission_key: str,
        tenant: TenantId,
        initiator: str,
        input_json: str,
        started_ms: int,
        calendars: Calendars | None = None,
        tools: Mapping[str, EffectDecl] | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.spec = spec
        self.rec = rec
        self.session_id = rec.session_id
        # The recorder's era, kept here too for the hot path; both move only in eras.new_era.
        self.era = rec.era
        self.case_id = case_id
        self.admission_key = admission_key
        self.tenant = tenant
        self.initiator = initiator
        self.input_json = input_json
        self.started_ms = started_ms
        self.seed = session_seed(rec.session_id)
        self.restored: Any = None
        self.max_slot: dict[int, int] = {}
        for e, s in rec.results:
            self.max_slot[e] = max(self.max_slot.get(e, -1), s)
        self.calendars = calendars
        self.tools = dict(tools or {})
        self.status = RunStatus.RUNNING
        self.status_before = self.status
        self.parked: ParkedOn | None = None
        self.in_flight: InFlight | None = None
        self.open: OpenRequest | None = None
        self.pending: list[Signal] = []
        self.checkpoint_json: str | None = None
        self.output_json: str | None = None
        self.error: ErrorInfo | None = None
        self.updated_ms = started_ms
        self.cursor = 0
        self.coro: Coroutine[Any, Any, Any] | None = None
        self.waiting: Wait | None = None
        self.pending_live: LiveCall | None = None
        self.fault: str | None = None
        self.prior: dict[tuple[str, str, str], deque[ResultEntry]] = {}
        # Calls announced in earlier eras and never resolved (see eras.new_era): durable in the
        # snapshot until the new era re-reaches the call and its recovery resolves it.
        self.doubts: list[InFlight] = []
        self.verify_only = False
        # Fan-out branches dispatched and not applied yet, by call_seq (``fanout.Branch``).
        self.branches: dict[int, Any] = {}
        self.era_started_ms = 0  # 0: the era began at started_ms (era 0)
        # Each family's part (``table.Part``: a timer, the accepted signal ids, a cancel, …)
        # by name, absent at its default: one immutable value the family replaces when it
        # changes, so a snapshot capture or an undo mark holds a shallow copy of the dict.
        self.parts: dict[str, Any] = {}
        self.limits = DEFAULT_LIMITS if limits is None else limits
        rec.max_result_bytes = self.limits.max_result_bytes
        # The deployment policy the executor bound (sinks, grants, budgets) and the sink
        # gate's per-run memory (engine.sinkgate); None: no policy / gate not used yet.
        self.policy: Policy | None = None
        self.gate_state: Any = None
        # The Delegation the run runs under, as its StartRun carried it (a commissioned child;
        # engine.sinkgate.carried reads it): None for every other run.
        self.delegation_json: str | None = None
        # The agent's progress notes (ctx.progress) not yet handed to the executor: ephemeral,
        # never journaled nor snapshotted (Runtime.take_progress empties it).
        self.progress: list[dict[str, Any]] = []

    # -- what StepCtx reads (ctx.RunHost) ------------------------------------------------------
    @property
    def clock_ms(self) -> int:
        return self.rec.clock_ms

    @property
    def now(self) -> int:
        """The stamp of the step being built."""
        return self.rec.now

    @property
    def results(self) -> dict[tuple[int, int], ResultEntry]:
        return self.rec.results

    def take_derived_slot(self, family: str) -> int:
        """A call_seq for a derived (unjournaled) draw; notes a divergence if history has a
        journaled call there (the engine quarantines at the agent's next suspension)."""
        call_seq = self.cursor
        self.cursor += 1
        if self.fault is None and self.slot_taken(call_seq):
            self.fault = self.diverged(
                call_seq, f"{family} (derived, unjournaled)", self.slot_desc(call_seq)
            )
        return call_seq

    def calendars_or_wall(self) -> Calendars:
        """The run's calendars (deadlines, calendar timers): the deployment's, or the
        built-in wall clock, built once."""
        if self.calendars is None:
            self.calendars = CalendarRegistry()
        return self.calendars

    # -- slots ---------------------------------------------------------------------------------
    def slot_taken(self, call_seq: int) -> bool:
        if (self.era, call_seq) in self.rec.results:
            return True
        for mark in (self.in_flight, self.parked):
            if mark is not None and mark.era == self.era and mark.call_seq == call_seq:
                return True
        return False

    def slot_desc(self, call_seq: int) -> str:
        return describe_slot(self.rec.results.get((self.era, call_seq)), self.in_flight, call_seq)

    def diverged(self, call_seq: int, issued: str, recorded: str) -> str:
        return divergence(self.era, call_seq, issued, recorded)

    # -- parking -------------------------------------------------------------------------------
    def park(self, kind: ParkKind, ref: str, call_seq: int, status: RunStatus) -> None:
        self.parked = ParkedOn(kind=kind, ref=ref, call_seq=call_seq, era=self.era)
        self.status = status

    def unpark(self) -> None:
        self.parked = None
        self.status = RunStatus.RUNNING
        timeouts.TIMER.put(self, None)  # a timer belongs to the park it bounds

    # -- a wait's timeout ------------------------------------------------------------------------
    # A wait of any family may carry a timeout (its request's ``timeout``): the run holds one,
    # resolved once and journaled with the park, and a wait still open past it ends with
    # ``WaitTimedOut`` (``engine.timeouts``; the timers family delivers it). A family asks
    # here, naming the timeout and nothing of the timer behind it.
    def timeout_at(self, timeout: Mapping[str, Any] | None) -> int | None:
        """The instant ``timeout`` (a timer request) ends a fresh wait; None without one."""
        return None if timeout is None else timeouts.instant(self, timeout)

    def bound_by(self, due: int) -> dict[str, str]:
        """The wait being entered ends at ``due``: the attrs its park record journals."""
        return timeouts.hold(self, due)

    def time_out(self, slot: Slot, due: int) -> Resolution:
        """The wait at ``slot`` ends now with ``WaitTimedOut`` (its timeout is already past)."""
        return timeouts.timed_out(self, slot, due)

    def wait_until(self, slot: Slot, due: int, parked_on: str) -> dict[str, str]:
        """Park the run until the instant ``due`` (a wait that is itself a timer: a call in
        doubt waiting out its deadline), journaling the park (``parked_on``) with the instant;
        the timers row delivers it to the family's ``on_due``. Returns the journaled attrs."""
        self.park(ParkKind.WAKE, str(due), slot.call_seq, RunStatus.PARKED)
        attrs = {"parked_on": parked_on, **timeouts.hold(self, due)}
        self.rec.at(JournalKind.RUN_PARKED, slot, attrs)
        return attrs

    def waits_until(self, call_seq: int) -> bool:
        """Whether the run is parked on an instant at ``call_seq`` of this era (``wait_until``;
        rebuilt while it waits, the park and its instant came back with the snapshot)."""
        parked = self.parked
        return (
            parked is not None
            and parked.kind is ParkKind.WAKE
            and (parked.era, parked.call_seq) == (self.era, call_seq)
            and timeouts.TIMER.of(self) is not None
        )

    def drop_instant(self, due: int) -> None:
        """Drop the run's timer if it is the instant ``due`` of a ``wait_until`` the run no
        longer waits for (a checkpointed restore keeps the armed timer of the era before)."""
        if timeouts.TIMER.of(self) == due:
            timeouts.TIMER.put(self, None)

    def leave_wait(self) -> None:
        """The run leaves its wait, its park and its instant (``timeouts.settle``)."""
        timeouts.settle(self)

    def drop_timeout(self) -> None:
        """The run leaves its wait without a park to clear (a cancel): the timeout goes too."""
        timeouts.TIMER.put(self, None)

    # -- the snapshot --------------------------------------------------------------------------
    def capture(self) -> SnapState:
        # Everything captured is immutable or copied: pending and doubts change in place.
        rec = self.rec
        # tuple.__new__, not SnapState(...): a NamedTuple's own __new__ is a Python function,
        # and one snapshot state is captured per step.
        return tuple.__new__(
            SnapState,
            (
                self.session_id,
                self.spec.capability,
                self.status,
                rec.era,
                rec.next_seq,
                rec.last_hash,
                self.parked,
                self.case_id,
                self.admission_key,
                self.tenant,
                self.initiator,
                self.input_json,
                self.checkpoint_json,
                self.output_json,
                self.error,
                self.started_ms,
                self.updated_ms,
                self.in_flight,
                tuple(self.pending) if self.pending else (),
                self.era_started_ms,
                self.open,
                tuple(self.doubts) if self.doubts else (),
                self.spec.version,
                self.delegation_json,
                self.parts.copy() if self.parts else {},
            ),
        )


class Mark(NamedTuple):
    """What dispatching one effect may change, taken before it runs so that a handler raising
    halfway can be undone. Records already sealed are dropped from the step and the chain tip
    goes back with them: nothing of it was ever emitted. A tuple, not a frozen dataclass: one
    is taken per effect, and a frozen dataclass sets its fields one ``object.__setattr__`` at
    a time."""

    cursor: int
    next_seq: int
    last_hash: str
    outs: tuple[int, int, int, int]
    status: RunStatus
    parked: ParkedOn | None
    in_flight: InFlight | None
    open: OpenRequest | None
    waiting: Wait | None
    pending_live: LiveCall | None
    pending: tuple[Signal, ...]
    doubts: tuple[InFlight, ...]
    checkpoint_json: str | None
    clock_ms: int
    parts: dict[str, Any]  # Run.parts, copied shallowly (every value is immutable)

    @classmethod
    def take(cls, run: Run) -> Mark:
        rec = run.rec
        o = rec.out
        # tuple.__new__: one mark is taken per effect (see capture).
        return tuple.__new__(
            cls,
            (
                run.cursor,
                rec.next_seq,
                rec.last_hash,
                (len(o.records), len(o.results), len(o.commands), len(o.live)),
                run.status,
                run.parked,
                run.in_flight,
                run.open,
                run.waiting,
                run.pending_live,
                tuple(run.pending),
                tuple(run.doubts),
                run.checkpoint_json,
                rec.clock_ms,
                run.parts.copy(),
            ),
        )

    def restore(self, run: Run) -> None:
        rec = run.rec
        o = rec.out
        for entry in o.results[self.outs[1] :]:
            rec.results.pop((entry.era, entry.call_seq), None)
        del (
            o.records[self.outs[0] :],
            o.results[self.outs[1] :],
            o.commands[self.outs[2] :],
            o.live[self.outs[3] :],
        )
        run.cursor, rec.next_seq, rec.last_hash = self.cursor, self.next_seq, self.last_hash
        run.status, run.parked, run.in_flight, run.open = (
            self.status,
            self.parked,
            self.in_flight,
            self.open,
        )
        run.waiting, run.pending_live = self.waiting, self.pending_live
        run.pending, run.doubts = list(self.pending), list(self.doubts)
        run.checkpoint_json, rec.clock_ms = self.checkpoint_json, self.clock_ms
        run.parts = self.parts.copy()  # the mark stays as taken, should it be restored again


def run_from_snapshot(
    spec: AgentSpec,
    snapshot: SessionSnapshot,
    results: Mapping[tuple[int, int], ResultEntry],
    *,
    calendars: Calendars | None,
    tools: Mapping[str, EffectDecl] | None,
    limits: Limits | None = None,
) -> Run:
    """A run's state as its snapshot left it (the coroutine not yet launched)."""
    clock = snapshot.era_started_ms if snapshot.era_started_ms else snapshot.started_ms
    rec = Recorder(
        snapshot.session_id,
        spec.capability,
        era=snapshot.era,
        next_seq=snapshot.next_seq,
        last_hash=snapshot.last_hash,
        results=results,
        now_ms=clock,
    )
    run = Run(
        spec,
        rec,
        case_id=snapshot.case_id,
        admission_key=snapshot.admission_key,
        tenant=snapshot.tenant,
        initiator=snapshot.initiator,
        input_json=snapshot.input_json,
        started_ms=snapshot.started_ms,
        calendars=calendars,
        tools=tools,
        limits=limits,
    )
    run.status = run.status_before = snapshot.status
    run.parked = snapshot.parked_on
    if snapshot.in_flight_json:
        run.in_flight = InFlight.from_json(snapshot.in_flight_json)
    if snapshot.open_request_json:
        run.open = OpenRequest.from_json(snapshot.open_request_json)
    run.doubts = doubts_from_json(snapshot.doubts_json)
    run.pending = list(snapshot.pending_signals)
    run.checkpoint_json = snapshot.checkpoint_json
    run.output_json = snapshot.output_json
    run.error = snapshot.error
    run.updated_ms = snapshot.updated_ms
    run.era_started_ms = snapshot.era_started_ms
    run.delegation_json = snapshot.delegation_json
    # Every family's part, each read from the snapshot's parts or, written before them (or at
    # its default), from its older fields; only those away from their default are kept.
    run.parts = parts_of(snapshot)
    return run
