"""The sink gate inside the engine: every outbound call passes ``gate`` before it is announced.

On a fresh slot of a live call (``tools.live``), a run that runs under a Delegation (a
commissioned child: ``carried``) is first held to it — the call's sink must be one of its
sinks, and the delegation still valid on the run's logical clock (``DelegationRefused``,
reasons ``not_delegated`` / ``delegation_expired``). Then, when the gate is on for the run (the
agent declared sinks with ``@sinks``, or the executor bound a deployment policy), ``gate``:

1. checks the run's budget (policy) against what its result journal says it spent;
2. checks that the policy grants the agent this sink (when it lists the agent's sinks);
3. runs ``gate.check`` on the exact JSON the call sends (a tool's ``args``, a model's
   ``prompt``), labelled by matching against every recorded output of the run and its input,
   joined with explicit ``Labeled`` wrappers, improved only by ``Released`` wrappers whose
   release is approved in this run's journal, for this sink, at this path, for this value.

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
from functools import lru_cache
from itertools import islice
from typing import Any

from runplane.core.agents import EffectDecl
from runplane.core.canonical import canonical_json
from runplane.core.chain import request_witness
from runplane.core.engine.decode import serve
from runplane.core.engine.state import Run
from runplane.core.engine.vocab import Resolution, Slot
from runplane.core.gate import (
    Grant,
    Matcher,
    Reason,
    Refusal,
    SinkDecl,
    Source,
    declared_sinks,
    judge,
    label_scalars,
)
from runplane.core.jsonpaths import get, unwrap
from runplane.core.labels import Labeled, Wrapper, at_source, join, join_all
from runplane.core.plan import Delegation
from runplane.core.policy import AgentPolicy, Spent
from runplane.core.releases import RELEASE_FAMILY, Released
from runplane.errors import TerminalError
from runplane.wire import ErrorInfo, JournalKind, Label, Sensitivity, Trust

__all__ = ["GateState", "carried", "gate", "input_label", "result_label"]

_NO_POLICY = AgentPolicy()


class GateState:
    """Per-run gate memory: the matcher over recorded outputs (indexed once each) and the
    label of what the outstanding call sent."""

    __slots__ = ("flow", "indexed", "matcher", "seen", "spent")

    def __init__(self) -> None:
        self.matcher = Matcher()
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
    if run.policy is None and declared is None:
        return None
    ap = _NO_POLICY if run.policy is None else run.policy.for_agent(run.spec.capability)
    state = _refresh(run)
    estimate = 0
    if effect.family == "generation":
        estimate = int(effect.request.get("params", {}).get("max_tokens") or 0)
    over = (
        None
        if recovering
        else ap.budget.refusal(state.spent, effect.family, run.now - run.started_ms, estimate)
    )
    if over is not None:
        return _refuse(run, slot, "BudgetExceeded", Refusal(sink, Reason.BUDGET, "$", over))
    if ap.sinks is not None and sink not in ap.sinks:
        message = f"the policy does not grant {run.spec.capability} the sink {sink}"
        return _refuse(run, slot, "SinkRefused", Refusal(sink, Reason.NOT_GRANTED, "$", message))
    if payload is None:
        payload = (
            effect.request["prompt"] if effect.family == "generation" else effect.request["args"]
        )
    rules = _sink_decl(run, sink, decl, declared)
    wrapped: dict[str, Any] = dict(effect.options.get("wrapped") or {})
    explicit = {p: w.label for p, w in wrapped.items() if isinstance(w, Labeled)}
    labels = label_scalars(payload, state.matcher, explicit, _grants(run, sink, payload, wrapped))
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


def carried(run: Run) -> Delegation | str | None:
    """The Delegation the run runs under (a commissioned child), or why the one its StartRun
    carried does not read (every outbound call is then refused: fail closed), or None."""
    return None if run.delegation_json is None else _read_delegation(run.delegation_json)


@lru_cache(maxsize=256)
def _read_delegation(text: str) -> Delegation | str:
    try:
        return Delegation.read(text)
    except TerminalError as exc:
        return f"the run's delegation does not read: {exc}"[:500]


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
    matcher = Matcher([Source("input:admission", input_label(run), json.loads(run.input_json))])
    for key, entry in run.rec.results.items():
        if key < bound and entry.ok and entry.value_json is not None:
            matcher.add(Source(entry.name, entry.label, json.loads(entry.value_json)))
    explicit = {p: w.label for p, w in wrapped.items() if isinstance(w, Labeled)}
    return join_all(label_scalars(plain, matcher, explicit, ()).values())


def input_label(run: Run) -> Label:
    """The label of the run's admission input: the policy's, else trusted and internal (the
    emitter is an authenticated principal)."""
    declared = None if run.policy is None else run.policy.for_agent(run.spec.capability)
    if declared is not None and declared.input_label is not None:
        return declared.input_label
    return Label(
        trust=Trust.TRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=("input:admission",)
    )


def _state(run: Run) -> GateState:
    if run.gate_state is None:
        run.gate_state = GateState()
        run.gate_state.matcher.add(
            Source("input:admission", input_label(run), json.loads(run.input_json))
        )
    state: GateState = run.gate_state
    return state


def _refresh(run: Run) -> GateState:
    """The run's gate memory with every recorded result folded in once: its output indexed
    for matching, what it spent added to the budget's account."""
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
        if entry.ok and entry.value_json is not None:
            label = entry.label or at_source(entry.family, entry.name, run.spec.capability)
            state.matcher.add(Source(entry.name, label, json.loads(entry.value_json)))
    state.seen = len(results)
    return state


def _sink_decl(run: Run, sink: str, decl: EffectDecl, declared: Any) -> SinkDecl:
    """The deployment's declaration wins, then the agent's, then the default: the call's own
    ``mutating``, no ceiling."""
    if run.policy is not None and sink in run.policy.sinks:
        found: SinkDecl = run.policy.sinks[sink]
        return found
    if declared is not None and sink in declared:
        mine: SinkDecl = declared[sink]
        return mine
    return _default_decl(sink, decl.mutating)


@lru_cache(maxsize=1024)
def _default_decl(sink: str, mutating: bool) -> SinkDecl:
    return SinkDecl(sink, mutating=mutating)


def _grants(run: Run, sink: str, payload: Any, wrapped: dict[str, Any]) -> list[Grant]:
    """The releases honoured here: a ``Released`` at the path it names, sent to the sink it
    names, carrying the value it released, whose request is approved in this run's journal."""
    offered = [
        (p, w) for p, w in wrapped.items() if isinstance(w, Released) and w.destination == sink
    ]
    if not offered:
        return []
    approved = {
        e.request_witness
        for e in run.rec.results.values()
        if e.family == RELEASE_FAMILY
        and e.ok
        and e.value_json is not None
        and json.loads(e.value_json).get("approved") is True
    }
    grants = []
    for path, w in offered:
        if w.field != path or request_witness(w.request) not in approved:
            continue
        if canonical_json(get(payload, path)) != canonical_json(w.request["release"]["value"]):
            continue  # a genuine proof around another value proves nothing about this one
        by = tuple(f"human:{p}" for p in w.decided_by) or ("policy:data:release",)
        grants.append(Grant(path, w.trust, w.sensitivity, by))
    return grants


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
