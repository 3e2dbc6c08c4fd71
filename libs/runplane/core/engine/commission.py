"""Effect family: commission — a child run of another agent, started through admission.

``ctx.commission(capability, input, delegation=…)`` is a fan-out of one (``fanout``): its
branch sends an ``AdmissionRequest`` for the child and its join waits for the child's result.
This module builds on ``fanout`` (the registry asks ``branch`` here first, and a branch this
module dispatches carries how its child's result signal reads), never the other way round.

- **Exactly one child.** The child's admission key is derived from the parent's position,
  ``runplane.child/<parent session>/<era>/<call_seq>``: a replayed or restored parent sends
  the same key again, and admission answers ``duplicate`` instead of starting a second child.
  A checkpointed parent, which re-executes at other slots after a restore, derives it from
  the request instead (``_identity``). Admission refuses that prefix from emitters other than
  the platform (``services/admission``).
- **Under a delegation.** The child runs under the delegation the commission carries, rebuilt
  under the one the parent itself runs under (``_delegation``): it travels in the child's
  ``AdmissionRequest`` / ``StartRun`` and the child's sink gate holds every call to it
  (``sinkgate.carried``). The commission itself passes the parent's sink gate first.
- **Parked, not polling.** The child's executor, in the step that ends the child, sends the
  parent a ``Signal`` named ``runplane.child:<admission key>`` carrying
  ``{ok, value | error, child}``. The parent records it at the branch's slot (provenance
  ``agent/<capability>``), in ready order; a result that arrives before the parent can apply
  it is buffered in the parent's snapshot like any early signal, so it survives a crash.
- **Budgets over a tree.** A run whose ceiling bounds anything (its policy's budget, or an
  allotment it was itself handed) allots the child part of what it has left — all of it by
  default (an even part each for several commissions dispatched together that declare none),
  or the commission's declared ``budget`` (a share, or amounts) — and is charged the
  whole allotment at once (the run's ``LEDGER``, announce attr ``allotment``); nothing left in
  a bounded unit fails the branch ``BudgetExceeded`` (``gate=refused``, ``reason=budget``) and
  no child starts. The allotment travels in the child's delegation (``Bounds``) and bounds
  the child's every call and its own allotments in turn; the child's result carries what it
  spent (``spent``: its account, counted by its executor from its journal), which replaces
  the escrow in the parent's account once (result attr ``child_spent``) — ``core.allotments``.
- **Linked journals.** The parent's announce record names the child's admission key and
  capability; the child's RUN_ADMITTED carries ``parent`` (the parent's session) and
  ``parent_call`` in its attrs, and the parent's result record the child's session id
  (``child_run``): ``runplane runs tree`` and the journal's runs page walk both ways.
- **Fates.** A failed, cancelled or quarantined child is a failed branch (``ChildFailed`` in
  the parent, which decides). A parent that ends first (quarantined, say) leaves its children
  to run to their own end, and their result signal is refused by the ended parent
  (dead-lettered, visible). Decision 28.
- **Cancellation down the tree.** A child tells its parent its run id in its first step (a
  ``Signal`` named ``runplane.child-started:<key>``; a continue-as-new successor tells it
  again), kept as the family's part of the parent (``CHILDREN``, in the snapshot). A parent
  that accepts a cancel (``cascade``, the row's ``on_cancel``) sends each child still open a
  cancel of its own — ``runplane.cancel``, the parent's requester as ``sent_by``, the reason
  naming the parent — unless the commission's close policy is ``wait``
  (``ctx.commission(..., on_parent_cancel="wait")``); a child that tells its run id after
  the parent's cancel is cancelled then. Each child unwinds as any cancelled run (its groups'
  compensations run), cascades to its own children, ends, and answers; the parent's join
  completes and the parent ends RUN_CANCELLED once its children have. CANCEL_REQUESTED names
  the children it reached (``cascaded_to``). Decision 28.
"""

from __future__ import annotations

import json
from typing import Any, Final

