"""The agent loop (``ctx.agent_loop``): the model chooses the tools, the runtime performs them.

    result = await ctx.agent_loop("openai", "gpt-4o-mini", "You are a support agent.", ticket,
                                  tools=["crm_lookup", "fetch_document", "refund"],
                                  budget=LoopBudget(turns=8, tool_calls=12))
    if result.status is LoopStatus.ANSWERED: ...

Two halves. **The decisions are pure** (``begin``, ``exhausted``, ``decide``, ``answer``): a
function from the loop's state and the model's answer to what happens next — call these
tools (non-mutating ones together, mutating ones one after another in the model's order), or
stop with this outcome — tested case by case and by property, with no effect in sight.
**The driving** (``agent_loop``) turns those decisions into ordinary journaled effects:

1. The offered tools are resolved once — each one's ``ToolSpec`` (``EffectDecl.description`` /
   ``input_schema``: the agent's declaration first, then what the executor offers), whether
   it mutates and who must approve a call to it — and journaled as one ``observe``
   (``loop:tools``): a replay, or a restore under a deployment whose tool descriptions or
   policy changed since, builds exactly the requests it built.
2. Each model turn is a ``generation`` (``ctx.generate`` with the conversation as messages and
   ``tools=`` / ``tool_choice=``): announced before it is sent, journaled with its usage.
3. Each proposed call is a ``tool`` effect with its declared recovery; the non-mutating calls
   of one turn run as fan-out branches on their own slots (``planrun._dispatch``, decisions
   §23), the mutating ones after them, one at a time in the order the model gave. The effect
   names the model's call id (option ``proposal``): the sink gate finds the turn that proposed
   it in the journal and labels its arguments exactly (``sinkgate``; docs/security.md).
4. A refused call (``SinkRefused``), a failed one, one over the loop's tool-call budget, one to
   a tool not offered: every proposed call is answered by exactly one tool message, an error
   the model reads and may act on; the loop goes on.

The conversation is rebuilt from journaled values only (the recorded ``Generation`` and tool
results), so a replay serves every slot and calls nobody. Budgets end the loop with a typed
outcome (``LoopStatus.BUDGET_EXHAUSTED`` and which ``Exhausted``), never an exception; the
deployment policy's budget, when a turn hits it, ends the loop the same way (``POLICY``).

**Approval.** A call to a tool that needs approval (``callapproval.needs_approval``: the run's
deployment policy, ``RunHost.policy``, else the tool's declaration) is asked through
``ctx.approve_call`` before it is performed, with the model's arguments, each one's label as
the gate will find it (the turn's exact labels) and the turn: approved, it is made as
proposed; rejected, the reason is the model's tool error (``CallRejected``) and the loop goes
on; edited, it is made with the edited arguments (``Released`` values: that person's journaled
release of exactly those fields, which the gate honours there, labelling the rest as the turn
proposed them). Who must approve is resolved once, with the offer, and journaled in the
``loop:tools`` observe: a replay or a restore under a policy changed since asks exactly the
tasks the recorded run asked. ``approve``, an ``async (call, turn) -> CallVerdict``, is the
agent's own hook, asked after that for every call still to be made; None asks nothing more.

**Handoffs** (``handoffs=[Handoff(...)]``) offer other agents as tools: a call to one is a
commission (a child run under the run's delegation narrowed to that capability), fanned out
with the reads or made in the model's order as the handoff says, its output the tool's result.
**Memory** (``remember=True``) offers ``remember``: the loop answers it itself, the notes are
held in ``LoopResult.notes`` and kept on the case only once a person approves the answer
(``ctx.approve_answer``, ``runplane.core.memory``).

**Long conversations** end their history through continue-as-new: with ``history_turns=N``
the loop stops after N turns in this run (``LoopStatus.CONTINUE``) and the agent continues as
new with ``result.checkpoint()`` in the successor's input, whose loop goes on with
``resume=``. The checkpoint keeps what the loop needs: the instructions and the request, the
last ``keep_turns`` turns verbatim (each with the tool messages answering it), and the turns,
calls and usage so far, so every budget counts across the generations. What it drops is the
middle of the conversation — the model no longer sees those results verbatim; an agent that
needs them says so in the successor's input (a summary it asked the model for). The labels
follow: the successor's input carries the join of everything the predecessor had read
(``sinkgate.carried_input_label``, seq 0's ``input_label``), so a conversation that read an
untrusted document does not come back as a trusted admission input — conservatively, a value
copied from a carried result no longer counts as a copy of its tool's result (its source is
the carried input), and a protected field whose source must be that tool needs the tool
called again in the successor.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from runplane.core.agents import EffectDecl, Generation
from runplane.core.callapproval import CallDecision, needs_approval
from runplane.core.canonical import canonical_json
from runplane.core.effect import Effect, EffectError, Op
from runplane.core.jsonpaths import under, unwrap
from runplane.core.labels import Wrapper, join_all
from runplane.core.memory import HELD, REMEMBER, Note, note_of
from runplane.core.memory import SPEC as REMEMBER_SPEC
from runplane.core.plan import Delegation
from runplane.core.planrun import _dispatch as dispatch
from runplane.core.planrun import commission_effect
from runplane.core.policy import ApprovalRule
from runplane.core.releases import BudgetExceeded
from runplane.core.turns import (
    Message,
    Role,
    ToolCall,
    ToolSpec,
    messages_from_json,
    messages_to_json,
)
from runplane.wire import Label

if TYPE_CHECKING:
    from runplane.core.ctx import StepCtx

__all__ = [
    "Act",
    "CallRecord",
    "CallVerdict",
    "Exhausted",
    "Handoff",
    "LoopBudget",
    "LoopResult",
    "LoopState",
    "LoopStatus",
    "NotAnswered",
    "Proposal",
    "Stop",
    "Usage",
    "agent_loop",
    "answer",
    "begin",
    "decide",
    "exhausted",
    "offered",
    "perform_calls",
]


class LoopStatus(enum.StrEnum):
    ANSWERED = "answered"  # the model answered without proposing a call
    BUDGET_EXHAUSTED = "budget_exhausted"  # a budget ended the loop first
    # This run took ``history_turns`` turns: continue as new with ``LoopResult.checkpoint()``.
    CONTINUE = "continue"


class Exhausted(enum.StrEnum):
    """Which budget ended the loop."""

    TURNS = "turns"
    TOKENS = "tokens"
    COST_UNITS = "cost_units"
    TOOL_CALLS = "tool_calls"
    POLICY = "policy"  # the deployment policy's budget refused the next turn (BudgetExceeded)


@dataclass(frozen=True)
class LoopBudget:
    """What one loop may spend; None: no limit of that kind. ``turns`` counts model turns,
    ``tokens`` tokens in and out, ``cost_units`` the providers' cost, ``tool_calls`` the calls
    performed (a call refused by the gate or not performed counts too: it was proposed and
    answered, so a model cannot spin on refusals forever)."""

    turns: int | None = None
    tokens: int | None = None
    cost_units: float | None = None
    tool_calls: int | None = None

    def __post_init__(self) -> None:
        for name in ("turns", "tokens", "cost_units", "tool_calls"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"LoopBudget.{name} must be >= 0, got {value}")


@dataclass(frozen=True)
class Usage:
    tokens_in: int = 0
    tokens_out: int = 0
    cost_units: float = 0.0

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def plus(self, g: Generation) -> Usage:
        return Usage(
            self.tokens_in + g.tokens_in,
            self.tokens_out + g.tokens_out,
            self.cost_units + g.cost_units,
        )


@dataclass(frozen=True)
class CallRecord:
    """One proposed call and how it was answered: ``ok`` with ``value``, or ``error`` (its
    type, e.g. ``SinkRefused``, and message); ``performed`` is False for a call the loop did
    not hand to the runtime (an unknown tool, over budget, rejected by a person)."""

    turn: int
    position: int  # where the call stood in the turn's proposal (the model's order)
    call: ToolCall
    ok: bool
    value: Any = None
    error_type: str | None = None
    error: str | None = None
    performed: bool = True


@dataclass(frozen=True)
class LoopState:
    """Where the loop is: the conversation so far, turns taken, usage, calls answered."""

    messages: tuple[Message, ...]
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    calls: tuple[CallRecord, ...] = ()
    earlier_calls: int = 0  # calls answered in the runs this one continues (checkpoint)

    @property
    def answered(self) -> int:
        """Calls answered over the whole loop, the runs it continues included."""
        return self.earlier_calls + len(self.calls)

    def to_json(self) -> dict[str, Any]:
        return {
            "messages": messages_to_json(self.messages),
            "turns": self.turns,
            "calls": self.answered,
            "usage": {
                "tokens_in": self.usage.tokens_in,
                "tokens_out": self.usage.tokens_out,
                "cost_units": self.usage.cost_units,
            },
        }

    @classmethod
    def from_json(cls, data: Any) -> LoopState:
        """A checkpoint (``LoopResult.checkpoint``) read back through the constructors:
        ``ValueError`` for anything else."""
        if not isinstance(data, Mapping) or not {"messages", "turns", "usage"} <= set(data):
            raise ValueError("a loop checkpoint is {messages, turns, calls, usage}")
        usage, turns, calls = data["usage"], data["turns"], data.get("calls", 0)
        if not isinstance(usage, Mapping):
            raise ValueError("a loop checkpoint's usage is {tokens_in, tokens_out, cost_units}")
        for name, value in (("turns", turns), ("calls", calls)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"a loop checkpoint's {name} is a count, got {value!r}")
        messages = messages_from_json(data["messages"])
        if not messages:
            raise ValueError("a loop checkpoint holds the conversation")
        spent = Usage(
            int(usage.get("tokens_in", 0)),
            int(usage.get("tokens_out", 0)),
            float(usage.get("cost_units", 0.0)),
        )
        return cls(messages, turns, spent, (), calls)


@dataclass(frozen=True)
class LoopResult:
    """How a loop ended. ``text``: the model's last answer (a final one when ``ANSWERED``)."""

    status: LoopStatus
    text: str
    turns: int
    usage: Usage
    calls: tuple[CallRecord, ...]
    messages: tuple[Message, ...]
    exhausted: Exhausted | None = None
    # What the model asked to keep for later runs (``remember=True``): held, not written —
    # ``ctx.approve_answer`` keeps them on the case only once a person approves (core.memory).
    notes: tuple[Note, ...] = ()
    earlier_calls: int = 0  # calls answered in the runs this one continues

    @property
    def refused(self) -> tuple[CallRecord, ...]:
        """The calls the sink gate refused."""
        return tuple(c for c in self.calls if c.error_type == "SinkRefused")

    def checkpoint(self, keep_turns: int = 4) -> dict[str, Any]:
        """What a successor needs to go on (``agent_loop(resume=…)``): the conversation cut
        to its opening (the instructions and the request) and its last ``keep_turns`` turns
        verbatim — each turn with the tool messages answering it, so no proposed call lacks
        its answer — with the turns, calls and usage so far, so budgets count across runs."""
        messages = _kept(self.messages, keep_turns)
        state = LoopState(messages, self.turns, self.usage, self.calls, self.earlier_calls)
        return state.to_json()


