"""A run's steps on its own time axis, folded from its journal records. Pure.

The run page draws a waterfall from this (``services.journal.ui_waterfall``): one bar per
effect call, from its EFFECT_ANNOUNCED to the record that carries its result (EFFECT_RECORDED,
CASE_WRITTEN, SIGNAL_RECEIVED, …), and one per wait for a person, from the first TASK_OPENED at
a slot to the TASK_DECIDED that settles it — a seat's vote or an escalation keeps the wait open,
the slot's result (a record with a body digest) or an operator's verdict closes it. A run
parked on something else (a signal, a version nobody deploys, a task opened in an earlier era)
is a bar of its own until what it waited for arrives. A result with no announce before it (a
plan, a tool list, a call the sink gate refused, a fan-out's join) is an instant: a bar of no
length at its stamp.

Times are the records' ``stamp_ms`` (the producing host's clock), offset from the first record;
a later record stamped earlier (another host's skew) never makes a negative duration. The axis
ends at the run's end record — a RUN_ERASED days later is not a step — or, for a run still
going, at ``now_ms``, where what is still open (a call performing, a person not yet answering)
ends as OPEN. What the run left open when it ended is UNFINISHED.

Whether a call failed is in its body (``ResultEntry.ok``), not in the body-free record:
:func:`failed_slots` reads it from the bodies the caller holds, and :func:`record_failed`
adds what the chain says on its own (the sink gate's ``gate=refused``, an operator's
``verdict=abandoned``), so an erased body still leaves those red.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from runplane.wire import JournalKind, JournalRecord, ResultEntry

__all__ = [
    "Bar",
    "BarKind",
    "BarState",
    "Waterfall",
    "failed_slots",
    "record_failed",
    "waterfall",
]

Slot = tuple[int, int]  # (era, call_seq), as the bodies are keyed

_ENDS = frozenset(
    {
        JournalKind.RUN_COMPLETED,
        JournalKind.RUN_FAILED,
        JournalKind.RUN_QUARANTINED,
        JournalKind.RUN_CANCELLED,
    }
)
# Records that say nothing about whether a run parked without a slot has moved on.
_BESIDE_A_PARK = frozenset(
    {
        JournalKind.DEADLINE_REGISTERED,
        JournalKind.DEADLINE_WARNED,
        JournalKind.DEADLINE_BREACHED,
        JournalKind.CANCEL_REQUESTED,
        JournalKind.CHECKPOINT_REPORTED,
        JournalKind.RUN_ERASED,
        JournalKind.OTHER,
    }
)


class BarKind(StrEnum):
    CALL = "call"  # an effect call performed (or refused) by the platform
    PERSON = "person"  # a wait for a person: an approval, a panel's seats, an operator
    PARKED = "parked"  # a wait for anything else: a signal, a deployed version


class BarState(StrEnum):
    OK = "ok"
    FAILED = "failed"  # its result is an error (or the gate refused it, an operator abandoned it)
    IN_DOUBT = "in_doubt"  # nobody knows whether it took effect
    OPEN = "open"  # still going: the run has not ended
    UNFINISHED = "unfinished"  # the run ended while it was open


@dataclass(frozen=True)
class Bar:
    """One step: ``start_ms`` after the run's first record, lasting ``duration_ms``."""

    kind: BarKind
    state: BarState
    era: int
    call_seq: int | None
    family: str
    name: str
    start_ms: int
    duration_ms: int
    seq: int  # the record that began it (the timeline's ``#seq-N``)
    roles: tuple[str, ...] = ()  # who a PERSON bar waits for
    waits_for: str = ""  # what a PARKED bar waits for: ``signal:<name>``, ``version:<v>``
    outcome: str = ""  # a person's decision (APPROVED, REJECTED, …)
    was_in_doubt: bool = False  # found in doubt, then settled (an operator's verdict)

    @property
    def instant(self) -> bool:
        return self.duration_ms == 0


@dataclass(frozen=True)
class Waterfall:
    """The run's bars in the order they began, on an axis of ``span_ms`` from ``start_stamp``."""

    start_stamp: int
    span_ms: int
    bars: tuple[Bar, ...] = field(default=())
    ended: bool = False