from runplane.core.agents import Durability, EffectDecl
from runplane.core.allotments import Allotment, allot, charge_of, escrow, read_ask, settle
from runplane.core.canonical import canonical_json
from runplane.core.engine.cancel import CANCEL_SIGNAL, CASCADE_ID
from runplane.core.engine.fanout import Branch, held_refusal, hold, on_outcome
from runplane.core.engine.operated import CANCEL, CancelRequest
from runplane.core.engine.sinkgate import LEDGER, account_of, allotted, carried, ceiling_of
from runplane.core.engine.state import Run
from runplane.core.engine.table import Part
from runplane.core.engine.values import Outcome
from runplane.core.engine.vocab import SUSPEND, Rejected, Resolution, Slot
from runplane.core.gate import Reason
from runplane.core.keys import carried_child_key, child_key, child_root, parent_of
from runplane.core.plan import Bounds, Delegation
from runplane.core.policy import Spent
from runplane.errors import TerminalError
from runplane.wire import AdmissionRequest, JournalKind, RunStatus, Signal, StartRun

__all__ = [
    "CHILDREN",
    "CHILD_SIGNAL",
    "STARTED_SIGNAL",
    "branch",
    "cascade",
    "child_reply",
    "child_started",
    "claims",
    "on_signal",
    "start_child",
]

CHILD_SIGNAL: Final = "runplane.child:"
STARTED_SIGNAL: Final = "runplane.child-started:"
CASCADE_REASON: Final = "the parent run {parent} was cancelled: {reason}"
WAIT: Final = "wait"  # a commission's close policy that leaves its child to its own end
CLOSE_POLICIES: Final = ("cancel", WAIT)


def _encode_children(children: tuple[tuple[str, str], ...]) -> str:
    return canonical_json(dict(children))


def _decode_children(text: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(json.loads(text).items()))


# The run ids the run's children told it (``STARTED_SIGNAL``), by the key each was
# commissioned under: what a cancel reaches them by. Sorted pairs: an immutable value.
CHILDREN: Final[Part[tuple[tuple[str, str], ...]]] = Part(
    "children", (), encode=_encode_children, decode=_decode_children
)
_ENDED: Final = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED)


def branch(run: Run, slot: Slot) -> Resolution | None:
    """A fresh branch slot of a commission: the child asked for (or the branch's outcome
    known now), held in ready order like any branch. None for any other family's branch
    (``fanout.branch`` serves it)."""
    if slot.effect.family != "commission":
        return None
    signal, refusal, attrs = start_child(run, slot)
    held = Branch(
        slot, signal=signal, read=lambda s: _outcome(run, s), outcome=refusal, attrs=attrs
    )
    return hold(run, held)


def start_child(run: Run, slot: Slot) -> tuple[str, Outcome | None, dict[str, str]]:
    """Announce the commission and ask admission for the child → (the result's signal name,
    the branch's outcome when it is known now — a refusal by the delegation or the sink gate
    (no child is started then), or a checkpointed run's earlier era's record — and the attrs
    to journal with it)."""
    effect, call_seq, witness = slot
    request = effect.request
    capability = str(request["capability"])
    key, prior = _identity(run, slot)
    delegation, refusal = _delegation(
        run, capability, request.get("delegation"), narrow=bool(request.get("narrow"))
    )
    outcome: Outcome | None = None
    attrs: dict[str, str] = {}
    allotment: Allotment | None = None
    if prior is not None:
        outcome, attrs = prior  # recorded in an earlier era: the same child, already applied
    elif refusal is not None:
        # Counted with the gate's refusals (runplane_gate_refusals_total, by sink and reason).
        outcome = refusal[0]
        attrs = {"gate": "refused", "sink": effect.name, "reason": str(refusal[1])}
    else:
        # The child's input leaves the run for another agent: an outbound, mutating sink
        # (``agent/<capability>``) as far as the gate is concerned.
        gated = held_refusal(run, slot, EffectDecl(effect.name), request["input"])
        if gated is not None:
            outcome, attrs = gated
        else:
            allotment, over = _allot(run, key, request.get("budget"), effect.options.get("split"))
            if over is not None:
                outcome = Outcome.failure("BudgetExceeded", f"{effect.name}: {over}"[:500])
                attrs = {"gate": "refused", "sink": effect.name, "reason": str(Reason.BUDGET)}
    announced = {"child_key": key, "capability": capability, "node": str(request.get("node", ""))}
    if allotment is not None:
        announced["allotment"] = canonical_json(allotment.to_json())
    run.rec.seal(
        JournalKind.EFFECT_ANNOUNCED,
        call_seq=call_seq,
        family=effect.family,
        name=effect.name,
        witness=witness,
        attrs=announced,
    )
    if outcome is None:
        carry = Bounds(delegation, allotment)
        run.rec.out.commands.append(
            AdmissionRequest(
                admission_key=key,
                capability=capability,
                input_json=canonical_json(request["input"]),
                tenant=run.tenant,
                # The child acts for the same principal: four-eyes keeps refusing them.
                initiator=run.initiator,
                requested_ms=run.rec.now,
                # The child runs under it: its executor bounds every call it makes by it.
                delegation_json=canonical_json(carry.to_json()) if carry.carried() else None,
            )
        )
    return CHILD_SIGNAL + key, outcome, attrs