@dataclass(frozen=True)
class Act:
    """The next actions: ``parallel`` calls (non-mutating, together), then ``serial`` ones
    (mutating, one at a time, in the model's order); ``unanswerable`` calls are answered with
    an error at once (not performed). Each call comes with its position in the proposal, which
    orders the tool messages of the next prompt."""

    state: LoopState
    parallel: tuple[Proposal, ...]
    serial: tuple[Proposal, ...]
    unanswerable: tuple[tuple[Proposal, str, str], ...]  # (call, error type, message)


@dataclass(frozen=True)
class Stop:
    state: LoopState
    status: LoopStatus
    text: str
    exhausted: Exhausted | None = None


@dataclass(frozen=True)
class CallVerdict:
    """A person's word on a proposed call (``approve``): perform ``call`` (possibly edited),
    or, when ``rejected`` is set, answer the model with that reason instead."""

    call: ToolCall
    rejected: str | None = None


@dataclass(frozen=True)
class Handoff:
    """A capability offered to the model as a tool (``agent_loop(handoffs=…)``): a call to it
    commissions that agent (``ctx.commission``: a child run through admission, one child per
    call, ever) with the call's arguments as the child's input, and the child's output is the
    tool's result (provenance ``agent/<capability>``); a failed or refused child is a tool
    error the model reads.

    The child runs under a narrowed delegation: ``delegation`` when given (rebuilt under the
    one this run holds, so it can only narrow), else the run's own delegation narrowed to this
    one capability; a run that holds none (not itself commissioned) hands none, as
    ``ctx.commission`` does — the deployment policy's sinks (``agent/<capability>``) and
    the sink gate bound it then. The arguments are labelled exactly, as a tool call's are
    (the proposing turn's labels), so a policy can protect a handoff's fields like a tool's.

    ``tool``: the name the model sees (default ``handoff_<capability>``, dots and other
    characters a provider refuses in a tool name as ``_``); ``mutates``: whether the child may
    change the world — then its call is made in the model's order with the other mutations,
    else fanned out with the reads."""

    capability: str
    description: str = ""
    input_schema: Mapping[str, Any] | None = None
    delegation: Delegation | None = None
    tool: str = ""
    mutates: bool = True

    def __post_init__(self) -> None:
        if not self.capability:
            raise ValueError("Handoff: a capability is named")
        if not self.tool:
            name = "handoff_" + "".join(
                c if c.isalnum() or c in "_-" else "_" for c in self.capability
            )
            object.__setattr__(self, "tool", name[:64])

    def spec(self) -> ToolSpec:
        description = self.description or (
            f"Hand this to the {self.capability} agent; its answer is this tool's result."
        )
        return ToolSpec(self.tool, description, dict(self.input_schema or _HANDOFF_SCHEMA))


