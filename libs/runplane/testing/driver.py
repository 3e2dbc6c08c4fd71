"""The in-memory Driver, with a fake clock and a scripted model (``runplane.testing``'s door).

    driver = Driver(REGISTRY, tools={"fetch_invoice": fetch, "charge_card": charge})
    run = driver.run("refund", {"invoice_id": "inv-7"})
    assert run.status is RunStatus.AWAITING_HUMAN
    run = driver.decide(run.session_id, "APPROVED")
    assert run.status is RunStatus.COMPLETED and driver.tool_calls["charge_card"] == 1

The driver plays the executor and the other services in memory, with the same commit
discipline as the real executor: a Step is committed whole (journal records, result entries,
snapshot, commands); a step whose live call may let its announce ride with the outcome is
held back and committed with the outcome. ``crash`` drops the resident runtime and anything
uncommitted, and the next message rebuilds the run with ``Runtime.restore`` — so a test can
crash a run anywhere and check what the platform promises.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from runplane.core import (
    AgentRegistry,
    AgentSpec,
    ChainCheck,
    EffectDecl,
    Generation,
    LiveCall,
    Outcome,
    Runtime,
    Step,
    canonical_json,
    verify_chain,
)
from runplane.core.engine import Command, Event, apply_step
from runplane.core.limits import Limits
from runplane.core.policy import Policy
from runplane.errors import RetryableError
from runplane.kafka.routes import route
from runplane.testing.closing import close_reply
from runplane.testing.operate import OperateVerbs
from runplane.testing.plans import AdmissionVerbs
from runplane.testing.session import _Session
from runplane.wire import (
    AdmissionRequest,
    CancelDeadline,
    CaseReply,
    CloseCase,
    CloseTask,
    DecisionOutcome,
    GetCaseState,
    JournalRecord,
    MeetDeadline,
    OpenTask,
    PutCaseState,
    RegisterDeadline,
    ResultEntry,
    RunStatus,
    SessionSnapshot,
    Signal,
    StartRun,
    TaskDecision,
    UpdateAnswer,
    Wake,
)

__all__ = ["Crash", "Driver", "FakeClock", "Replying", "RunView", "ScriptedProvider"]


class FakeClock:
    """A clock a test controls: ``now_ms()`` returns the current value, then steps it."""

    def __init__(self, start_ms: int = 1_700_000_000_000, step_ms: int = 1) -> None:
        self._now = start_ms
        self._step = step_ms

    def now_ms(self) -> int:
        value = self._now
        self._now += self._step
        return value

    def advance(self, ms: int) -> None:
        self._now += ms


class ScriptedProvider:
    """A ``ModelProvider`` answering from a script: a list of replies (cycled) or a function
    of (model, prompt, params). ``calls`` counts generations actually performed."""

    def __init__(
        self,
        replies: Iterable[str] | Callable[[str, Any, Mapping[str, Any]], str] = ("ok",),
        *,
        name: str = "scripted",
    ) -> None:
        self.name = name
        self._fn = replies if callable(replies) else None
        self._replies = [] if callable(replies) else list(replies)
        self.calls = 0

    def reply(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        text = (
            self._fn(model, prompt, params)
            if self._fn is not None
            else self._replies[self.calls % len(self._replies)]
        )
        self.calls += 1
        prompt_text = prompt if isinstance(prompt, str) else canonical_json(prompt)
        return Generation(
            text=text, tokens_in=len(prompt_text.split()), tokens_out=len(text.split())
        )

    async def generate(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        return self.reply(model, prompt, params)


class Replying(Protocol):
    """What the Driver asks a model of: ``ScriptedProvider`` (text) or
    ``models.ScriptedModel`` (tool calls). ``reply`` is handed the turn's exact prompt and
    params — the messages, the ``tools`` offered and ``tool_choice`` of an agent loop's turn."""

    name: str

    def reply(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation: ...


class Crash(Exception):
    """Raised by a crash hook to simulate the process dying at that point."""


@dataclass(frozen=True)
class RunView:
    """What a test looks at: the committed state of one run."""

    session_id: str
    status: RunStatus
    output: Any
    error: str | None
    journal: tuple[JournalRecord, ...]
    results: Mapping[tuple[int, int], ResultEntry]
    snapshot: SessionSnapshot
    open_tasks: tuple[OpenTask, ...]

    @property
    def task(self) -> OpenTask | None:
        return self.open_tasks[0] if self.open_tasks else None


ToolFn = Callable[..., Any]
CrashHook = Callable[[str, LiveCall], bool]


class Driver(OperateVerbs, AdmissionVerbs):
    """An in-memory executor + cases + worklist for one or many runs.

    ``tools``: name → ``fn(args, idempotency_key)`` (sync or async); raise ``RetryableError``
    for a transient failure (retried per the call's policy), anything else fails the call.
    ``providers``: name → ``ScriptedProvider`` or ``ScriptedModel`` (tool calls). ``approve``: decide approval tasks
    automatically (an outcome name, or a function of the OpenTask returning one or None).
    ``crash_hook(phase, call)``: return True to crash at ``phase`` ("before_act" /
    "after_act") of a live call.
    """

    def __init__(
        self,
        agents: AgentRegistry | AgentSpec | Iterable[AgentSpec],
        *,
        tools: Mapping[str, ToolFn] | None = None,
        providers: Mapping[str, Replying] | None = None,
        clock: FakeClock | None = None,
        calendars: Any = None,
        cases: Mapping[str, Any] | None = None,
        approve: str | Callable[[OpenTask], str | None] | None = None,
        crash_hook: CrashHook | None = None,
        limits: Limits | None = None,
        policy: Policy | None = None,
    ) -> None:
        if isinstance(agents, AgentRegistry):
            self.agents = agents
        else:
            self.agents = AgentRegistry([agents] if isinstance(agents, AgentSpec) else agents)
        self.tools = dict(tools or {})
        # What the executor would offer for them: Python functions, performed in process (an
        # agent's own declaration of a tool still wins, as in the executor).
        self._offered = {name: EffectDecl(name, in_process=True) for name in self.tools}
        self.providers: dict[str, Replying] = dict(providers or {"scripted": ScriptedProvider()})
        self.clock = clock or FakeClock()
        self.calendars = calendars
        self.cases: dict[str, tuple[Any, int]] = {k: (v, 1) for k, v in (cases or {}).items()}
        self.obligations: dict[tuple[str, str], dict[str, Any]] = {}
        self.closed_cases: set[str] = (
            set()
        )  # a test adds a case id: its deadline commands are refused
        self.closed_tasks: list[str] = []  # task ids the runs withdrew (CloseTask)
        self.tasks_opened: list[
            str
        ] = []  # every OpenTask sent, in order (a person asked once → once)
        self.approve = approve
        self.crash_hook = crash_hook
        self.limits = limits  # a run's stated limits (runplane.core.limits); None: the defaults
        self.policy = policy  # the deployment policy runs are bound to (sink gate, budgets)
        self.sessions: dict[str, _Session] = {}
        # Inbox events the runs refused (four-eyes, a bad edit), with the reason.
        self.rejected: list[tuple[Event, str]] = []
        self.tool_calls: Counter[str] = Counter()
        self.live_calls = 0
        self.replayed = 0
        self.crashes = 0
        self._inbox: deque[Event] = deque()
        self._starts: deque[StartRun] = deque()
        self._counter = 0
        # Commissions: child runs to admit (as admission would), and each key's one child.
        self._admissions: deque[AdmissionRequest] = deque()
        self.children: dict[str, str] = {}
        # Every UpdateAnswer the runs sent (runs.updates), in order.
        self.answers: list[UpdateAnswer] = []

    # ------------------------------------------------------------------ the test's verbs
    def run(
        self,
        capability: str,
        input: Any,
        *,
        session_id: str | None = None,
        case_id: str | None = None,
        agent_version: str | None = None,
    ) -> RunView:
        """Admit and start a run; process everything that follows until the platform is idle.
        ``agent_version``: the emitter's pin (None: the newest version registered)."""
        self._counter += 1
        sid = session_id or f"run-{self._counter}"
        self._start(sid, capability, canonical_json(input), f"key-{sid}", case_id, agent_version)
        self._drain()
        return self.view(sid)

    def decide(
        self,
        session_id: str,
        outcome: str = "APPROVED",
        *,
        comment: str = "",
        by: tuple[str, ...] = ("reviewer",),
        task_id: str | None = None,
        edits: Mapping[str, Any] | None = None,
    ) -> RunView:
        """Decide the run's open task (approval or operator verdict); ``task_id``: which one
        (a panel has one per seat), else the first. ``edits``: a call approval's arguments
        changed by the decider (``ctx.approve_call``), sent as the worklist sends them,
        unchecked, so the engine's own check is what a test sees. A decision the run refuses
        (four-eyes, a bad edit) is noted in ``rejected`` and its task stays open."""
        session = self.sessions[session_id]
        if not session.open_tasks:
            raise AssertionError(f"run {session_id} has no open task")
        task = session.open_tasks[task_id or next(iter(session.open_tasks))]
        decision = self._decision(task, outcome, comment, by)
        if edits is not None:
            decision = replace(decision, edits_json=canonical_json(dict(edits)))
        self._inbox.append(decision)
        self._drain()
        if self.rejected and self.rejected[-1][0] is decision:
            session.open_tasks[task.task_id] = task  # the run still waits on it
        return self.view(session_id)

    def crash(self, session_id: str) -> None:
        """Drop the resident runtime (a crash or an eviction): the next message rebuilds it."""
        self._crashed(self.sessions[session_id])

    def wake(self, session_id: str) -> RunView:
        """Deliver a Wake (rebuilds a non-resident run, e.g. to resolve a call in doubt)."""
        self._inbox.append(Wake(session_id=session_id, reason="wake", sent_ms=self.clock.now_ms()))
        self._drain()
        return self.view(session_id)

    def view(self, session_id: str) -> RunView:
        session = self.sessions[session_id]
        snap = session.snapshot
        if snap is None:
            raise AssertionError(f"run {session_id} has no committed snapshot")
        output = json.loads(snap.output_json) if snap.output_json is not None else None
        error = None if snap.error is None else f"{snap.error.type}: {snap.error.message}"
        return RunView(
            session_id,
            snap.status,
            output,
            error,
            tuple(session.journal),
            dict(session.results),
            snap,
            tuple(session.open_tasks.values()),
        )

    def verify(self, session_id: str) -> ChainCheck:
        session = self.sessions[session_id]
        return verify_chain(session.journal, session.results)

    # ------------------------------------------------------------------ the executor's loop
    def _restart(self, sid: str, start: StartRun) -> RunView:
        self._boot(sid, start)
        self._drain()
        return self.view(sid)

    def _boot(self, sid: str, start: StartRun) -> None:
        """Start a run as the executor does on its StartRun. A crash before the first commit
        leaves the StartRun in the inbox: the run is started again from its admission record;
        after it, a restart Wake rebuilds the run from what was committed."""
        session = self.sessions[sid]
        admitted = session.journal[:1]
        while True:
            try:
                runtime, step = Runtime.start(
                    self.agents.spec_for(start.capability, start.agent_version),
                    start,
                    now_ms=self.clock.now_ms(),
                    calendars=self.calendars,
                    tools=self._offered,
                    limits=self.limits,
                    policy=self.policy,
                )
                session.runtime = runtime
                self._handle(session, runtime, step)
                return
            except Crash:
                self._crashed(session)
                if session.snapshot is not None:
                    wake = Wake(session_id=sid, reason="restart", sent_ms=self.clock.now_ms())
                    self._inbox.append(wake)
                    return
                session.journal = list(admitted)

    def _crashed(self, session: _Session) -> None:
        if session.runtime is not None:
            session.runtime.close()
        session.runtime = None
        self.crashes += 1

    def _drain(self) -> None:
        while self._inbox or self._admissions:
            if self._admissions:
                self._admit(self._admissions.popleft())
                continue
            event = self._inbox.popleft()
            session = self.sessions.get(event.session_id)
            if session is None or session.snapshot is None:
                continue
            try:
                runtime = session.runtime
                if runtime is None:
                    if session.snapshot.status in (
                        RunStatus.COMPLETED,
                        RunStatus.FAILED,
                        RunStatus.QUARANTINED,
                    ):
                        continue
                    snap = session.snapshot
                    spec = self.agents.spec_for(snap.capability, snap.agent_version)
                    runtime, step = Runtime.restore(
                        spec,
                        session.snapshot,
                        session.results,
                        now_ms=self.clock.now_ms(),
                        calendars=self.calendars,
                        tools=self._offered,
                        limits=self.limits,
                        policy=self.policy,
                    )
                    session.runtime = runtime
                    self._handle(session, runtime, step)
                if isinstance(event, Wake) and event.reason in ("restart", "wake"):
                    continue
                step = runtime.deliver(event, now_ms=self.clock.now_ms())
                if step.rejected is None:
                    self._handle(session, runtime, step)
                else:
                    self.rejected.append((event, step.rejected))
            except Crash:
                self._crashed(session)
                # The event was not committed as consumed: it is delivered again after restart.
                self._inbox.appendleft(event)
        while self._starts:
            start = self._starts.popleft()
            self._restart(start.session_id, start)

    def _handle(self, session: _Session, runtime: Runtime, step: Step) -> None:
        """Carry out a step like the executor: announce rule, live calls, commit, commands."""
        held = [step]
        # A fan-out hands over several at once; each call with the step that asked for it.
        calls = deque((step, call) for call in step.live_calls)
        while calls:
            owner, call = calls.popleft()
            if owner.performs_after_commit(call):
                self._commit(session, held)
                held = []
            if self.crash_hook is not None and self.crash_hook("before_act", call):
                raise Crash("before_act")
            outcome = self._perform(call)
            if self.crash_hook is not None and self.crash_hook("after_act", call):
                raise Crash("after_act")
            done = runtime.complete(call.call_seq, outcome, now_ms=self.clock.now_ms())
            held.append(done)
            calls.extend((done, c) for c in done.live_calls)
        self._commit(session, held)

    def _commit(self, session: _Session, steps: list[Step]) -> None:
        out = _SessionOut(self, session)
        for step in steps:
            apply_step(step, out)
            self.replayed += step.replayed

    def _perform(self, call: LiveCall) -> Outcome:
        self.live_calls += 1
        if call.family == "generation":
            provider = self.providers[call.target]
            generation = provider.reply(
                str(call.request["model"]), call.request["prompt"], call.request["params"]
            )
            return Outcome.success(generation.to_json(), cost=generation.cost())
        fn = self.tools.get(call.target)
        if fn is None:
            return Outcome.failure("UnknownTool", f"no tool {call.target!r}")
        attempts = 0
        while True:
            attempts += 1
            self.tool_calls[call.target] += 1
            try:
                value = fn(dict(call.request["args"]), call.idempotency_key)
                if inspect.isawaitable(value):
                    value = asyncio.run(_await(value))
                return Outcome.success(value, attempts=attempts)
            except RetryableError as exc:
                if attempts >= call.retry.max_attempts:
                    return Outcome.failure(
                        type(exc).__name__, str(exc), retryable=True, attempts=attempts
                    )
            except Exception as exc:
                return Outcome.failure(type(exc).__name__, str(exc), attempts=attempts)

    # ------------------------------------------------------------------ the other services
    def _route(self, session: _Session, command: Command) -> None:
        """Hand ``command`` to the stand-in of the service that reads the topic the executor
        writes it to: one command table for both (``runplane.kafka.routes``)."""
        topic = route(command).topic
        if topic == "tasks.commands":
            self._worklist(session, command)
        elif topic == "cases.commands":
            self._cases_service(command)
        elif topic == "admission":  # a child admitted; a status needs no stand-in (snapshots)
            if isinstance(command, AdmissionRequest):
                self._admissions.append(command)
        elif topic == "journal" and isinstance(command, JournalRecord):  # a successor's seq 0
            self.sessions.setdefault(command.session_id, _Session()).journal.append(command)
        elif topic == "runs.inbox" and isinstance(command, StartRun):
            self._starts.append(command)  # started once the current step is committed
        elif topic == "runs.inbox" and isinstance(command, Signal):
            self._inbox.append(command)  # a child's result, for its parent
        elif topic == "runs.updates" and isinstance(command, UpdateAnswer):
            self.answers.append(command)  # an update's answer, for its caller (Driver.update)
        else:
            raise TypeError(f"the Driver has no stand-in for {type(command).__name__} on {topic}")

    def _worklist(self, session: _Session, command: Command) -> None:
        """The worklist, in small: approval tasks decided by ``approve``, withdrawals noted."""
        if isinstance(command, CloseTask):
            session.open_tasks.pop(command.task_id, None)
            self.closed_tasks.append(command.task_id)
            return
        if not isinstance(command, OpenTask):
            raise TypeError(f"the worklist stand-in does not take {type(command).__name__}")
        session.open_tasks[command.task_id] = command
        self.tasks_opened.append(command.task_id)
        verdict = self.approve(command) if callable(self.approve) else self.approve
        if verdict is not None and command.kind.value == "APPROVAL":
            # As the worklist would: as many distinct people as the task needs approvals
            # (the runtime rejects fewer, and the initiator, as four-eyes requires).
            by = ("auto-reviewer", *(f"auto-reviewer-{i}" for i in range(2, command.approvals + 1)))
            if "/panel/" in command.task_id:  # a panel counts one person on one seat
                by = (f"auto-reviewer@{command.task_id.rsplit('/panel/', 1)[1]}",)
            self._inbox.append(self._decision(command, verdict, "", by))

    def _cases_service(self, command: Command) -> None:
        """The cases service, in small: state reads and writes, closing, obligations."""
        if isinstance(command, (GetCaseState, PutCaseState)):
            self._inbox.append(self._case_reply(command))
        elif isinstance(command, CloseCase):
            reply = close_reply(command, self.obligations, self.closed_cases, self.cases)
            self._inbox.append(reply)
        elif isinstance(command, (RegisterDeadline, MeetDeadline, CancelDeadline)):
            reply = self._deadline_reply(command)
            if command.reply_to is not None:
                self._inbox.append(reply)
        else:
            raise TypeError(f"the cases stand-in does not take {type(command).__name__}")

    def _decision(
        self, task: OpenTask, outcome: str, comment: str, by: tuple[str, ...]
    ) -> TaskDecision:
        if outcome != "ESCALATED":  # the worklist reopens an escalated task for another role
            self.sessions[task.session_id].open_tasks.pop(task.task_id, None)
        return TaskDecision(
            session_id=task.session_id,
            task_id=task.task_id,
            era=task.era,
            call_seq=task.call_seq,
            outcome=DecisionOutcome(outcome),
            comment=comment,
            decided_by=by,
            decided_ms=self.clock.now_ms(),
        )

    def _deadline_reply(
        self, command: RegisterDeadline | MeetDeadline | CancelDeadline
    ) -> CaseReply:
        """The cases service's obligation rules, in small: one open obligation per name (the
        same due again is accepted), meet/cancel only what is open, repeats accepted."""
        key = (command.case_id, command.name)
        found = self.obligations.get(key)
        reason: str | None = None
        if command.case_id in self.closed_cases:
            reason = "case is closed"
        elif isinstance(command, RegisterDeadline):
            if (
                found is not None
                and found["status"] == "OPEN"
                and found["due_ms"] != command.due_ms
            ):
                reason = f"obligation {command.name!r} is already open (due {found['due_ms']})"
            else:
                self.obligations[key] = {
                    "due_ms": command.due_ms,
                    "warn_ms": command.warn_ms,
                    "status": "OPEN",
                    "on_breach": command.on_breach,
                }
        else:
            target = "MET" if isinstance(command, MeetDeadline) else "CANCELLED"
            if found is None:
                reason = f"no obligation named {command.name!r}"
            elif found["status"] not in ("OPEN", target):
                reason = f"obligation {command.name!r} is already {found['status'].lower()}"
            else:
                found["status"] = target
        op = {
            RegisterDeadline: "register_deadline",
            MeetDeadline: "meet_deadline",
            CancelDeadline: "cancel_deadline",
        }[type(command)]
        _, version = self.cases.get(command.case_id, (None, 0))
        return CaseReply(
            session_id=command.reply_to or "",
            request_id=command.request_id,
            case_id=command.case_id,
            era=command.era,
            call_seq=command.call_seq,
            op=op,
            accepted=reason is None,
            version=version,
            reason=reason,
        )

    def _case_reply(self, command: GetCaseState | PutCaseState) -> CaseReply:
        state, version = self.cases.get(command.case_id, (None, 0))
        common: dict[str, Any] = {
            "session_id": command.reply_to or "",
            "request_id": command.request_id,
            "case_id": command.case_id,
            "era": command.era,
            "call_seq": command.call_seq,
        }
        if isinstance(command, GetCaseState):
            return CaseReply(
                op="get_state",
                accepted=True,
                state_json=canonical_json(state),
                version=version,
                **common,
            )
        if command.expected_version != version:
            return CaseReply(
                op="put_state",
                accepted=False,
                version=version,
                reason=f"case is at version {version}",
                **common,
            )
        self.cases[command.case_id] = (json.loads(command.state_json), version + 1)
        return CaseReply(
            op="put_state",
            accepted=True,
            state_json=command.state_json,
            version=version + 1,
            **common,
        )


class _SessionOut:
    """A step carried into the driver's memory: the executor's ``apply_step``, in memory."""

    def __init__(self, driver: Driver, session: _Session) -> None:
        self._driver = driver
        self._session = session

    def put_records(self, records: tuple[JournalRecord, ...]) -> None:
        self._session.journal.extend(records)

    def put_results(self, entries: tuple[ResultEntry, ...]) -> None:
        for entry in entries:
            self._session.results[(entry.era, entry.call_seq)] = entry

    def put_commands(self, commands: tuple[Command, ...]) -> None:
        for command in commands:
            self._driver._route(self._session, command)

    def put_snapshot(self, snapshot: SessionSnapshot) -> None:
        self._session.snapshot = snapshot

    def run_ended(self, status: RunStatus) -> None:
        self._session.open_tasks.clear()


async def _await(value: Any) -> Any:
    return await value