def _allot(
    run: Run, key: str, asked: Any, split: Any = None
) -> tuple[Allotment | None, str | None]:
    """What this run allots the child ``key`` → (the allotment, escrowed in the run's
    ``LEDGER``; None when its ceiling bounds nothing), or why it cannot. ``asked``: the
    commission's declared budget; none declared, ``split`` (the commissions of its ready set
    still to be dispatched that declare none, this one included: ``planrun``) makes it
    1/split of what is left — an even split of the set — and without it all that is left.
    The same child commissioned again (a restored run re-dispatching an open branch) keeps
    the allotment it was escrowed: it is not allotted, nor charged, twice."""
    ledger = LEDGER.of(run)
    known = charge_of(ledger, key)
    if known is not None:
        return known.allotted, None
    try:
        ask = read_ask(asked)
    except TerminalError as exc:
        return None, f"the commission's budget does not read: {exc}"
    if ask is None and isinstance(split, int) and not isinstance(split, bool) and split > 1:
        ask = 1.0 / split
    got = allot(ceiling_of(run), account_of(run), ask)
    if isinstance(got, str):
        return None, got
    if not got.bounded():
        return None, None
    LEDGER.put(run, escrow(ledger, key, got))
    return got, None


def _identity(run: Run, slot: Slot) -> tuple[str, tuple[Outcome, dict[str, str]] | None]:
    """The child's admission key, and for a checkpointed run the outcome an earlier era
    recorded for this same commission.

    A replayable run's key is its position (``child_key``): a replay re-reaches the same slot.
    A checkpointed run is restored into a new era and re-executes from its checkpoint, at
    other slots: its key is the request's witness and its occurrence in the era
    (``carried_child_key``) — the i-th commission of a request in every era is the same child,
    as the i-th call of a tool is the same call in the side-effect log (``eras``). A child
    whose outcome an earlier era recorded is served from that log (in ready order, like any
    outcome); one still running sends its result to the parent's inbox, whichever era waits."""
    effect, call_seq, witness = slot
    if run.spec.durability is Durability.REPLAYABLE:
        return child_key(run.session_id, run.era, call_seq), None
    occurrence = sum(
        1
        for (era, _), e in run.rec.results.items()
        if era == run.era and e.family == effect.family and e.request_witness == witness
    ) + sum(
        1
        for b in run.branches.values()
        if b.slot.effect.family == effect.family and b.slot.witness == witness
    )
    key = carried_child_key(run.session_id, witness, occurrence)
    queue = run.prior.get((effect.family, effect.name, witness))
    if not queue:
        return key, None
    old = queue.popleft()
    value = json.loads(old.value_json) if old.ok and old.value_json is not None else None
    outcome = Outcome(ok=old.ok, value=value, error=old.error, label=old.label)
    return key, (outcome, {"reconstructed_from": f"{old.era}/{old.call_seq}"})