_HANDOFF_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"request": {"type": "string", "description": "What the agent is asked."}},
    "required": ["request"],
}

Proposal = tuple[int, ToolCall]  # (position in the turn's proposal, the call)
Approver = Callable[[ToolCall, int], Awaitable[CallVerdict]]


def begin(instructions: str, input: Any) -> LoopState:
    """The first conversation: the instructions as the system message, the input as the user's
    (a string as it is, anything else as its canonical JSON)."""
    text = input if isinstance(input, str) else canonical_json(input)
    messages: tuple[Message, ...] = (Message(Role.USER, text),)
    if instructions:
        messages = (Message(Role.SYSTEM, instructions), *messages)
    return LoopState(messages)


def exhausted(state: LoopState, budget: LoopBudget) -> Exhausted | None:
    """Whether a budget forbids another turn (checked before each turn is sent)."""
    if budget.turns is not None and state.turns >= budget.turns:
        return Exhausted.TURNS
    if budget.tokens is not None and state.usage.tokens >= budget.tokens:
        return Exhausted.TOKENS
    if budget.cost_units is not None and state.usage.cost_units >= budget.cost_units:
        return Exhausted.COST_UNITS
    return None


def _remaining(state: LoopState, budget: LoopBudget) -> int | None:
    return None if budget.tool_calls is None else max(0, budget.tool_calls - state.answered)


