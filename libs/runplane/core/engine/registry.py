"""The effect families, in one table: each row is a family's whole contract with the engine.

A row says which handler serves each of its ops on a fresh slot, which inbox events it owns
and which it claims by content from another family's type, how its ops' recorded values
decode for the agent, how a run parked on one of its parks waits again after a restore,
which of its effect families a new era reads back from the side-effect log, which of its
waits a cancel interrupts at once, and its own part of a run's state (``Part``: how the
snapshot carries it, and which older snapshot fields it is read from). Adding a family is its module, its row here and its test
(see "Adding an effect family" in docs/contracts.md).

Every op, every inbox event type, every park and every part has exactly one owner, asserted here at
import. An event of a type another family owns may be *claimed* by content (a panel seat's
TaskDecision, an operator's verdict, a child's result Signal): claims are asked first, then
the owner serves the rest — one routing function per event type, built here.

Family modules import only the engine's kernel (``state``, ``vocab``, ``values``,
``recorder``, ``step``, ``replay``, ``decode``, ``table``, ``asking``, ``tasks``, ``tools``,
``sinkgate``, ``eras``, ``ends``, ``bounds``, ``cancel``, ``timeouts``, ``operated``,
``patches``), never each other nor this module (``tests/unit/test_families.py``). What the
kernel must know of the rows it reads from ``table``, installed from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from runplane.core.effect import Op
from runplane.core.engine import (
    approvals,
    cases,
    closing,
    commission,
    doubt,
    fanout,
    local,
    panels,
    release,
    signals,
    sinkgate,
    successor,
    table,
    timeouts,
    timers,
    tools,
    updates,
)
from runplane.core.engine.decode import identity
from runplane.core.engine.operated import CANCEL
from runplane.core.engine.state import Run
from runplane.core.engine.table import Decoder, Part
from runplane.core.engine.vocab import Rejected, Resolution, Slot, Wait, WaitKind
from runplane.wire import CaseReply, ParkKind, Signal, TaskDecision, Wake

__all__ = [
    "FAMILIES",
    "HANDLERS",
    "INBOX",
    "Claim",
    "Family",
    "Handler",
    "InboxHandler",
    "part_table",
]

Handler = Callable[[Run, Slot], Resolution]
# Takes the run and one inbox event of the type it is registered for.
InboxHandler = Callable[[Run, Any], Resolution | Rejected]


@dataclass(frozen=True)
class Claim:
    """Events of another family's type that this family serves, told apart by content."""

    claims: Callable[[Run, Any], bool]
    handler: InboxHandler


@dataclass(frozen=True)
class Family:
    """One effect family's contract. ``events``: inbox event types it owns; ``claims``: events
    of a type another row owns that it serves when ``Claim.claims`` says so; ``decode``: the
    agent's value of each op's record (absent: the value as recorded); ``rewait``: its parks,
    and what a run rebuilt while parked on one waits for; ``cross_era``: the effect families
    (journal ``family`` names) a new era serves from the side-effect log at a fresh slot;
    ``logged``: those whose log the family serves itself, in its own order; ``interruptible``:
    its waits a cancel interrupts at once (any other first reaches its disposition);
    ``bounded``: its waits a ``timeout`` of their own bounds (the timer row times them out);
    ``parts``: its own parts of a run's state, carried by the snapshot (``table.Part``);
    ``on_cancel``: what it does when its run accepts a cancel (→ attrs for CANCEL_REQUESTED);
    ``on_due``: its waits for an instant (``Run.wait_until``) and what each does when the
    instant comes (the timer row delivers the Wake)."""

    name: str
    ops: Mapping[Op, Handler]
    events: Mapping[type, InboxHandler] = field(default_factory=dict)
    claims: Mapping[type, Claim] = field(default_factory=dict)
    decode: Mapping[Op, Decoder] = field(default_factory=dict)
    rewait: Mapping[ParkKind, WaitKind] = field(default_factory=dict)
    cross_era: frozenset[str] = frozenset()
    logged: frozenset[str] = frozenset()
    interruptible: frozenset[WaitKind] = frozenset()
    bounded: frozenset[WaitKind] = frozenset()
    parts: tuple[Part[Any], ...] = ()
    on_cancel: Callable[[Run], Mapping[str, str]] | None = None
    on_due: Mapping[WaitKind, Callable[[Run, Wait], Resolution]] = field(default_factory=dict)