def _delegation(
    run: Run, capability: str, data: Any, *, narrow: bool = False
) -> tuple[Delegation | None, tuple[Outcome, Reason] | None]:
    """The delegation the child runs under, or why the commission may not go out.

    It is the one the commission carries, rebuilt ``under`` the delegation this run itself
    runs under (a child commissioning a grandchild can only narrow what it holds), or that
    one unchanged when the commission carries none — narrowed to ``capability`` alone when
    the commission asks (``narrow``: an agent loop's handoff); it must admit this capability
    for this agent and still be valid on the run's logical clock. A widened chain does not
    even read."""
    held = carried(run)
    if isinstance(held, str):
        return None, _refused(held, Reason.NOT_DELEGATED)
    try:
        offered = None if data is None else Delegation.from_json(data)
        delegation = held if offered is None else offered if held is None else offered.under(held)
        if narrow and offered is None and held is not None:
            delegation = held.delegate(capabilities=held.scope.capabilities & {capability})
    except TerminalError as exc:
        return None, _refused(str(exc), Reason.NOT_DELEGATED)
    if delegation is None:
        return None, None
    if not delegation.admits(capability=capability, presenter=run.spec.capability):
        message = f"the delegation does not let {run.spec.capability} commission {capability}"
        return None, _refused(message, Reason.NOT_DELEGATED)
    if not delegation.valid_at(run.clock_ms):
        return None, _refused("the delegation expired", Reason.DELEGATION_EXPIRED)
    return delegation, None


def _refused(message: str, reason: Reason) -> tuple[Outcome, Reason]:
    return Outcome.failure("DelegationRefused", message[:500]), reason


def claims(_run: Run, signal: Signal) -> bool:
    """Whether ``signal`` is a child's result or its run id (the registry routes it here;
    every other signal is the signal family's)."""
    return signal.name.startswith((CHILD_SIGNAL, STARTED_SIGNAL))


def on_signal(run: Run, signal: Signal) -> Resolution | Rejected:
    """A child's result on the inbox (``claims``): it goes to its branch, or is buffered
    until the branch exists again (after a restore). A child's run id (``STARTED_SIGNAL``)
    is kept (``CHILDREN``) — and, the run cancelling, the child is cancelled now."""
    if signal.name.startswith(STARTED_SIGNAL):
        return _on_started(run, signal)
    for call_seq, held in run.branches.items():
        if held.signal == signal.name and held.outcome is None and call_seq == min(run.branches):
            # Next in ready order: applied now. A later branch's result is buffered instead
            # (below) — in the snapshot, not in memory: the inbox offset moves on with it.
            outcome, attrs = _outcome(run, signal)
            return on_outcome(run, call_seq, outcome, attrs)
    if any(s.name == signal.name for s in run.pending):
        return Rejected(f"child result {signal.name!r} already buffered")
    run.pending.append(signal)
    run.rec.seal(JournalKind.SIGNAL_RECEIVED, attrs={"signal": signal.name, "buffered": "true"})
    return SUSPEND


def _on_started(run: Run, signal: Signal) -> Resolution | Rejected:
    key = signal.name[len(STARTED_SIGNAL) :]
    try:
        child = str(json.loads(signal.payload_json)["child"])
    except (ValueError, KeyError, TypeError):
        return Rejected("a child's start names its run id ({child})", "malformed")
    known = dict(CHILDREN.of(run))
    if known.get(key) == child:
        return SUSPEND  # told again (a redelivery): nothing changes
    known[key] = child
    CHILDREN.put(run, tuple(sorted(known.items())))
    request = CANCEL.of(run)
    if request is not None and key in _open(run):
        run.rec.out.commands.append(_cancel(run, request, key, child))
    return SUSPEND


def _open(run: Run) -> set[str]:
    """The keys of the run's open commissions whose close policy cancels the child."""
    return {
        held.signal[len(CHILD_SIGNAL) :]
        for held in run.branches.values()
        if held.signal is not None
        and held.outcome is None
        and held.slot.effect.request.get("on_parent_cancel") != WAIT
    }