def _kept(messages: Sequence[Message], keep_turns: int) -> tuple[Message, ...]:
    """The opening (the leading system and user messages) and the last ``keep_turns``
    assistant turns, each with the tool messages after it (``LoopResult.checkpoint``)."""
    if keep_turns < 1:
        raise ValueError("a checkpoint keeps at least the last turn")
    opening = 0
    while opening < len(messages) and messages[opening].role in (Role.SYSTEM, Role.USER):
        opening += 1
    starts = [i for i in range(opening, len(messages)) if messages[i].role is Role.ASSISTANT]
    cut = starts[-keep_turns] if len(starts) > keep_turns else opening
    return (*messages[:opening], *messages[cut:])


def decide(
    state: LoopState,
    generation: Generation,
    budget: LoopBudget,
    mutating: Mapping[str, bool],
) -> Act | Stop:
    """The model answered ``generation``: stop (no call proposed, or a call proposed with the
    tool-call budget spent), or the calls to make. ``mutating``: the offered tools by name;
    a call to any other tool is answered with an error, never performed. Over the tool-call
    budget, the first calls (model order) are made and the rest answered with an error."""
    said = Message(Role.ASSISTANT, generation.text, tool_calls=generation.tool_calls)
    state = replace(
        state,
        messages=(*state.messages, said),
        turns=state.turns + 1,
        usage=state.usage.plus(generation),
    )
    proposed = generation.tool_calls
    if not proposed:
        return Stop(state, LoopStatus.ANSWERED, generation.text)
    left = _remaining(state, budget)
    if left == 0:
        return Stop(state, LoopStatus.BUDGET_EXHAUSTED, generation.text, Exhausted.TOOL_CALLS)
    parallel: list[Proposal] = []
    serial: list[Proposal] = []
    unanswerable: list[tuple[Proposal, str, str]] = []
    seen: set[str] = set()
    for position, call in enumerate(proposed):
        p = (position, call)
        if call.id in seen:
            why = f"call id {call.id!r} was already proposed in this turn"
            unanswerable.append((p, "DuplicateCallId", why))
        elif call.name not in mutating:
            unanswerable.append((p, "UnknownTool", f"no tool named {call.name!r} is offered"))
        elif left is not None and len(parallel) + len(serial) >= left:
            unanswerable.append((p, "LoopBudgetExceeded", "the loop's tool-call budget is spent"))
        elif mutating[call.name]:
            serial.append(p)
        else:
            parallel.append(p)
        seen.add(call.id)
    return Act(state, tuple(parallel), tuple(serial), tuple(unanswerable))