def _or_else(first: Callable[[Run, Slot], Resolution | None], then: Handler) -> Handler:
    """``first``'s answer, or ``then``'s when it has none (a release a person decides, a
    branch that is no commission)."""

    def handler(run: Run, slot: Slot) -> Resolution:
        answer = first(run, slot)
        return then(run, slot) if answer is None else answer

    return handler


FAMILIES: Final = (
    # Generations and tools, performed by the executor; calls in doubt recover in ``doubt``,
    # and an operator's verdict on one is claimed from the TaskDecisions.
    Family(
        "live",
        {Op.LIVE: tools.live},
        claims={TaskDecision: Claim(doubt.claims, doubt.on_decision)},
        # A call in doubt waits out its deadline before its probe asks.
        on_due={WaitKind.DOUBT: doubt.deadline_passed},
        decode={Op.LIVE: identity},
        cross_era=frozenset({"tool"}),
    ),
    Family(
        "approval",
        {Op.APPROVAL: approvals.approval},
        {TaskDecision: approvals.on_decision},
        decode={Op.APPROVAL: approvals.decode},
        rewait={ParkKind.TASK: WaitKind.APPROVAL},
        cross_era=frozenset({"approval"}),
        interruptible=frozenset({WaitKind.APPROVAL}),
        bounded=frozenset({WaitKind.APPROVAL}),  # a panel's wait too
    ),
    # Case commands, deadlines, and closing the case (refused while an obligation is open).
    Family(
        "case",
        {
            Op.CASE_GET: cases.case_command,
            Op.CASE_PUT: cases.case_command,
            Op.DEADLINE: cases.deadline,
            Op.DEADLINE_MEET: cases.deadline,
            Op.DEADLINE_CANCEL: cases.deadline,
            Op.CASE_CLOSE: closing.close_case,
        },
        {CaseReply: cases.on_case_reply},
        decode=cases.DECODE,
        rewait={ParkKind.CASE_REPLY: WaitKind.CASE},
        cross_era=frozenset({"case", "deadline"}),
    ),
    Family(
        "local",
        {Op.OBSERVE: local.observe, Op.CHECKPOINT: local.checkpoint},
        decode={Op.CHECKPOINT: local.decode_checkpoint},
    ),
    # Operating a run: signals (a cancel is one, ``engine.cancel``; its request is this row's
    # part) and durable timers (a Wake also carries a quarantine request, read by the runtime;
    # the timer a wait of any family arms is this row's part).
    # An update is a signal that answers (``engine.updates``): waited for like one, told apart
    # by its reserved name, its answer a slot of its own.
    Family(
        "signal",
        {Op.SIGNAL: signals.wait_signal, Op.UPDATE: signals.wait_signal, Op.ANSWER: updates.answer},
        {Signal: signals.on_signal},
        claims={Signal: Claim(updates.claims, updates.on_update)},
        rewait={ParkKind.SIGNAL: WaitKind.SIGNAL},
        cross_era=frozenset({"signal", "update", "answer"}),
        interruptible=frozenset({WaitKind.SIGNAL}),
        bounded=frozenset({WaitKind.SIGNAL}),
        parts=(signals.SIGNAL_IDS, CANCEL, updates.UPDATES),
    ),
    Family(
        "timer",
        {Op.SLEEP: timers.sleep},
        {Wake: timers.on_wake},
        decode={Op.SLEEP: timers.decode},
        rewait={ParkKind.WAKE: WaitKind.TIMER},
        cross_era=frozenset({"timer"}),
        interruptible=frozenset({WaitKind.TIMER}),
        parts=(timeouts.TIMER,),
    ),
    Family(
        "successor",
        {Op.CONTINUE_AS_NEW: successor.continue_as_new},
        parts=(sinkgate.INPUT_LABEL,),
    ),
    # Panels of people: a task per seat; the TaskDecisions of its seats are claimed.
    Family(
        "panel",
        {Op.PANEL: panels.panel},
        claims={TaskDecision: Claim(panels.claims, panels.on_decision)},
        decode={Op.PANEL: panels.decode},
    ),
    # ctx.release: granted or refused by policy, else an approval task (its decision comes
    # as the approval family's TaskDecision).
    Family(
        "release",
        {Op.RELEASE: _or_else(release.by_policy, approvals.approval)},
        decode={Op.RELEASE: release.decode},
        cross_era=frozenset({"release"}),
    ),
    # Fan-out branches and their join; a commission is a branch whose child's result arrives
    # as a Signal, claimed by name from the signal family's.
    Family(
        "fanout",
        {Op.BRANCH: _or_else(commission.branch, fanout.branch), Op.JOIN: fanout.join},
        claims={Signal: Claim(commission.claims, commission.on_signal)},
        parts=(commission.CHILDREN, sinkgate.LEDGER),
        on_cancel=commission.cascade,
        logged=frozenset({"commission"}),
    ),
)


