"""StepCtx: the only door between an agent and the world.

An agent is ``async def agent(ctx: StepCtx, input) -> output``. Every journaled method returns
an awaitable ``Effect``; awaiting it yields the Effect itself to whoever drives the coroutine
— the ``Runtime``, by ``coroutine.send()``, with no event loop. The runtime either answers at
once (a replayed slot, a local observation) or keeps the coroutine suspended until the
executor brings the outcome (a live call, a task decision, a case reply, a signal).

``now()``, ``random()`` and ``randint()`` are synchronous: they never wait and journal
nothing (derived from the journal and the run's seed).

Errors an agent may catch derive from ``EffectError`` (an ``Exception``). Nothing the engine
uses for control flow is ever thrown into agent code: parking leaves the coroutine suspended,
eviction closes it (``GeneratorExit``, a ``BaseException``), and a divergence is detected
outside the agent, so ``except Exception:`` cannot swallow a park or a quarantine.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from runplane.core import loop, memory, plannedloop, planrun
from runplane.core.agents import Generation, Recovery
from runplane.core.callapproval import call_request
from runplane.core.determinism import derive_randint, derive_random
from runplane.core.effect import Decision, Effect, Op
from runplane.core.groups import Group
from runplane.core.jsonpaths import unwrap
from runplane.core.labels import Wrapper
from runplane.core.panels import panel_effect
from runplane.core.releases import release_request
from runplane.core.updates import Update, wire_name
from runplane.core.waits import Duration, timer_request

if TYPE_CHECKING:
    from runplane.core.agents import AgentSpec, EffectDecl
    from runplane.core.allotments import Allotment
    from runplane.core.loop import Approver, Handoff, LoopBudget, LoopResult
    from runplane.core.plan import BatchStatus, Contract, Delegation, Plan, QuorumOutcome
    from runplane.core.plannedloop import PlannedResult
    from runplane.core.planrun import Proposer
    from runplane.core.policy import Policy
    from runplane.wire import Label

__all__ = ["InlineAnswers", "RunHost", "StepCtx"]


class RunHost(Protocol):
    """What a ``StepCtx`` reads of the run it belongs to. The engine's run state provides it;
    ``StepCtx`` names only these protocols, so the context module never imports the engine
    (which imports the context)."""

    @property
    def spec(self) -> AgentSpec: ...
    @property
    def session_id(self) -> str: ...
    @property
    def case_id(self) -> str | None: ...
    @property
    def era(self) -> int: ...
    @property
    def restored(self) -> Any: ...
    @property
    def clock_ms(self) -> int: ...
    @property
    def seed(self) -> str: ...
    @property
    def tools(self) -> Mapping[str, EffectDecl]: ...
    @property
    def policy(self) -> Policy | None: ...  # the deployment policy the executor bound

    def take_derived_slot(self, family: str) -> int: ...


class InlineAnswers(Protocol):
    """The ``StepCtx`` calls the engine answers on the spot, with no effect for the agent to
    await: the sink gate's label of a value or of a proposed call, and the patch markers. The
    engine's driver provides them over the run (the sink gate and the markers sit above the
    run's state)."""

    def label_of(self, value: Any) -> Any: ...

    def call_labels(self, call_id: str, tool: str, arguments: Any) -> Any:
        """The sink gate's exact labels (by path) of a call the model proposed in the last
        turn that proposed calls, or None if that turn proposed no such call."""

    def patch(self, change_id: str, *, deprecated: bool) -> bool: ...

    def progress(self, note: Mapping[str, Any]) -> None:
        """Hold an agent's progress note for the run's live stream (dropped on replay)."""