def answer(state: LoopState, act: Act, records: Sequence[CallRecord]) -> LoopState:
    """The state after ``act``'s calls are answered by ``records`` (one per proposed call):
    one tool message each, in the model's order (by position: a repeated id is answered where
    it stood). ``NotAnswered`` if a proposed call has no record, or two."""
    proposed = state.messages[-1].tool_calls
    positions = sorted(r.position for r in records)
    if positions != list(range(len(proposed))):
        raise NotAnswered(f"{len(proposed)} calls proposed, answered at positions {positions}")
    ordered = sorted(records, key=lambda r: r.position)
    messages = list(state.messages)
    for call, record in zip(proposed, ordered, strict=True):
        content = (
            canonical_json(record.value) if record.ok else f"{record.error_type}: {record.error}"
        )
        messages.append(Message(Role.TOOL, content, tool_call_id=call.id, is_error=not record.ok))
    return replace(state, messages=tuple(messages), calls=(*state.calls, *ordered))


class NotAnswered(ValueError):
    """The loop's own bug, never the model's: a proposed call without exactly one answer."""


# -- driving: the decisions as journaled effects ---------------------------------------------


def _decl(ctx: StepCtx, name: str) -> EffectDecl:
    """The declaration a call to ``name`` is performed under, as the engine finds it (the
    agent's, else the executor's offer, else the conservative default)."""
    return ctx._rt.spec.decl_for(name) or ctx._rt.tools.get(name) or EffectDecl(name)


