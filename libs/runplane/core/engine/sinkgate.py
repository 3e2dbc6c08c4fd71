"""The sink gate inside the engine: every outbound call passes ``gate`` before it is announced.

On a fresh slot of a live call (``tools.live``), a run that runs under a Delegation (a
commissioned child: ``carried``) is first held to it — the call's sink must be one of its
sinks, and the delegation still valid on the run's logical clock (``DelegationRefused``,
reasons ``not_delegated`` / ``delegation_expired``). Then ``gate`` — for every run, whether or
not the agent declared sinks or the executor bound a deployment policy (none: the default
policy, ``AgentPolicy()``):

1. checks the run's budget against its account: its ceiling is the policy's budget met with
   the allotment its delegation carries (``allotments.ceiling``), its account what its result
   journal says it spent plus what each child it commissioned is charged (``LEDGER``: the
   escrowed allotment, or what the child reported spending once it answered) and what the
   generations before it spent under the same allotment (``Bounds.spent``);
2. checks that the policy grants the agent this sink (when it lists the agent's sinks);
3. resolves every ``Released`` the call carries from the run's journal (``_releases``): the
   release decision recorded under the witness of the request it carries (a ``release``
   decision, or a field a person edited in a call approval: ``releases.approved_releases``),
   rebuilt from that request and that decision. Destination, field, dimensions and decider are taken from
   there, never from the wrapper; a ``Released`` that differs from it in anything, or that
   no approved release of this run has, is refused (``release_mismatch``);
4. runs ``gate.judge`` on the exact JSON the call sends (a tool's ``args``, a model's
   ``prompt``) under the sink's declaration (the policy's, the agent's ``@sinks``, else the
   call's own ``mutating`` with no ceiling), labelled by matching against every recorded
   output of the run and its input — bytes that match nothing take ``labels.unattributed`` of
   the run's context label (``GateState.context``; the policy's ``unattributed: agent`` is
   the weaker rule: the agent's own) — joined with explicit ``Labeled`` wrappers, improved
   only by the journaled releases for this sink at this path. A call a model proposed in the
   agent loop (option ``proposal``) whose proposing turn the journal holds is labelled
   exactly instead (``proposed_labels``, ``gate.exact_labels``): verbatim copies by their
   sources, composed values by the turn's label, the call itself by the turn's trust. A call
   of a planned loop's plan (option ``planned``) is labelled from the journaled plan, its
   planner turn and the results its arguments are bound to (``planlabels``).

A refusal is recorded at the call's slot as a failure (``SinkRefused`` / ``BudgetExceeded``,
chain attrs ``gate``, ``sink``, ``reason``, ``path`` and the policy digest) and raised into the
agent: never a silent drop, never performed, and a replay serves the same failure from the
journal — the gate is not asked again, so a changed policy cannot make a replay diverge.

A call that passes writes nothing here (so a journal recorded before the gate existed replays
byte-identically) and notes the trust and sensitivity of what it sent: the call's result is
recorded at least that untrusted and that sensitive (``result_label``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from functools import lru_cache
from itertools import islice
from typing import Any, Final

from runplane.core.agents import EffectDecl
from runplane.core.allotments import Allotment, Charge, Ledger, account, ceiling
from runplane.core.canonical import canonical_json
from runplane.core.chain import INPUT_LABEL as INPUT_LABEL_PART
from runplane.core.chain import request_witness
from runplane.core.engine.decode import serve
from runplane.core.engine.planlabels import planned_labels
from runplane.core.engine.state import Run
from runplane.core.engine.table import Part
from runplane.core.engine.vocab import Resolution, Slot
from runplane.core.gate import (
    Grant,
    Matcher,
    Reason,
    Refusal,
    Source,
    declared_sinks,
    exact_labels,
    judge,
    label_scalars,
)
from runplane.core.jsonpaths import InvalidPath, parse, unwrap
from runplane.core.labels import (
    BOTTOM,
    Labeled,
    Wrapper,
    at_source,
    join,
    join_all,
    unattributed,
)
from runplane.core.plan import Bounds, Delegation
from runplane.core.policy import AgentPolicy, Budget, Spent, sink_decl
from runplane.core.releases import Released, ReleaseRefused, approved_releases, released_from
from runplane.errors import TerminalError
from runplane.wire import (
    ErrorInfo,
    JournalKind,
    Label,
    ResultEntry,
    Sensitivity,
    Trust,
    from_dict,
    to_dict,
)

__all__ = [
    "INPUT_LABEL",
    "LEDGER",
    "GateState",
    "account_of",
    "allotted",
    "bounds",
    "carried",
    "carried_input_label",
    "ceiling_of",
    "gate",
    "input_label",
    "proposed_labels",
    "result_label",
    "successor_bounds",
    "value_label",
]

_NO_POLICY = AgentPolicy()


class GateState:
    """Per-run gate memory: the matcher over recorded outputs (indexed once each), the run's
    context label (the join of the label of everything it has taken in: its input and every
    recorded output), and the label of what the outstanding call sent."""

    __slots__ = ("context", "flow", "indexed", "matcher", "seen", "spent")

    def __init__(self) -> None:
        self.matcher = Matcher()
        self.context = BOTTOM
        self.spent = Spent()
        self.indexed: set[tuple[int, int]] = set()
        self.seen = 0  # how many result entries are folded in
        self.flow: dict[tuple[int, int], Label] = {}


def gate(
    run: Run, slot: Slot, decl: EffectDecl, payload: Any = None, *, recovering: bool = False
) -> Resolution | None:
    """None when the call may go out; else the recorded refusal, served to the agent.

    ``payload``: what the call sends, when it is not a tool's ``args`` or a model's
    ``prompt`` (another outbound family — a commission — passes its own before it dispatches).
    ``recovering``: a call in doubt performed again (``doubt.perform_again``); the budget
    admitted it when it was first announced and is not asked again — nor is the delegation
    (its sink was admitted then; an expiry since must not strand the call in doubt)."""
    effect = slot.effect
    sink = effect.name
    if run.delegation_json is not None and not recovering:
        confined = _confined(run, sink, effect.family)
        if confined is not None:
            return _refuse(run, slot, "DelegationRefused", confined)
    declared = declared_sinks(run.spec.fn)
    ap = _agent_policy(run)
    state = _refresh(run)
    estimate = 0
    if effect.family == "generation":
        estimate = int(effect.request.get("params", {}).get("max_tokens") or 0)
    over = None if recovering else _over(run, ap, state, effect.family, estimate)
    if over is not None:
        return _refuse(run, slot, "BudgetExceeded", Refusal(sink, Reason.BUDGET, "$", over))
    if ap.sinks is not None and sink not in ap.sinks:
        message = f"the policy does not grant {run.spec.capability} the sink {sink}"
        return _refuse(run, slot, "SinkRefused", Refusal(sink, Reason.NOT_GRANTED, "$", message))
    if payload is None:
        payload = (
            effect.request["prompt"] if effect.family == "generation" else effect.request["args"]
        )
    rules = sink_decl(run.policy, sink, declared, decl.mutating)
    wrapped: dict[str, Any] = dict(effect.options.get("wrapped") or {})
    grants = _releases(run, sink, wrapped)
    if isinstance(grants, Refusal):
        return _refuse(run, slot, "SinkRefused", grants)
    labels = _labels(run, slot, payload, wrapped, grants, state, ap)
    refusal = judge(rules, payload, labels)
    if refusal is not None:
        return _refuse(run, slot, "SinkRefused", refusal)
    sent = join_all(labels.values())
    if run.policy is not None and (declared_source := run.policy.sources.get(sink)) is not None:
        sent = join(sent, declared_source)  # what the deployment says this source returns
    state.flow[(run.era, slot.call_seq)] = Label(
        trust=sent.trust, sensitivity=sent.sensitivity, provenance=()
    )
    return None


def _over(run: Run, ap: AgentPolicy, state: GateState, family: str, estimate: int) -> str | None:
    """Why one more ``family`` call would exceed the run's ceiling (its policy's budget met
    with its allotment), its account counted — naming the allotment when it is what binds."""
    spent, elapsed = _account(run, state), run.now - run.started_ms
    over = ceiling_of(run).refusal(spent, family, elapsed, estimate)
    if over is not None and ap.budget.refusal(spent, family, elapsed, estimate) is None:
        over += " (the allotment of the run that commissioned it)"
    return over


def _labels(
    run: Run,
    slot: Slot,
    payload: Any,
    wrapped: Mapping[str, Any],
    grants: list[Grant],
    state: GateState,
    ap: AgentPolicy,
) -> dict[str, Label]:
    """The label of each scalar the call sends: exactly, for a call the model proposed in the
    agent loop (``proposed_labels``), else by matching (``label_scalars``)."""
    effect = slot.effect
    # A tool call or a handoff (a commission) the model proposed in the agent loop.
    proposal = effect.options.get("proposal") if effect.family in ("tool", "commission") else None
    unmatched = _unattributed(ap, state.context)
    if proposal is not None and all(isinstance(w, Released) for w in wrapped.values()):
        tool = str(effect.options.get("tool", effect.name))
        edited = _edited(grants)
        bound = (run.era, slot.call_seq)
        labels = proposed_labels(run, bound, str(proposal), tool, payload, edited)
        if labels is not None:
            if edited:
                # The fields a person edited in a call approval (their releases, honoured
                # here) are labelled as any released value is; every other one exactly.
                mine = {name: payload[name] for name in edited}
                labels.update(label_scalars(mine, state.matcher, {}, grants, unmatched))
            return labels
    planned = effect.options.get("planned") if effect.family == "tool" else None
    if planned is not None and not wrapped:  # a planned loop's call (``planlabels``)
        earlier = sorted((k, e) for k, e in run.rec.results.items() if k < (run.era, slot.call_seq))
        first = Source("input:admission", input_label(run), json.loads(run.input_json))
        tool = str(effect.options.get("tool", effect.name))
        exact = planned_labels(earlier, first, lambda e: _taken_in(run, e), planned, tool, payload)
        if exact is not None:
            return exact
    explicit = {p: w.label for p, w in wrapped.items() if isinstance(w, Labeled)}
    return label_scalars(payload, state.matcher, explicit, grants, unmatched)


def proposed_labels(
    run: Run,
    bound: tuple[int, int],
    call_id: str,
    tool: str,
    args: Any,
    edited: frozenset[str] = frozenset(),
) -> dict[str, Label] | None:
    """Exact labels for a call a model proposed in the agent loop (``gate.exact_labels``),
    everything read from the journal: the proposing turn is the latest generation recorded
    before ``bound`` (era, call_seq) that proposed calls, and it must have proposed exactly
    this call (its id, this tool, these arguments, canonically equal — except the top-level
    arguments named in ``edited``, which a person changed in a call approval and whose
    releases the caller honours) — else None, and the call is labelled by matching like any
    other.

    What the turn could read is the run's input and every result recorded before it, except
    earlier turns that proposed calls: a model's proposal is taken as a function of what it
    was shown (the loop's premise), and what it was shown is already in that join. A
    generation that only answered text stays an untrusted source, as everywhere."""
    earlier = sorted(
        ((k, e) for k, e in run.rec.results.items() if k < bound), key=lambda ke: ke[0]
    )
    turn_at: tuple[int, int] | None = None
    turn: ResultEntry | None = None
    for key, entry in reversed(earlier):
        if _proposals(entry):
            turn_at, turn = key, entry
            break
    if turn is None or turn_at is None:
        return None
    if edited and not isinstance(args, Mapping):
        return None
    wanted = canonical_json(_without(args, edited))
    if not any(
        c.get("id") == call_id
        and c.get("name") == tool
        and (not edited or _same_keys(c.get("arguments"), args))
        and canonical_json(_without(c.get("arguments"), edited)) == wanted
        for c in _proposals(turn)
    ):
        return None
    sources = _read(run, [(k, e) for k, e in earlier if k < turn_at])
    read = join_all(s.label for s in sources)
    composed = Label(trust=read.trust, sensitivity=read.sensitivity, provenance=(turn.name,))
    choice = Label(trust=read.trust, sensitivity=Sensitivity.PUBLIC, provenance=read.provenance)
    return exact_labels(args, sources, composed, choice)


def _read(run: Run, results: list[tuple[tuple[int, int], ResultEntry]]) -> list[Source]:
    """What a model turn reads, as sources: the run's input and each of ``results`` but the
    turns that proposed calls (``proposed_labels``: a proposal is a function of what the model
    was shown, already in this join; a generation that only answered text stays a source)."""
    sources = [Source("input:admission", input_label(run), json.loads(run.input_json))]
    for _, entry in results:
        if _proposals(entry):
            continue
        source = _taken_in(run, entry)
        if source is not None:
            sources.append(source)
    return sources


def _without(args: Any, names: frozenset[str]) -> Any:
    if not names or not isinstance(args, Mapping):
        return args
    return {k: v for k, v in args.items() if k not in names}


def _same_keys(proposed: Any, args: Any) -> bool:
    return (
        isinstance(proposed, Mapping) and isinstance(args, Mapping) and set(proposed) == set(args)
    )


def _edited(grants: list[Grant]) -> frozenset[str]:
    """The top-level arguments a honoured release covers whole (a call approval's edits)."""
    names = set()
    for grant in grants:
        try:
            members = parse(grant.path)
        except InvalidPath:
            continue
        if len(members) == 1 and isinstance(members[0], str):
            names.add(members[0])
    return frozenset(names)


def _proposals(entry: ResultEntry) -> list[dict[str, Any]]:
    """The tool calls a recorded generation proposed (none for anything else)."""
    if entry.family != "generation" or not entry.ok or entry.value_json is None:
        return []
    value = json.loads(entry.value_json)
    calls = value.get("tool_calls") if isinstance(value, dict) else None
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def carried(run: Run) -> Delegation | str | None:
    """The Delegation the run runs under (a commissioned child), or why the one its StartRun
    carried does not read (every outbound call is then refused: fail closed), or None."""
    held = bounds(run)
    return held if held is None or isinstance(held, str) else held.delegation


def bounds(run: Run) -> Bounds | str | None:
    """Everything the run's StartRun carried (delegation, allotment), or why it does not read."""
    return None if run.delegation_json is None else _read_bounds(run.delegation_json)


def allotted(run: Run) -> Allotment | None:
    """The allotment the run spends from (None: bounded in money by policy alone; also when
    its delegation does not read — every call is refused then anyway)."""
    held = bounds(run)
    return None if held is None or isinstance(held, str) else held.allotment


@lru_cache(maxsize=256)
def _read_bounds(text: str) -> Bounds | str:
    try:
        return Bounds.read(text)
    except TerminalError as exc:
        return f"the run's delegation does not read: {exc}"[:500]


def ceiling_of(run: Run) -> Budget:
    """The run's budget in every unit: its policy's, met with its allotment."""
    return ceiling(_agent_policy(run).budget, allotted(run))


def account_of(run: Run) -> Spent:
    """What the run counts as spent: its own calls (from its result journal), its children's
    charges and its predecessors' spending under the same allotment — what it reports to
    its parent when it ends, and what its budget is checked against."""
    return _account(run, _refresh(run))


def successor_bounds(run: Run) -> str | None:
    """The ``delegation_json`` a continue-as-new successor of the run starts under: the
    run's own, and — when it spends from an allotment — what it spent so far (``spent``),
    so the generations of one run share its allotment instead of each spending it whole."""
    if allotted(run) is None:
        return run.delegation_json
    held = bounds(run)
    assert isinstance(held, Bounds)  # an allotment was read from it
    return canonical_json(Bounds(held.delegation, held.allotment, account_of(run)).to_json())


def _account(run: Run, state: GateState) -> Spent:
    held = bounds(run)
    before = None if held is None or isinstance(held, str) else held.spent
    own = state.spent if before is None else state.spent.added(before)
    return account(own, LEDGER.of(run))


def _confined(run: Run, sink: str, family: str) -> Refusal | None:
    """The delegation's say on this call: within its validity on the run's logical clock, and
    to one of its sinks. A commission's target is checked against its ``capabilities``
    instead (``commission._delegation``), not its sinks."""
    held = carried(run)
    if held is None:
        return None
    if isinstance(held, str):
        return Refusal(sink, Reason.NOT_DELEGATED, "$", held)
    said = held.confines(None if family == "commission" else sink, run.clock_ms)
    return None if said is None else Refusal(sink, Reason(said[0]), "$", said[1])


def result_label(run: Run, call_seq: int, label: Label | None) -> Label | None:
    """The label to record a live call's result with: the performer's, raised to the trust and
    sensitivity of what the call sent (labels follow the data). Provenance is not carried
    over: a result names its own origin, which is what a protected field's source rule checks."""
    state = run.gate_state
    if state is None:
        return label
    sent = state.flow.pop((run.era, call_seq), None)
    if sent is None or (sent.trust is Trust.TRUSTED and sent.sensitivity is Sensitivity.PUBLIC):
        return label
    return sent if label is None else join(label, sent)


def value_label(run: Run, value: Any) -> Label:
    """The label of ``value`` as the gate would find it now, from outputs recorded before the
    run's current call (a replay has later ones in hand: they must not count, or agent code
    branching on a label would take another way on replay). Costs a pass over the history."""
    plain, wrapped = unwrap(value, Wrapper)
    bound = (run.era, run.cursor)
    first = Source("input:admission", input_label(run), json.loads(run.input_json))
    matcher, context = Matcher([first]), first.label
    for key, entry in run.rec.results.items():
        source = _taken_in(run, entry) if key < bound else None
        if source is not None:
            matcher.add(source)
            context = join(context, source.label)
    explicit = {p: w.label for p, w in wrapped.items() if isinstance(w, Labeled)}
    unmatched = _unattributed(_agent_policy(run), context)
    return join_all(label_scalars(plain, matcher, explicit, (), unmatched).values())


def _taken_in(run: Run, entry: ResultEntry) -> Source | None:
    """What a recorded result brought into the run, for matching and the context label: its
    value under its label (the source's, where it was recorded without one); None for a
    failure or a result without a value."""
    if not entry.ok or entry.value_json is None:
        return None
    label = entry.label or at_source(entry.family, entry.name, run.spec.capability)
    return Source(entry.name, label, json.loads(entry.value_json))


def _agent_policy(run: Run) -> AgentPolicy:
    return _NO_POLICY if run.policy is None else run.policy.for_agent(run.spec.capability)


def _unattributed(ap: AgentPolicy, context: Label) -> Label:
    """The label of bytes that match nothing: by the run's context, or — the weaker rule a
    policy may name (``unattributed: agent``) — the agent's own."""
    return BOTTOM if ap.unattributed == "agent" else unattributed(context)


def input_label(run: Run) -> Label:
    """The label of the run's input: the admission input's — the policy's, else trusted and
    internal (the emitter is an authenticated principal) — joined with what the input carries
    from the run before it (``INPUT_LABEL``: a successor's, from its StartRun)."""
    declared = None if run.policy is None else run.policy.for_agent(run.spec.capability)
    if declared is not None and declared.input_label is not None:
        admitted = declared.input_label
    else:
        admitted = Label(
            trust=Trust.TRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=("input:admission",)
        )
    carried_over = INPUT_LABEL.of(run)
    return admitted if carried_over is None else join(admitted, carried_over)


def _label_text(label: Label) -> str:
    return canonical_json(to_dict(label))


def _read_label(text: str) -> Label:
    return from_dict(Label, json.loads(text))


# What a run's input carries from the run that handed it over (a successor's: the join of
# everything its predecessor had read), None for an admission input. The successor family's
# part: set from the StartRun, kept in the snapshot, joined into ``input_label``.
INPUT_LABEL: Final[Part[Label | None]] = Part(
    INPUT_LABEL_PART, None, encode=lambda label: _label_text(_present(label)), decode=_read_label
)


def _present(label: Label | None) -> Label:
    if label is None:  # pragma: no cover - a Part encodes only values other than its default
        raise TerminalError("no input label to encode")
    return label


def carried_input_label(run: Run) -> str | None:
    """What a successor's input carries, as the StartRun's ``input_label_json``: the join of
    everything this run has read as a model turn would (``_read``: its input and every
    recorded result but the agent loop's proposing turns) — None when that is the admission
    input's label alone (nothing read beyond it: a successor like any run). The provenance
    is left out: a carried value's origin is the predecessor, its trust and sensitivity are
    what travel."""
    admitted = input_label(run)
    read = join_all(s.label for s in _read(run, sorted(run.rec.results.items())))
    carried = Label(trust=read.trust, sensitivity=read.sensitivity, provenance=())
    if INPUT_LABEL.of(run) is None and join(admitted, carried) == admitted:
        return None
    return _label_text(carried)


def _state(run: Run) -> GateState:
    if run.gate_state is None:
        run.gate_state = GateState()
        first = Source("input:admission", input_label(run), json.loads(run.input_json))
        run.gate_state.matcher.add(first)
        run.gate_state.context = first.label
    state: GateState = run.gate_state
    return state


def _refresh(run: Run) -> GateState:
    """The run's gate memory with every recorded result folded in once: its output indexed
    for matching and joined into the context label, what it spent added to the budget's
    account."""
    state = _state(run)
    results = run.rec.results
    if len(results) == state.seen:
        return state
    # The result journal only grows (in insertion order): fold in what came since last time.
    for key, entry in islice(results.items(), state.seen, None):
        if key in state.indexed:
            continue
        state.indexed.add(key)
        state.spent = state.spent.plus(entry)
        source = _taken_in(run, entry)
        if source is not None:
            state.matcher.add(source)
            state.context = join(state.context, source.label)
    state.seen = len(results)
    return state


def _releases(run: Run, sink: str, wrapped: dict[str, Any]) -> list[Grant] | Refusal:
    """The releases honoured here, each rebuilt from the run's journal — or the refusal of a
    ``Released`` that is not its journaled decision.

    A ``Released`` is looked up by the witness of the request it carries among the run's
    approved release decisions; what it may improve is ``released_from`` that request and the
    journaled decision (the witness commits to the request, the journal holds the decider).
    If the wrapper differs from that in anything — re-pointed at another destination or field,
    another decider, other dimensions, another value — or no approved release of this run has
    its witness (made by hand), the call is refused: the agent tried to claim what was not
    decided. A genuine one is honoured only at the destination and field it names; anywhere
    else it is its value, labelled as before."""
    offered = [(p, w) for p, w in wrapped.items() if isinstance(w, Released)]
    if not offered:
        return []
    decisions = approved_releases(run.rec.results.values())
    grants = []
    for path, w in offered:
        journaled = _journaled(w, decisions)
        if isinstance(journaled, str):
            return Refusal(sink, Reason.RELEASE_MISMATCH, path, journaled)
        if journaled.destination != sink or journaled.field != path:
            continue
        by = tuple(f"human:{p}" for p in journaled.decided_by) or ("policy:data:release",)
        grants.append(Grant(path, journaled.trust, journaled.sensitivity, by))
    return grants


def _journaled(w: Released, decisions: Mapping[str, Mapping[str, Any]]) -> Released | str:
    """The ``Released`` the journal holds for ``w``'s request, or why there is none like it."""
    try:
        witness = request_witness(w.request)
        decision = decisions.get(witness)
        journaled = None if decision is None else released_from(w.request, decision)
    except (TypeError, ValueError, KeyError, ReleaseRefused):
        journaled = None
    if journaled is None:
        return "no approved release in this run's journal has the request this Released carries"
    differs = [f.name for f in fields(Released) if getattr(w, f.name) != getattr(journaled, f.name)]
    if differs:
        return f"the Released differs from its journaled decision in {', '.join(differs)}"
    return journaled


def _refuse(run: Run, slot: Slot, type_: str, refusal: Refusal) -> Resolution:
    error = ErrorInfo(
        type=type_, message=f"{refusal.sink}: {refusal.message}"[:500], retryable=False
    )
    attrs = {
        "gate": "refused",
        "sink": refusal.sink,
        "reason": str(refusal.reason),
        "path": refusal.path,
    }
    if run.policy is not None:
        attrs["policy"] = run.policy.digest
    entry = run.rec.result(slot, JournalKind.EFFECT_RECORDED, error=error, attrs=attrs)
    return serve(run.rec, slot.effect, entry)


def _encode_ledger(ledger: Ledger) -> str:
    return canonical_json(
        {
            key: {
                "allotted": c.allotted.to_json(),
                "spent": None if c.spent is None else c.spent.to_json(),
            }
            for key, c in ledger
        }
    )


def _decode_ledger(text: str) -> Ledger:
    data = json.loads(text)
    charges = [
        (
            str(key),
            Charge(
                Allotment.from_json(v["allotted"]),
                None if v["spent"] is None else Spent.from_json(v["spent"]),
            ),
        )
        for key, v in data.items()
    ]
    return tuple(sorted(charges, key=lambda kc: kc[0]))


# What the run allotted each child it commissioned, by the child's admission key, and what
# each reported spending once it answered (``core.allotments``). The commission family's
# part: written when it allots (``commission.start_child``) and settles (its result), kept in
# the snapshot, read here into the run's account. Empty for a run that allotted nothing.
LEDGER: Final[Part[Ledger]] = Part("allotted", (), encode=_encode_ledger, decode=_decode_ledger)