def failed_slots(bodies: Mapping[Slot, ResultEntry | None]) -> frozenset[Slot]:
    """The slots whose recorded result is an error (an erased body says nothing)."""
    return frozenset(key for key, entry in bodies.items() if entry is not None and not entry.ok)


def record_failed(record: JournalRecord, failed: Collection[Slot]) -> bool:
    """Whether ``record`` is the record of a failed result: it carries the body of a slot in
    ``failed``, or says on its own that the call failed (refused by the sink gate, abandoned
    by an operator)."""
    if record.attrs.get("gate") == "refused" or record.attrs.get("verdict") == "abandoned":
        return True
    return (
        record.body_digest is not None
        and record.call_seq is not None
        and (record.era, record.call_seq) in failed
    )


@dataclass
class _Open:
    """A bar being drawn: its start known, its end not yet."""

    bar: Bar
    stamp: int
    task_ids: set[str] = field(default_factory=set)


def _settles_wait(record: JournalRecord) -> bool:
    """A TASK_DECIDED that ends the wait: the slot's result (it carries the body), or a
    decision that is neither one seat's vote nor an escalation (an operator's verdict)."""
    if record.body_digest is not None:
        return True
    return "seat" not in record.attrs and record.attrs.get("outcome") != "ESCALATED"


class _Fold:
    """Records in journal order → bars; ``failed`` the slots whose result is an error."""

    def __init__(self, start: int, failed: Collection[Slot]) -> None:
        self.start = start
        self.failed = failed
        self.open: dict[Slot | None, _Open] = {}  # None: a park with no slot
        self.done: list[Bar] = []
        self.doubted: set[Slot] = set()
        self.last = start

    def stamp(self, record: JournalRecord) -> int:
        # Never before a record already folded: another host's clock skew is no negative bar.
        self.last = max(self.last, record.stamp_ms)
        return self.last

    def begin(self, key: Slot | None, record: JournalRecord, bar: Bar) -> _Open:
        at = self.stamp(record)
        opened = _Open(replace(bar, start_ms=at - self.start), at)
        self.open[key] = opened
        return opened

    def close(self, key: Slot | None, at: int, state: BarState, outcome: str = "") -> None:
        opened = self.open.pop(key)
        bar = replace(opened.bar, state=state, duration_ms=at - opened.stamp, outcome=outcome)
        self.done.append(bar)

    def bar(self, record: JournalRecord, kind: BarKind) -> Bar:
        return Bar(
            kind=kind,
            state=BarState.OPEN,
            era=record.era,
            call_seq=record.call_seq,
            family=record.family or "",
            name=record.name or "",
            start_ms=0,
            duration_ms=0,
            seq=record.seq,
        )

    def feed(self, record: JournalRecord) -> None:
        if record.call_seq is None:
            self.run_level(record)
            return
        key: Slot = (record.era, record.call_seq)
        kind, here = record.kind, self.open.get(key)
        if kind is JournalKind.EFFECT_ANNOUNCED:
            if here is None:  # a retry's announce after a doubt opens the call again
                self.begin(key, record, self.bar(record, BarKind.CALL))
            return
        if kind is JournalKind.EFFECT_IN_DOUBT:
            self.in_doubt(key, record, here)
            return
        if kind is JournalKind.TASK_OPENED:
            self.task_opened(key, record, here)
            return
        if kind is JournalKind.RUN_PARKED:
            self.parked(key, record, here)
            return
        if kind is JournalKind.TASK_DECIDED:
            self.decided(key, record, here)
            return
        if record.body_digest is not None:  # the slot's result: it ends whatever is open
            if here is None:
                self.begin(key, record, self.bar(record, BarKind.CALL))
            self.settle(key, record)
            return
        self.stamp(record)

    def in_doubt(self, key: Slot, record: JournalRecord, here: _Open | None) -> None:
        self.doubted.add(key)
        at = self.stamp(record)
        if here is None or here.bar.kind is not BarKind.CALL:
            self.begin(key, record, self.bar(record, BarKind.CALL))
        self.close(key, at, BarState.IN_DOUBT)

    def decided(self, key: Slot, record: JournalRecord, here: _Open | None) -> None:
        if here is not None and here.bar.kind is not BarKind.CALL and _settles_wait(record):
            self.settle(key, record)
        elif here is None and record.body_digest is not None:  # an early answer
            self.begin(key, record, self.bar(record, BarKind.PERSON))
            self.settle(key, record)
        else:
            self.stamp(record)

    def settle(self, key: Slot, record: JournalRecord) -> None:
        at = self.stamp(record)
        state = BarState.FAILED if record_failed(record, self.failed) else BarState.OK
        opened = self.open[key]
        opened.bar = replace(opened.bar, was_in_doubt=key in self.doubted)
        self.close(key, at, state, record.attrs.get("outcome", ""))

    def task_opened(self, key: Slot, record: JournalRecord, here: _Open | None) -> None:
        role = record.attrs.get("role") or (
            "operator" if record.attrs.get("kind") == "OPERATOR" else ""
        )
        if here is None or here.bar.kind is BarKind.CALL:
            if here is not None:  # the slot now waits for a person: the call ends here
                self.close(key, self.stamp(record), BarState.UNFINISHED)
            here = self.begin(key, record, self.bar(record, BarKind.PERSON))
        elif here.bar.kind is BarKind.PARKED:
            here.bar = replace(here.bar, kind=BarKind.PERSON, waits_for="")
        if role and role not in here.bar.roles:
            here.bar = replace(here.bar, roles=(*here.bar.roles, role))
        if task := record.attrs.get("task_id"):
            here.task_ids.add(task)

    def parked(self, key: Slot, record: JournalRecord, here: _Open | None) -> None:
        on = record.attrs.get("parked_on", "")
        if here is not None:  # already waiting here (its task, a panel, an escalation)
            if on.startswith("task:"):
                here.task_ids.add(on.removeprefix("task:"))
            return
        if on.startswith("task:"):
            opened = self.begin(key, record, self.bar(record, BarKind.PERSON))
            opened.task_ids.add(on.removeprefix("task:"))
        else:
            bar = replace(self.bar(record, BarKind.PARKED), waits_for=on)
            self.begin(key, record, bar)

    def run_level(self, record: JournalRecord) -> None:
        kind = record.kind
        parked = self.open.get(None)
        if parked is not None and kind not in _BESIDE_A_PARK:
            self.close(None, self.stamp(record), BarState.OK)
        if kind is JournalKind.RUN_PARKED:
            on = record.attrs.get("parked_on", "")
            if not any(on == f"task:{t}" for o in self.open.values() for t in o.task_ids):
                bar = replace(
                    self.bar(record, BarKind.PARKED),
                    kind=BarKind.PERSON if on.startswith("task:") else BarKind.PARKED,
                    waits_for=on,
                )
                self.begin(None, record, bar)
            return
        self.stamp(record)

    def finish(self, at: int, state: BarState) -> None:
        for key in list(self.open):
            self.close(key, at, state)


def waterfall(
    records: Iterable[JournalRecord],
    failed: Collection[Slot] = (),
    now_ms: int | None = None,
) -> Waterfall:
    """The run's steps (``records`` in journal order; ``failed`` from :func:`failed_slots`).

    ``now_ms``: where the axis ends for a run not yet ended (None: at its last record)."""
    listed = list(records)
    if not listed:
        return Waterfall(0, 0)
    fold = _Fold(listed[0].stamp_ms, failed)
    ended = next((r for r in listed if r.kind in _ENDS), None)
    for record in listed:
        if record is ended:
            break
        fold.feed(record)
    if ended is not None:
        end = fold.stamp(ended)
        fold.finish(end, BarState.UNFINISHED)
    else:
        end = max(fold.last, fold.last if now_ms is None else now_ms)
        fold.finish(end, BarState.OPEN)
    bars = sorted(fold.done, key=lambda b: (b.start_ms, b.seq))
    return Waterfall(fold.start, end - fold.start, tuple(bars), ended=ended is not None)