def offered(
    ctx: StepCtx, tools: Sequence[str], handoffs: Sequence[Handoff] = (), remember: bool = False
) -> dict[str, Any]:
    """What the model is offered: each tool's spec, whether it mutates, and who must approve a
    call to it (``callapproval.needs_approval``: the run's policy, else the declaration), then
    each handoff's (``handoffs``: its tool name → the capability it commissions) — journaled
    once, so a replay, or a restore under a changed policy, asks whom it asked."""
    specs, mutating, approval = [], {}, {}
    for name in tools:
        decl = _decl(ctx, name)
        schema = decl.input_schema or {"type": "object", "properties": {}}
        specs.append(ToolSpec(name, decl.description, schema).to_json())
        mutating[name] = decl.mutating
        rule = needs_approval(ctx._rt.policy, decl, name)
        if rule is not None:
            approval[name] = {
                "role": rule.role,
                "approvals": rule.approvals,
                "expires_in": rule.expires_in,
            }
    for h in handoffs:
        specs.append(h.spec().to_json())
        mutating[h.tool] = h.mutates
    if remember:  # answered by the loop itself, never performed (core.memory)
        specs.append(REMEMBER_SPEC.to_json())
        mutating[REMEMBER] = False
    menu: dict[str, Any] = {"specs": specs, "mutating": mutating}
    if approval:  # only when some call needs one: a loop without records the bytes it did
        menu["approval"] = approval
    if handoffs:  # likewise: only a loop that offers one records it
        menu["handoffs"] = {h.tool: h.capability for h in handoffs}
    return menu


def _proposed(ctx: StepCtx, call: ToolCall) -> Effect:
    """The tool effect of a proposed call: ``ctx.tool`` with the model's call id (option
    ``proposal``, read by the sink gate)."""
    e = ctx.tool(call.name, call.arguments)
    return Effect(e.family, e.name, e.request, e.op, {**e.options, "proposal": call.id})


def _handed(call: ToolCall, handoff: Handoff) -> Effect:
    """The commission of a proposed handoff: the call's arguments as the child's input, under
    the handoff's delegation (else the run's, narrowed to the capability: ``narrow``), with
    the model's call id and tool name (options ``proposal`` / ``tool``) for the sink gate's
    exact labels."""
    e = commission_effect(handoff.capability, call.arguments, handoff.delegation, narrow=True)
    return Effect(
        e.family, e.name, e.request, e.op, {**e.options, "proposal": call.id, "tool": call.name}
    )


async def _perform(
    ctx: StepCtx,
    act: Act,
    asks: Mapping[str, ApprovalRule],
    approve: Approver | None,
    handoffs: Mapping[str, Handoff],
    remember: bool,
) -> tuple[CallRecord, ...]:
    turn = act.state.turns
    records: list[CallRecord] = [
        CallRecord(turn, at, c, False, error_type=t, error=m, performed=False)
        for (at, c), t, m in act.unanswerable
    ]
    parallel, serial = list(act.parallel), list(act.serial)
    if remember:  # a note is held, not performed: answered here, kept after approval
        for at, call in [p for p in parallel if p[1].name == REMEMBER]:
            note = note_of(call, turn)
            if isinstance(note, Note):
                records.append(CallRecord(turn, at, call, True, HELD, performed=False))
            else:
                records.append(CallRecord(turn, at, call, False, None, "InvalidNote", note, False))
        parallel = [p for p in parallel if p[1].name != REMEMBER]
    if asks:  # the calls a person must approve, asked on the worklist (``ctx.approve_call``)
        parallel = await _asked(ctx, parallel, turn, asks, records)
        serial = await _asked(ctx, serial, turn, asks, records)
    if approve is not None:  # the agent's own hook, asked for every call still to be made
        parallel = await _approved(parallel, turn, approve, records)
        serial = await _approved(serial, turn, approve, records)
    if parallel:
        records += await _fanned(ctx, turn, parallel, handoffs)
    for at, call in serial:
        if call.name in handoffs:  # a child run, alone in its ready set, in the model's order
            records += await _fanned(ctx, turn, [(at, call)], handoffs)
            continue
        try:
            value = await _proposed(ctx, call)
        except EffectError as exc:
            records.append(CallRecord(turn, at, _plain(call), False, None, exc.type, exc.message))
        else:
            records.append(CallRecord(turn, at, _plain(call), True, value))
    return tuple(records)