class StepCtx:
    """The context of one run inside one era. Built by the Runtime; agents only call it."""

    def __init__(self, runtime: RunHost, inline: InlineAnswers) -> None:
        self._rt = runtime
        self._inline = inline

    # -- identity ---------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        """The run's id (the wire's ``session_id``): the same in every era and replay, so it
        is what idempotency keys derive from."""
        return self._rt.session_id

    @property
    def session_id(self) -> str:
        """Deprecated: ``run_id`` (one name per concept); kept for one release."""
        return self._rt.session_id

    @property
    def capability(self) -> str:
        return self._rt.spec.capability

    @property
    def case_id(self) -> str | None:
        return self._rt.case_id

    @property
    def era(self) -> int:
        return self._rt.era

    @property
    def restored(self) -> Any:
        """The state of the last ``checkpoint`` when this era began from one, else None."""
        return self._rt.restored

    # -- tiers 1 and 2: derived, journal nothing ------------------------------------------------
    def now(self) -> int:
        """The logical clock, in ms since the epoch.

        The stamp of the step the agent is in: after a replayed call, that call's recorded
        stamp; after a fresh call, the stamp it was recorded at; before any call in this era,
        the stamp that opened the era (admission, or the restore). It advances only when the
        run observes something, so two reads with no call between are equal — on first run
        and on every replay alike.
        """
        return self._rt.clock_ms

    def random(self) -> float:
        """A float in [0, 1), derived from (session_seed, call_seq); takes a call_seq."""
        call_seq = self._rt.take_derived_slot("random")
        return derive_random(self._rt.seed, call_seq)

    def randint(self, low: int, high: int) -> int:
        """An integer in [low, high], derived like ``random``; takes a call_seq."""
        call_seq = self._rt.take_derived_slot("random")
        return derive_randint(self._rt.seed, call_seq, low, high)

    def label_of(self, value: Any) -> Any:
        """The label (``runplane.wire.Label``) the sink gate would give ``value`` at this point
        of the run: joined from every earlier output it matches and its ``Labeled`` wrappers
        (docs/security.md). Journals nothing; the same on replay (only outputs recorded before
        this point count)."""
        return self._inline.label_of(value)

    def progress(self, message: str = "", **data: Any) -> None:
        """Tell whoever watches the run how it is going (``runs.stream``, kind ``PROGRESS``).

        **Ephemeral**: journals nothing, takes no call_seq, never changes what the run does,
        and is best effort — a watcher may miss it, a replay does not repeat it (a note made
        while the run replays its history is dropped), and ``runplane runs show`` never shows
        it. Use it for "read 3 of 10 documents", never for anything a decision depends on.
        ``data`` must be JSON-serialisable."""
        self._inline.progress({"message": str(message), **data})

    # -- patch markers (runplane.core.engine.patches) ---------------------------------------
    def patched(self, change_id: str) -> bool:
        """True for new runs and for histories that recorded this marker here, False for a
        history that predates the change (its old calls replay unchanged); journaled."""
        return self._inline.patch(change_id, deprecated=False)

    def deprecate_patch(self, change_id: str) -> None:
        """The change is in every run now: consume a recorded marker, record none."""
        self._inline.patch(change_id, deprecated=True)

    # -- journaled effects -------------------------------------------------------------------
    def generate(self, provider: str, model: str, prompt: Any, **params: Any) -> Effect:
        """A model call (family ``generation``, name ``model:<provider>/<model>``) → Generation.

        Replayable runs serve it from the result journal on replay; checkpointed runs
        re-execute it after a restore.
        """
        prompt, wrapped = _unwrap(prompt, "$")
        request = {"provider": provider, "model": model, "prompt": prompt, "params": params}
        options: dict[str, Any] = {"decode": Generation.from_json}
        if wrapped:
            options["wrapped"] = wrapped
        return Effect("generation", f"model:{provider}/{model}", request, Op.LIVE, options)

    def tool(
        self,
        name: str,
        args: Mapping[str, Any],
        *,
        mutating: bool | None = None,
        recovery: Recovery | str | None = None,
        idempotency_key: str | None = None,
    ) -> Effect:
        """A tool call (family ``tool``, name ``tool://<name>``) → the tool's JSON value.

        ``mutating``/``recovery`` override the agent's and the tool's declarations; whatever
        stays undeclared is treated as mutating with recovery ``requires_operator``.
        ``idempotency_key`` is part of the request (and of its witness) and is how a mutation
        is recognised across eras and by the peer.
        """
        plain, wrapped = _unwrap(dict(args), "$")
        request = {"tool": name, "args": plain, "idempotency_key": idempotency_key}
        options: dict[str, Any] = {
            "tool": name,
            "mutating": mutating,
            "recovery": None if recovery is None else Recovery(recovery),
        }
        if wrapped:
            options["wrapped"] = wrapped
        return Effect("tool", f"tool://{name}", request, Op.LIVE, options)

    def group(self, name: str, members: Iterable[str]) -> Group:
        """An effect group (``runplane.core.groups``): ``async with ctx.group("checkout",
        ["inventory", "notify"]) as g`` — reversible members act now and register their undo,
        deferred members run at ``g.commit(invariants)``; an abandoned group is reversed."""
        return Group(self, name, members)

    def release(
        self,
        value: Any,
        *,
        destination: str,
        field: str,
        basis: str,
        evidence: Any = None,
        trust: bool = True,
        sensitivity: str | None = None,
        role: str = "security",
        approvals: int = 1,
    ) -> Effect:
        """Ask to improve ``value``'s label for ``destination`` (a sink name) at ``field`` →
        ``Released`` (``runplane.core.releases``); ``ReleaseRefused`` if denied. Policy grants
        it at once or a person with ``role`` decides on the worklist; journaled, never asked
        again on replay. Pass the ``Released`` itself in the destination's arguments."""
        request = release_request(
            _unwrap(value, "$")[0],
            destination=destination,
            field=field,
            basis=basis,
            evidence=evidence,
            trust=trust,
            sensitivity=sensitivity,
            role=role,
            approvals=approvals,
        )
        return Effect("release", f"release:{destination}", request, Op.RELEASE)

    def observe(self, name: str, fn: Callable[[], Any]) -> Effect:
        """Tier 3: compute ``fn()`` locally once, journal it, serve the record on replay."""
        return Effect("observe", name, {"observe": name}, Op.OBSERVE, {"fn": fn})

    def wait_signal(
        self, name: str, *, timeout: Duration | None = None, calendar: str = "wall"
    ) -> Effect:
        """Wait for the next signal ``name`` (consumed in delivery order) → its payload.

        ``timeout`` (seconds, a ``timedelta``, or a calendar rule such as ``working_days(2)``
        on ``calendar``): past it, ``WaitTimedOut`` is raised instead. The instant is resolved
        once and journaled, so replay never reads a clock."""
        if name.startswith("runplane."):
            raise ValueError(f"signal names under 'runplane.' are reserved, got {name!r}")
        request: dict[str, Any] = {"signal": name}
        if timeout is not None:  # only when set: older recordings keep their witness
            request["timeout"] = timer_request(timeout, None, calendar)
        return Effect("signal", name, request, Op.SIGNAL)

    def wait_update(
        self, name: str, *, timeout: Duration | None = None, calendar: str = "wall"
    ) -> Effect:
        """Wait for the next accepted update ``name`` (declared with ``UpdateDecl``; its
        validator already accepted it) → ``Update`` (id, payload, sender). Like
        ``wait_signal``: buffered until asked, journaled, served from the journal on replay;
        ``timeout`` raises ``WaitTimedOut``. Answer it with ``answer``: its caller waits."""
        if name not in self._rt.spec.updates:
            raise ValueError(f"agent {self.capability!r} declares no update {name!r}")
        request: dict[str, Any] = {"update": name}
        if timeout is not None:
            request["timeout"] = timer_request(timeout, None, calendar)
        return Effect("update", wire_name(name), request, Op.UPDATE, {"decode": Update.from_json})

    def answer(self, update: Update, value: Any) -> Effect:
        """Answer ``update`` with ``value`` (JSON) → ``value``: journaled, then sent to the
        caller waiting on it (``UpdateAnswer`` on ``runs.updates``). One answer per update:
        answering it again raises ``EffectError`` ``UpdateNotOpen``."""
        request = {"update_id": update.update_id, "answer": value}
        return Effect("answer", f"answer:{update.name}", request, Op.ANSWER)

    async def handle_update(self, name: str, handler: Callable[[Update], Any]) -> Any:
        """Wait for the next update ``name``, handle it (``handler(update)``, sync or async:
        it may await effects) and answer with what it returns → that answer."""
        update: Update = await self.wait_update(name)
        answer = handler(update)
        if inspect.isawaitable(answer):
            answer = await answer
        return await self.answer(update, answer)

    def sleep(
        self, duration: Duration | None = None, *, until: int | None = None, calendar: str = "wall"
    ) -> Effect:
        """A durable timer → the journaled wake instant (ms). ``duration``: seconds, a
        ``timedelta`` or a calendar rule (``minutes(5)``, ``working_days(1)`` on ``calendar``);
        or ``until``, an instant in ms. The run parks; it wakes at that instant even across a
        crash, a restart or a rebalance (the executor owning it delivers the wake)."""
        return Effect("timer", "sleep", timer_request(duration, until, calendar), Op.SLEEP)

    def continue_as_new(self, input: Any) -> Effect:
        """End this run and start its successor — same capability, case, tenant and
        initiator, a fresh history — on ``input`` → ``{"continued_as": <successor run id>}``.
        Write ``return await ctx.continue_as_new(next_input)``: the run ends at this call
        (RUN_COMPLETED naming the successor; its output is that value), so nothing after it
        runs. The way out of a long history (``HistoryTooLong``)."""
        return Effect("run", "continue_as_new", {"input": input}, Op.CONTINUE_AS_NEW)

    def checkpoint(self, state: Any) -> Effect:
        """Report the run's position (checkpointed runs restore from the last one)."""
        return Effect("checkpoint", "checkpoint", {"state": state}, Op.CHECKPOINT)

    def approval(
        self,
        question: str,
        answer: Any,
        *,
        role: str,
        approvals: int = 1,
        expires_in: int | None = None,
        on_expiry: str = "fail",
        allow_unattended: bool = False,
        escalate_to: str | None = None,
        timeout: Duration | None = None,
        calendar: str = "wall",
    ) -> Effect:
        """Open a human task with the run's actual ``answer`` and park until decided → Decision.

        ``expires_in`` is in ms from the logical clock. ``on_expiry``: fail | proceed |
        escalate; ``proceed`` only takes effect with ``allow_unattended=True``; ``escalate``
        reopens the task for ``escalate_to`` (default: the deployment's escalation role) and
        the run keeps waiting — the journal records the escalation (TASK_DECIDED, outcome
        ESCALATED) so the chain says why.
        """
        if approvals < 1:
            raise ValueError("approvals must be >= 1")
        if on_expiry not in ("fail", "proceed", "escalate"):
            raise ValueError(f"on_expiry must be fail, proceed or escalate, got {on_expiry!r}")
        if escalate_to is not None and not escalate_to.strip():
            raise ValueError("escalate_to must name a role")
        request: dict[str, Any] = {
            "question": question,
            "answer": answer,
            "role": role,
            "approvals": approvals,
            "expires_in": expires_in,
            "on_expiry": on_expiry,
            "allow_unattended": allow_unattended,
        }
        if escalate_to is not None:
            # Only when given: approvals recorded before this option existed keep their witness.
            request["escalate_to"] = escalate_to
        if timeout is not None:
            # A durable timeout of the run's own (``WaitTimedOut``; the task is withdrawn),
            # unlike ``expires_in``, which the worklist applies to the task.
            request["timeout"] = timer_request(timeout, None, calendar)
        return Effect("approval", f"approval:{role}", request, Op.APPROVAL)

    def approve_call(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        role: str,
        labels: Mapping[str, Label] | None = None,
        turn: int | None = None,
        approvals: int = 1,
        expires_in: int | None = None,
        timeout: Duration | None = None,
        calendar: str = "wall",
    ) -> Effect:
        """Ask a person with ``role`` whether the proposed call of ``tool`` with ``arguments``
        may be made → ``CallDecision`` (``runplane.core.callapproval``): approved as proposed,
        rejected with a reason, or edited — the edited arguments come back as ``Released``
        values, that person's journaled release of exactly those fields, so pass
        ``decision.arguments`` to ``ctx.tool``.

        The task shows the tool, the arguments, each argument's label (``labels``, by
        argument name; an argument not named there gets ``label_of`` its value) and ``turn``,
        the model turn that proposed it. Family ``approval``: journaled, four-eyes (the run's
        initiator never decides it), served from the journal on replay. ``expires_in`` (ms of
        the logical clock): past it the call is not made (``ApprovalExpired``); ``timeout``:
        the run's own bound (``WaitTimedOut``)."""
        plain, _ = _unwrap(dict(arguments), "$")
        given = dict(labels or {})
        unlabelled = {n: self.label_of(arguments[n]) for n in plain if n not in given}
        shown = {**unlabelled, **given}
        request = call_request(
            tool,
            plain,
            shown,
            role=role,
            turn=turn,
            approvals=approvals,
            expires_in=expires_in,
        )
        if timeout is not None:
            request["timeout"] = timer_request(timeout, None, calendar)
        options = {"arguments": dict(arguments)}  # the decision hands back these, wrappers kept
        return Effect("approval", f"approval:{role}", request, Op.APPROVAL, options)

    def human_panel(self, question: str, answer: Any, **rule: Any) -> Effect:
        """People on the worklist, a task per seat → Approved / Rejected / Split."""
        return panel_effect(question, answer, **rule)

    def case_state(self) -> Effect:
        """Read the run's case → CaseState(state, version)."""
        return Effect(
            "case", "case:get_state", {"op": "get_state", "case_id": self.case_id}, Op.CASE_GET
        )

    def put_case_state(self, version: int, state: Any) -> Effect:
        """Write the case if it is still at ``version`` → the new version; ``CaseConflict``
        (with the current version) if the case moved. A blind overwrite cannot be spelled."""
        request = {
            "op": "put_state",
            "case_id": self.case_id,
            "expected_version": version,
            "state": state,
        }
        return Effect("case", "case:put_state", request, Op.CASE_PUT)

    def deadline(
        self,
        name: str,
        spec: Mapping[str, Any],
        warn_before: Mapping[str, Any] | None = None,
        *,
        calendar: str = "wall",
        on_breach: str | None = None,
        owner_role: str | None = None,
    ) -> Effect:
        """Attach an obligation to the case, due ``spec`` after the logical clock on
        ``calendar`` → the due instant (ms). Resolved once and journaled with the calendar's
        digest: a replay returns the journaled instant even if the calendar changed since.
        ``warn_before`` is a wall-clock duration ({"hours": 2}) before the due instant; its
        warning opens a worklist task for ``owner_role`` (default: the cases service's
        ``RUNPLANE_CASES_WARN_ROLE``).
        The run waits for the cases service to accept the obligation; ``CaseRefused`` (with
        the reason) if it does not."""
        request = {
            "op": "register_deadline",
            "case_id": self.case_id,
            "name": name,
            "rule": dict(spec),
            "warn_before": None if warn_before is None else dict(warn_before),
            "calendar": calendar,
            "on_breach": on_breach,
        }
        if owner_role is not None:  # only when set: older recordings keep their witness
            request["owner_role"] = owner_role
        return Effect("deadline", f"deadline:{name}", request, Op.DEADLINE)

    def meet_deadline(self, name: str) -> Effect:
        """Discharge the obligation ``name`` of the case (waits for the cases service;
        ``CaseRefused`` if there is no such obligation or it already breached)."""
        return Effect(
            "deadline",
            f"deadline:{name}",
            {"op": "meet_deadline", "case_id": self.case_id, "name": name},
            Op.DEADLINE_MEET,
        )

    def close_case(self) -> Effect:
        """Close the run's case (waits for the cases service → None; ``CaseRefused`` with the
        reason while an obligation of the case is still open or warned)."""
        return Effect("case", "case:close", {"op": "close", "case_id": self.case_id}, Op.CASE_CLOSE)

    def cancel_deadline(self, name: str) -> Effect:
        """The obligation ``name`` no longer applies (waits for the cases service;
        ``CaseRefused`` if it cannot be cancelled)."""
        return Effect(
            "deadline",
            f"deadline:{name}",
            {"op": "cancel_deadline", "case_id": self.case_id, "name": name},
            Op.DEADLINE_CANCEL,
        )

    # -- plans, fan-out, commissions (runplane.core.planrun) ------------------------------------
    def commission(
        self,
        capability: str,
        input: Any,
        *,
        delegation: Delegation | None = None,
        on_parent_cancel: str = "cancel",
        budget: Allotment | float | None = None,
    ) -> Coroutine[Any, Any, Any]:
        """Start a child run of ``capability`` through admission (derived admission key: one
        child, ever) and wait, parked, for its output (provenance ``agent/<capability>``);
        ``EffectError`` ``ChildFailed`` / ``DelegationRefused`` / ``BudgetExceeded``
        otherwise. ``on_parent_cancel``: ``cancel`` (default: this run's cancel cancels the
        child, and its children) or ``wait`` (the child runs to its own end first).
        ``budget``: what of this run's remaining budget the child spends from — a share in
        (0, 1] or amounts (``Allotment``); None: all of it. The child's unspent rest comes
        back when it answers (``runplane.core.allotments``)."""
        return planrun.commission(capability, input, delegation, on_parent_cancel, budget)

    def parallel(self, branches: Mapping[str, Effect]) -> Coroutine[Any, Any, BatchStatus]:
        """Run non-mutating tool calls, generations and commissions together → BatchStatus."""
        return planrun.parallel(branches)

    def run_plan(
        self,
        plan: Plan,
        input: Any,
        *,
        contract: Contract | None = None,
        propose: Proposer | None = None,
    ) -> Coroutine[Any, Any, Any]:
        """Validate, journal and run a frozen plan, each ready set fanned out (planrun)."""
        return planrun.run_plan(self, plan, input, contract=contract, propose=propose)

    def fan_out(
        self,
        branches: Sequence[str],
        aggregator: str,
        input: Any,
        *,
        contract: Contract | None = None,
        kind: str = "agent",
    ) -> Coroutine[Any, Any, Any]:
        """Every branch (agents, or tools with ``kind="tool"``) on ``input`` at once, then the
        aggregator on their outputs by node id → the aggregator's output."""
        return planrun.fan_out(self, branches, aggregator, input, contract=contract, kind=kind)

    def agent_loop(
        self,
        provider: str,
        model: str,
        instructions: str,
        input: Any,
        *,
        tools: Sequence[str],
        max_turns: int | None = None,
        budget: LoopBudget | None = None,
        tool_choice: str = "auto",
        params: Mapping[str, Any] | None = None,
        approve: Approver | None = None,
        handoffs: Sequence[Handoff] = (),
        remember: bool = False,
        resume: Mapping[str, Any] | None = None,
        history_turns: int | None = None,
    ) -> Coroutine[Any, Any, LoopResult]:
        """The agent loop (``runplane.core.loop``): the model proposes calls to ``tools``, each
        turn a journaled generation, each call a journaled tool effect (reads fanned out,
        mutations in the model's order), until it answers or a budget ends it → ``LoopResult``
        (status ``answered`` or ``budget_exhausted`` with which budget). ``max_turns`` is
        ``budget.turns`` when no budget is given. A refused call is answered to the model as a
        tool error; the loop goes on. A call to a tool that needs approval (the deployment
        policy's ``approval``, else its ``EffectDecl.needs_approval``) is asked through
        ``approve_call`` first: approved, rejected (the reason is the model's tool error) or
        edited (made with the person's released arguments). ``approve``: the agent's own hook,
        asked then for every call still to be made. ``handoffs``: capabilities offered to the
        model as tools (``loop.Handoff``), each call a commission of that agent under a
        narrowed delegation, its output the tool's result. ``remember``: the model is offered
        ``remember`` (``core.memory``), its notes held in ``LoopResult.notes`` and kept on the
        case only through ``approve_answer``, once a person approves. ``history_turns``: stop
        after that many turns in this run (``LoopStatus.CONTINUE``) to continue as new with
        ``result.checkpoint()``; ``resume``: that checkpoint, in the successor."""
        if budget is None:
            budget = loop.LoopBudget(turns=max_turns)
        elif max_turns is not None:
            raise ValueError("agent_loop: give max_turns or budget.turns, not both")
        return loop.agent_loop(
            self,
            provider,
            model,
            instructions,
            input,
            tools=tools,
            budget=budget,
            tool_choice=tool_choice,
            params=params,
            approve=approve,
            handoffs=handoffs,
            remember=remember,
            resume=resume,
            history_turns=history_turns,
        )

    async def approve_answer(
        self,
        result: LoopResult,
        question: str,
        *,
        role: str,
        approvals: int = 1,
        expires_in: int | None = None,
    ) -> Decision:
        """Ask a person to approve a loop's answer together with the notes it means to keep
        (``LoopResult.notes``), as one worklist task; approved, the notes are appended to the
        run's case (``memory.keep_approved``), else dropped (``core.memory``: memory is formed after
        approval) → the Decision."""
        answer = {"text": result.text, "notes": [n.text for n in result.notes]}
        decision: Decision = await self.approval(
            question, answer, role=role, approvals=approvals, expires_in=expires_in
        )
        await memory.keep_approved(self, result.notes, decision)
        return decision

    def planned_loop(
        self,
        provider: str,
        model: str,
        instructions: str,
        input: Any,
        *,
        tools: Sequence[str],
        params: Mapping[str, Any] | None = None,
    ) -> Coroutine[Any, Any, PlannedResult]:
        """The planned loop (``runplane.core.plannedloop``): the model writes a plan over
        ``tools`` from the instructions and ``input`` alone (a journaled generation offered no
        tools), checked and journaled before any of it runs; then the plan runs, untrusted
        content read by quarantined model turns that fill typed fields and call no tool, every
        argument resolved from its binding → ``PlannedResult`` (status ``completed``,
        ``plan_refused`` with its problems, or ``node_failed``)."""
        return plannedloop.planned_loop(
            self, provider, model, instructions, input, tools=tools, params=params
        )

    def panel(
        self, reviewers: Sequence[str], input: Any, *, approve_at: int, reject_at: int
    ) -> Coroutine[Any, Any, QuorumOutcome]:
        """Commission every reviewer agent at once → Approved / Rejected / Pending / Split."""
        return planrun.panel(reviewers, input, approve_at=approve_at, reject_at=reject_at)


def _unwrap(value: Any, prefix: str) -> tuple[Any, dict[str, Any]]:
    """``value`` without its ``Labeled``/``Released`` wrappers, and where they were (the gate
    reads them from the effect's options; the request — and its witness — holds plain JSON)."""
    return unwrap(value, Wrapper, prefix)