def _cancel(run: Run, request: CancelRequest, key: str, child: str) -> Signal:
    reason = CASCADE_REASON.format(parent=run.session_id, reason=request.reason)
    return Signal(
        session_id=child,
        name=CANCEL_SIGNAL,
        payload_json=canonical_json({"reason": reason[:500]}),
        sent_ms=run.rec.now,
        # One per (parent, child): a redelivered or repeated cascade is accepted once.
        signal_id=f"{CASCADE_ID}{run.session_id}:{key}",
        sent_by=request.by,  # the principal who cancelled the parent, as authenticated
    )


def cascade(run: Run) -> dict[str, str]:
    """The run accepted a cancel (its ``CANCEL`` part is set): a cancel to each open child it
    knows the run id of (close policy ``cancel``) → attrs naming them (``cascaded_to``)."""
    request = CANCEL.of(run)
    if request is None:  # pragma: no cover - called once the cancel is accepted
        return {}
    known = dict(CHILDREN.of(run))
    reached = sorted(k for k in _open(run) if k in known)
    for key in reached:
        run.rec.out.commands.append(_cancel(run, request, key, known[key]))
    return {"cascaded_to": ",".join(known[k] for k in reached)} if reached else {}


def child_started(run: Run) -> Signal | None:
    """The signal a commissioned child (or a successor of one) sends its parent in its
    first step: its run id, so the parent's cancel can reach it (None for other runs)."""
    parent = parent_of(run.admission_key)
    if parent is None:
        return None
    return Signal(
        session_id=parent[0],
        name=STARTED_SIGNAL + child_root(run.admission_key),
        payload_json=canonical_json({"child": run.session_id}),
        sent_ms=run.rec.now,
        signal_id=f"started:{run.session_id}",
    )


def _outcome(run: Run, signal: Signal) -> tuple[Outcome, dict[str, str]]:
    """A child's result signal read as its branch's outcome, journaled with the child's
    session (``child_run``) — and, for a child this run allotted a budget, what it spent
    (``child_spent``), settled in the run's account now: the outcome is recorded in this
    very step, so the account and the journal move together."""
    body: Any = json.loads(signal.payload_json)
    child = str(body.get("child", ""))
    attrs = {"child_run": child}
    spent = _spent(body.get("spent"))
    key = signal.name[len(CHILD_SIGNAL) :]
    ledger = LEDGER.of(run)
    charge = charge_of(ledger, key)
    if charge is not None and charge.spent is None and spent is not None:
        LEDGER.put(run, settle(ledger, key, spent))
        attrs["child_spent"] = canonical_json(spent.to_json())
    if body.get("ok"):
        return Outcome.success(body.get("value")), attrs
    error = body.get("error") or {}
    message = f"child {child} {error.get('type', 'failed')}: {error.get('message', '')}"
    return Outcome.failure("ChildFailed", message[:500]), attrs


def _spent(data: Any) -> Spent | None:
    """What a child's result says it spent; None when it says nothing readable — the child
    stays charged its whole allotment (never less than it may have spent)."""
    try:
        return None if data is None else Spent.from_json(data)
    except TerminalError:
        return None


def child_reply(run: Run) -> Signal | None:
    """The signal a child sends its parent in the step that ends it (None for other runs).

    A child that continues as new does not answer: its successor (same delegation, key
    ``<key>/next``) answers under the key the parent waits on, when the last generation ends."""
    parent = parent_of(run.admission_key)
    if parent is None or run.status not in _ENDED:
        return None
    if any(
        isinstance(c, StartRun) and c.admission_key == f"{run.admission_key}/next"
        for c in run.rec.out.commands
    ):
        return None  # continued as new, in this very step
    body: dict[str, Any] = {"child": run.session_id, "ok": run.status is RunStatus.COMPLETED}
    if allotted(run) is not None:  # what its parent escrowed for it: say what it spent
        body["spent"] = account_of(run).to_json()
    if body["ok"]:
        body["value"] = None if run.output_json is None else json.loads(run.output_json)
    else:
        err = run.error
        body["error"] = {
            "type": str(run.status) if err is None else err.type,
            "message": "" if err is None else err.message,
        }
    return Signal(
        session_id=parent[0],
        name=CHILD_SIGNAL + child_root(run.admission_key),
        payload_json=canonical_json(body),
        sent_ms=run.rec.now,
    )