async def perform_calls(
    ctx: StepCtx,
    turn: int,
    calls: Sequence[Proposal],
    mutating: Mapping[str, bool],
    asks: Mapping[str, ApprovalRule] | None = None,
    handoffs: Mapping[str, Handoff] | None = None,
) -> tuple[CallRecord, ...]:
    """Perform one turn's proposed ``calls`` exactly as the agent loop performs them: the
    door for a framework adapter, where the framework and not ``agent_loop`` holds the
    conversation. ``mutating``: what ``offered`` said of each tool (journaled by the caller);
    reads are fanned out together, mutations made one after another in position order, each
    call asked of a person first when ``asks`` names its tool, a ``handoffs`` tool a child
    run. A call to a tool ``mutating`` does not name is answered ``UnknownTool``, never
    performed. One ``CallRecord`` per call, in position order."""
    parallel: list[Proposal] = []
    serial: list[Proposal] = []
    unanswerable: list[tuple[Proposal, str, str]] = []
    for at, call in sorted(calls, key=lambda p: p[0]):
        if call.name not in mutating:
            why = f"no tool named {call.name!r} is offered"
            unanswerable.append(((at, call), "UnknownTool", why))
        else:
            (serial if mutating[call.name] else parallel).append((at, call))
    act = Act(LoopState((), turn), tuple(parallel), tuple(serial), tuple(unanswerable))
    records = await _perform(ctx, act, asks or {}, None, handoffs or {}, False)
    return tuple(sorted(records, key=lambda r: r.position))


async def _fanned(
    ctx: StepCtx, turn: int, calls: Sequence[Proposal], handoffs: Mapping[str, Handoff]
) -> list[CallRecord]:
    """``calls`` as the branches of one ready set (``planrun._dispatch``): tools, and handoffs
    as commissions; → one record each."""
    nodes = {f"t{turn}c{at}": (at, c) for at, c in calls}
    joined = await dispatch(
        [
            (n, _handed(c, handoffs[c.name]) if c.name in handoffs else _proposed(ctx, c))
            for n, (_, c) in nodes.items()
        ]
    )
    records = []
    for node, (at, call) in nodes.items():
        r = joined[node]
        if r["ok"]:
            records.append(CallRecord(turn, at, _plain(call), True, r["value"]))
        else:
            err = r["error"]
            records.append(
                CallRecord(turn, at, _plain(call), False, None, err["type"], err["message"])
            )
    return records


async def _asked(
    ctx: StepCtx,
    calls: list[Proposal],
    turn: int,
    asks: Mapping[str, ApprovalRule],
    records: list[CallRecord],
) -> list[Proposal]:
    """The calls still to be made once a person decided each one that needs approval: as
    proposed, or with the edited arguments (``Released`` values: the decider's journaled
    release of exactly those fields, which the gate honours there and only there); a rejected
    or expired one is answered to the model with the reason, not performed."""
    kept = []
    for at, call in calls:
        rule = asks.get(call.name)
        if rule is None:
            kept.append((at, call))
            continue
        try:
            decision: CallDecision = await ctx.approve_call(
                call.name,
                call.arguments,
                role=rule.role,
                labels=_argument_labels(ctx, call),
                turn=turn,
                approvals=rule.approvals,
                expires_in=rule.expires_in,
            )
        except EffectError as exc:  # the task expired (``ApprovalExpired``): no call made
            records.append(CallRecord(turn, at, call, False, None, exc.type, exc.message, False))
            continue
        if decision.approved:
            kept.append((at, replace(call, arguments=dict(decision.arguments))))
        else:
            why = decision.reason or f"rejected by {', '.join(decision.decided_by) or 'a person'}"
            records.append(CallRecord(turn, at, call, False, None, "CallRejected", why, False))
    return kept


def _argument_labels(ctx: StepCtx, call: ToolCall) -> dict[str, Label] | None:
    """Each argument's label as the gate will find it (the turn's exact labels, joined over
    the argument's paths), for the task to show; None: the journal holds no such proposal."""
    exact = ctx._inline.call_labels(call.id, call.name, call.arguments)
    if exact is None:
        return None
    return {
        name: join_all(label for path, label in exact.items() if under(path, f"$.{name}"))
        for name in call.arguments
    }


