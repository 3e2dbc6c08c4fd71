"""``Runtime``: one run's resident engine, and its public API.

Pure: it never reads a clock (every public method takes ``now_ms``), never performs a call,
never touches Kafka. Each public method returns a ``Step`` — the decisions the executor
carries out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runplane.core.agents import AgentSpec, Durability, EffectDecl, Recovery, evictable
from runplane.core.engine import commission, fanout, updates
from runplane.core.engine.decode import serve
from runplane.core.engine.doubt import in_doubt, probe_done
from runplane.core.engine.driver import drive, launch
from runplane.core.engine.ends import fail, quarantine
from runplane.core.engine.eras import new_era
from runplane.core.engine.recorder import Recorder
from runplane.core.engine.registry import INBOX
from runplane.core.engine.sinkgate import INPUT_LABEL, result_label
from runplane.core.engine.state import Run, run_from_snapshot
from runplane.core.engine.step import TERMINAL, Event, Quarantine, Step, inbox_event
from runplane.core.engine.values import (
    LiveCall,
    Outcome,
    ReplayReport,
)
from runplane.core.engine.vocab import Calendars, Rejected, Resolution, WaitKind
from runplane.core.limits import Limits
from runplane.core.policy import Policy
from runplane.errors import TerminalError
from runplane.wire import (
    ErrorInfo,
    JournalKind,
    ParkedOn,
    ParkKind,
    ResultEntry,
    RunStatus,
    RunStatusUpdate,
    SessionSnapshot,
    StartRun,
    TenantId,
)

__all__ = ["Runtime", "replay_history"]

_LIVE_WAITS = (WaitKind.LIVE, WaitKind.PROBE)


class Runtime:
    """One run's resident runtime. Build with ``Runtime.start`` or ``Runtime.restore``."""

    __slots__ = ("_run",)

    def __init__(self, run: Run) -> None:
        self._run = run

    # ------------------------------------------------------------------ construction
    @classmethod
    def start(
        cls,
        spec: AgentSpec,
        start: StartRun,
        *,
        now_ms: int,
        calendars: Calendars | None = None,
        tools: Mapping[str, EffectDecl] | None = None,
        limits: Limits | None = None,
        policy: Policy | None = None,
    ) -> tuple[Runtime, Step]:
        """A new run from its StartRun (seq 0 was written by admission; we continue at 1).
        ``limits``: the run's stated limits (``runplane.core.limits``; default DEFAULT_LIMITS)."""
        rec = Recorder(
            start.session_id,
            spec.capability,
            era=0,
            next_seq=1,
            last_hash=start.admitted_hash,
            results={},
            now_ms=start.admitted_ms,
        )
        run = Run(
            spec,
            rec,
            case_id=start.case_id,
            admission_key=start.admission_key,
            tenant=start.tenant,
            initiator=start.initiator,
            input_json=start.input_json,
            started_ms=start.admitted_ms,
            calendars=calendars,
            tools=tools,
            limits=limits,
        )
        run.policy = policy
        run.delegation_json = start.delegation_json  # a child runs under it (sinkgate, commission)
        if start.input_label_json is not None:  # a successor's input: what its predecessor read
            INPUT_LABEL.put(run, INPUT_LABEL.decode(start.input_label_json))
        if policy is not None:
            # The first record the executor writes for the run names the policy it runs under.
            rec.stamp_attrs = {"policy": policy.digest}
        rt = cls(run)
        rt._begin(now_ms)
        run.status_before = RunStatus.ADMITTED
        launch(run)
        return rt, rt._flush()

    @classmethod
    def restore(
        cls,
        spec: AgentSpec,
        snapshot: SessionSnapshot,
        results: Mapping[tuple[int, int], ResultEntry],
        *,
        now_ms: int,
        calendars: Calendars | None = None,
        tools: Mapping[str, EffectDecl] | None = None,
        limits: Limits | None = None,
        policy: Policy | None = None,
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
        run = run_from_snapshot(
            spec, snapshot, results, calendars=calendars, tools=tools, limits=limits
        )
        run.policy = policy
        rt = cls(run)
        rt._begin(now_ms)
        if spec.durability is Durability.CHECKPOINTED:
            new_era(rt._run, snapshot)
        launch(rt._run)
        return rt, rt._flush()

    # ------------------------------------------------------------------ what it is
    @property
    def spec(self) -> AgentSpec:
        return self._run.spec

    @property
    def session_id(self) -> str:
        return self._run.session_id

    @property
    def case_id(self) -> str | None:
        return self._run.case_id

    @property
    def admission_key(self) -> str:
        return self._run.admission_key

    @property
    def tenant(self) -> TenantId:
        return self._run.tenant

    @property
    def initiator(self) -> str:
        return self._run.initiator

    @property
    def era(self) -> int:
        return self._run.era

    @property
    def clock_ms(self) -> int:
        return self._run.clock_ms

    @property
    def restored(self) -> Any:
        return self._run.restored

    @property
    def results(self) -> dict[tuple[int, int], ResultEntry]:
        return self._run.results

    @property
    def status(self) -> RunStatus:
        return self._run.status

    @property
    def parked_on(self) -> ParkedOn | None:
        return self._run.parked

    @property
    def outstanding(self) -> LiveCall | None:
        """The live call this run waits for (None when parked on something else or idle)."""
        wait = self._run.waiting
        if self._run.branches:  # a fan-out: its live branches are in flight together
            return fanout.pending_call(self._run)
        return None if wait is None or wait.kind not in _LIVE_WAITS else self._run.pending_live

    @property
    def ended(self) -> bool:
        return self._run.status in TERMINAL

    def take_progress(self) -> list[dict[str, Any]]:
        """The agent's progress notes since the last take (``ctx.progress``; ephemeral)."""
        notes, self._run.progress = self._run.progress, []
        return notes

    def evictable(self, idle_for_s: float, grace_s: float) -> bool:
        """The pure eviction rule applied to this runtime (see ``agents.evictable``)."""
        return evictable(self.spec.durability, idle_for_s, grace_s, self.outstanding is not None)

    def snapshot(self) -> SessionSnapshot:
        """The run's current snapshot (what the executor writes to ``sessions``)."""
        return self._run.capture().build()

    def take_derived_slot(self, family: str) -> int:
        """A call_seq for a derived (unjournaled) draw (see ``StepCtx.random``)."""
        return self._run.take_derived_slot(family)

    # ------------------------------------------------------------------ inputs
    def complete(self, call_seq: int, outcome: Outcome, *, now_ms: int) -> Step:
        """The executor performed the outstanding live call ``call_seq``; record and go on."""
        self._begin(now_ms)
        run = self._run
        if call_seq in run.branches:  # a fan-out branch: applied in ready order
            return self._answer(fanout.on_outcome(run, call_seq, outcome))
        wait = run.waiting
        if wait is None or wait.kind not in _LIVE_WAITS or wait.slot.call_seq != call_seq:
            return self._flush(Rejected(f"no live call outstanding at call_seq {call_seq}"))
        run.waiting = None
        run.pending_live = None
        if wait.kind is WaitKind.PROBE:
            drive(run, probe_done(run, wait, outcome))
            return self._flush()
        entry = run.rec.result(
            wait.slot,
            JournalKind.EFFECT_RECORDED,
            value=outcome.value,
            error=outcome.error,
            attempts=outcome.attempts,
            cost=outcome.cost,
            label=result_label(run, call_seq, outcome.label),
        )
        run.in_flight = None
        drive(run, serve(run.rec, wait.slot.effect, entry))
        return self._flush()

    def in_doubt(self, call_seq: int, *, now_ms: int) -> Step:
        """The executor performed the outstanding live call ``call_seq`` and cannot tell whether
        it took effect (a timeout after sending, a 5xx): its declared recovery runs now —
        retry, probe or operator task — exactly as for an announce found without outcome on
        restore, but at the same era and slot. Nothing is rebuilt: a checkpointed run does not
        start a new era (which would re-execute, and re-pay, everything since its checkpoint)."""
        self._begin(now_ms)
        run = self._run
        if call_seq in run.branches:  # branches are never mutating: a retryable failure
            doubt = Outcome.failure("InDoubt", "outcome unknown after retries", retryable=True)
            return self._answer(fanout.on_outcome(run, call_seq, doubt))
        wait = run.waiting
        if wait is None or wait.kind is not WaitKind.LIVE or wait.slot.call_seq != call_seq:
            return self._flush(Rejected(f"no live call outstanding at call_seq {call_seq}"))
        flight = run.in_flight
        if flight is not None and (flight.era, flight.call_seq) == (run.era, call_seq):
            recovery = flight.recovery
        else:  # pragma: no cover - every live call is announced first (see tools.live)
            recovery = (
                wait.decl.effective_recovery
                if wait.decl is not None
                else Recovery.REQUIRES_OPERATOR
            )
        run.waiting = None
        run.pending_live = None
        try:
            resolution = in_doubt(run, wait.slot, recovery)
        except Exception as exc:  # as in the driver: never an exception out of the engine
            message = f"in-doubt recovery failed: {type(exc).__name__}: {exc}"[:500]
            fail(run, ErrorInfo(type="InvalidRequest", message=message, retryable=False))
            return self._flush()
        drive(run, resolution)
        return self._flush()

    def deliver(self, event: Event, *, now_ms: int) -> Step:
        """An inbox event for this run: one a family's row serves, or a quarantine request
        (``step.inbox_event`` reads one off the event that carries it)."""
        self._begin(now_ms)
        run = self._run
        if event.session_id != run.session_id:
            return self._flush(
                Rejected(f"event for session {event.session_id!r} delivered to {run.session_id!r}")
            )
        if self.ended:
            return self._flush(Rejected(f"run already ended ({run.status})"))
        event = inbox_event(event)  # a quarantine request rides on an inbox event
        if isinstance(event, Quarantine):
            quarantine(run, event.reason)
            return self._flush()
        handler = INBOX.get(type(event))
        if handler is None:  # pragma: no cover - typed callers cannot get here
            return self._flush(Rejected(f"unknown event type {type(event).__name__}"))
        return self._answer(handler(run, event))

    def _answer(self, answer: Resolution | Rejected) -> Step:
        """Resume the agent with a handler's answer (or reject the input that brought none)."""
        if isinstance(answer, Rejected):
            return self._flush(answer)
        drive(self._run, answer)
        return self._flush()

    def quarantine(self, reason: str, *, now_ms: int) -> Step:
        """Quarantine the run from outside (e.g. the journal service found its chain broken)."""
        self._begin(now_ms)
        if not self.ended:
            quarantine(self._run, reason)
        return self._flush()

    def close(self) -> None:
        """Drop the coroutine (eviction). ``GeneratorExit`` runs the agent's ``finally``s."""
        run = self._run
        if run.coro is not None:
            run.coro.close()
            run.coro = None

    # ------------------------------------------------------------------ steps
    def _begin(self, now_ms: int) -> None:
        run = self._run
        run.rec.begin(now_ms)
        run.updated_ms = now_ms
        run.status_before = run.status

    def _flush(self, rejected: Rejected | None = None) -> Step:
        run = self._run
        rec = run.rec
        if run.status != run.status_before:
            parked = run.parked
            task_id = (
                parked.ref
                if parked is not None and parked.kind in (ParkKind.TASK, ParkKind.OPERATOR)
                else None
            )
            # seq: where in the chain the status changed — admission orders updates by it, not
            # by the wall clocks of whichever executors owned the run.
            rec.out.commands.append(
                RunStatusUpdate(
                    admission_key=run.admission_key,
                    run_id=run.session_id,
                    status=run.status,
                    task_id=task_id,
                    updated_ms=rec.now,
                    seq=rec.next_seq - 1,
                    tenant=run.tenant,  # admission's claims are per (tenant, key)
                )
            )
        if run.status_before is RunStatus.ADMITTED and run.status is not RunStatus.ADMITTED:
            started = commission.child_started(run)  # a child tells its parent its run id
            if started is not None:
                rec.out.commands.append(started)
        if run.status in TERMINAL and run.status != run.status_before:
            reply = commission.child_reply(run)  # a commissioned child tells its parent
            if reply is not None:
                rec.out.commands.append(reply)
            rec.out.commands.extend(updates.unanswered(run))  # their callers stop waiting
        out = rec.out  # the step's buffer: the next step begins with a fresh one
        run.status_before = run.status
        return Step(
            records=tuple(out.records),
            results=tuple(out.results),
            commands=tuple(out.commands),
            live_calls=tuple(out.live),
            _state=run.capture(),
            parked_on=run.parked,
            end=run.status if run.status in TERMINAL and out.records else None,
            replayed=out.replayed,
            rejected=None if rejected is None else rejected.reason,
            rejected_kind=None if rejected is None else rejected.kind,
        )


def replay_history(
    spec: AgentSpec,
    snapshot: SessionSnapshot,
    results: Mapping[tuple[int, int], ResultEntry],
    *,
    calendars: Calendars | None = None,
) -> ReplayReport:
    """Replay a run's whole history in its last era without extending it (audit, tests,
    golden journals). Any call the history cannot answer is a divergence, never performed."""
    run = run_from_snapshot(spec, snapshot, results, calendars=calendars, tools=None)
    run.status = RunStatus.RUNNING
    run.parked = None
    run.in_flight = None
    run.doubts = []
    run.verify_only = True
    run.rec.begin(snapshot.updated_ms)
    run.updated_ms = snapshot.updated_ms
    launch(run)
    out = run.rec.out
    divergence = (
        run.error.message if run.status is RunStatus.QUARANTINED and run.error is not None else None
    )
    output = (
        json.loads(run.output_json)
        if run.status is RunStatus.COMPLETED and run.output_json is not None
        else None
    )
    return ReplayReport(run.status, output, out.replayed, len(out.live), divergence)