def _one_owner(kind: str, owned: Iterable[tuple[str, Any]]) -> dict[Any, str]:
    owners: dict[Any, str] = {}
    for family, key in owned:
        if key in owners:
            raise AssertionError(f"{kind} {key!r} has two owners: {owners[key]} and {family}")
        owners[key] = family
    return owners


def _route(owner: InboxHandler, claims: tuple[Claim, ...]) -> InboxHandler:
    """One event type's handler: a family that claims the event serves it, else its owner."""
    if not claims:
        return owner

    def routed(run: Run, event: Any) -> Resolution | Rejected:
        for claim in claims:
            if claim.claims(run, event):
                return claim.handler(run, event)
        return owner(run, event)

    return routed


def part_table(families: Iterable[Family]) -> dict[str, Part[Any]]:
    """Every row's parts by name (a name has one owner)."""
    rows = tuple(families)
    _one_owner("part", ((f.name, p.name) for f in rows for p in f.parts))
    return {p.name: p for f in rows for p in f.parts}


def _inbox(families: tuple[Family, ...]) -> dict[type, InboxHandler]:
    owners = {t: h for f in families for t, h in f.events.items()}
    inbox: dict[type, InboxHandler] = {}
    for event_type, owner in owners.items():
        claims = tuple(f.claims[event_type] for f in families if event_type in f.claims)
        inbox[event_type] = _route(owner, claims)
    unowned = {t for f in families for t in f.claims} - set(owners)
    if unowned:
        raise AssertionError(f"claimed event types nobody owns: {sorted(map(str, unowned))}")
    return inbox


_one_owner("op", ((f.name, op) for f in FAMILIES for op in f.ops))
_one_owner("event type", ((f.name, t) for f in FAMILIES for t in f.events))
_one_owner("park", ((f.name, k) for f in FAMILIES for k in f.rewait))
_one_owner("decoded op", ((f.name, op) for f in FAMILIES for op in f.decode))
for _f in FAMILIES:
    if not set(_f.decode) <= set(_f.ops):
        raise AssertionError(f"family {_f.name} decodes ops it does not serve")

HANDLERS: Final[Mapping[Op, Handler]] = {op: h for f in FAMILIES for op, h in f.ops.items()}
INBOX: Final[Mapping[type, InboxHandler]] = _inbox(FAMILIES)

table.install(
    decode={op: d for f in FAMILIES for op, d in f.decode.items()},
    rewait={k: w for f in FAMILIES for k, w in f.rewait.items()},
    cross_era={name for f in FAMILIES for name in f.cross_era},
    logged={name for f in FAMILIES for name in f.cross_era | f.logged},
    interruptible={w for f in FAMILIES for w in f.interruptible},
    bounded={w for f in FAMILIES for w in f.bounded},
    parts=part_table(FAMILIES),
    on_cancel=[f.on_cancel for f in FAMILIES if f.on_cancel is not None],
    on_due={w: h for f in FAMILIES for w, h in f.on_due.items()},
)