def _plain(call: ToolCall) -> ToolCall:
    """The call as made, for the record: an edited argument as its plain value."""
    plain, wrapped = unwrap(dict(call.arguments), Wrapper)
    return replace(call, arguments=plain) if wrapped else call


async def _approved(
    calls: list[Proposal], turn: int, approve: Approver, records: list[CallRecord]
) -> list[Proposal]:
    kept = []
    for at, call in calls:
        verdict = await approve(call, turn)
        if verdict.rejected is not None:
            records.append(
                CallRecord(turn, at, call, False, None, "CallRejected", verdict.rejected, False)
            )
        else:
            # An edit keeps the model's call id: the tool message still answers that call.
            kept.append((at, replace(verdict.call, id=call.id)))
    return kept


async def agent_loop(
    ctx: StepCtx,
    provider: str,
    model: str,
    instructions: str,
    input: Any,
    *,
    tools: Sequence[str],
    budget: LoopBudget,
    tool_choice: str = "auto",
    params: Mapping[str, Any] | None = None,
    approve: Approver | None = None,
    handoffs: Sequence[Handoff] = (),
    remember: bool = False,
    resume: Mapping[str, Any] | None = None,
    history_turns: int | None = None,
) -> LoopResult:
    """Run the loop (module docstring) → ``LoopResult``."""
    if history_turns is not None and history_turns < 1:
        raise ValueError("agent_loop: history_turns is at least 1")
    names = list(tools)
    offers = [*names, *(h.tool for h in handoffs), *([REMEMBER] if remember else [])]
    if len(set(offers)) != len(offers):
        raise ValueError("agent_loop: a tool or handoff is offered once, under its own name")
    handed = {h.tool: h for h in handoffs}
    request: dict[str, Any] = {"observe": "loop:tools", "tools": names}
    if handoffs:
        request["handoffs"] = {h.tool: h.capability for h in handoffs}
    if remember:
        request["remember"] = True
    menu = await Effect(
        "observe",
        "loop:tools",
        request,
        Op.OBSERVE,
        {"fn": lambda: offered(ctx, names, handoffs, remember)},
    )
    specs, mutating = menu["specs"], {k: bool(v) for k, v in menu["mutating"].items()}
    asks = {k: ApprovalRule(**v) for k, v in menu.get("approval", {}).items()}
    state = begin(instructions, input) if resume is None else LoopState.from_json(resume)
    first_turn = state.turns
    last_text = ""
    while True:
        spent = exhausted(state, budget)
        if spent is not None:
            return _result(state, LoopStatus.BUDGET_EXHAUSTED, last_text, spent, remember)
        if history_turns is not None and state.turns - first_turn >= history_turns:
            return _result(state, LoopStatus.CONTINUE, last_text, None, remember)
        try:
            generation: Generation = await ctx.generate(
                provider,
                model,
                messages_to_json(state.messages),
                tools=specs,
                tool_choice=tool_choice,
                **dict(params or {}),
            )
        except BudgetExceeded:
            return _result(
                state, LoopStatus.BUDGET_EXHAUSTED, last_text, Exhausted.POLICY, remember
            )
        last_text = generation.text
        step = decide(state, generation, budget, mutating)
        if isinstance(step, Stop):
            return _result(step.state, step.status, step.text, step.exhausted, remember)
        records = await _perform(ctx, step, asks, approve, handed, remember)
        state = answer(step.state, step, records)


def _result(
    state: LoopState, status: LoopStatus, text: str, spent: Exhausted | None, remember: bool
) -> LoopResult:
    held = tuple(
        note
        for c in state.calls
        if remember and c.call.name == REMEMBER and c.ok
        for note in [note_of(c.call, c.turn)]
        if isinstance(note, Note)
    )
    return LoopResult(
        status,
        text,
        state.turns,
        state.usage,
        state.calls,
        state.messages,
        spent,
        held,
        state.earlier_calls,
    )
