"""Queues, the pure part: which admitted runs of a limited capability start, and when. Pure.

A *queue* holds the runs of one capability that its limits (``QueueLimits``: runs running at
once, at most so many of one tenant among them, runs started per second) keep from starting
at once. Its state (``QueueState``) is a value: the runs running, the runs waiting — each with
its priority and its arrival number — the token bucket of the rate limit, and the run ids
that ended lately. Three inputs change it, each a function returning a ``QueueDecision`` (the
new state and the runs to start now, in order):

- ``arrive``: an admitted run reaches the queue; it starts now if every limit allows, else waits;
- ``end``: a run ends; its slot is released and the waiting runs that now fit start
  (a run that ends while still waiting — cancelled before it started — is withdrawn);
- ``tick``: time passes; the rate limit's bucket refills and the waiting runs it allows start.

Waiting runs start in priority order (higher first), then arrival order; a run whose tenant
is at its ``per_tenant`` limit is passed over (it does not hold up other tenants' runs) and
keeps its place. Every input is idempotent by run id, so redelivery cannot start a run twice:
an arrival of a run the queue holds, or ended lately (``QueueState.ended``, the last
``ENDED_MEMORY`` ids), and an end of a run it does not hold, change nothing. There is no clock:
every time is an argument, and a time earlier than the bucket's last refill (a new owner whose
clock is behind) refills nothing, so the bucket never gains tokens twice for one interval.

The shell (``services/queues/``) keeps one ``QueueState`` per capability as one row of a
compacted topic and is its single writer (docs/decisions.md 33).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from runplane.errors import ConfigError

__all__ = [
    "ENDED_MEMORY",
    "QueueDecision",
    "QueueEntry",
    "QueueLimits",
    "QueueState",
    "arrive",
    "end",
    "tick",
]

# How many ended run ids a queue remembers, so a redelivered arrival of a run that already
# ran is not queued again. Arrivals come from admission's transactions (one per admitted run),
# so this guards against redelivery, which is near in time, not against the whole history.
ENDED_MEMORY = 1024

_MILLI = 1000  # one token in milli-tokens: integer arithmetic, exact at any rate


@dataclass(frozen=True)
class QueueLimits:
    """What one queue allows; None: no such limit.

    ``concurrency``: runs of the capability running at once; ``per_tenant``: of those, at
    most this many of one tenant; ``rate_per_s``: runs started per second, with bursts of up
    to ``burst`` (a token bucket, full at first)."""

    concurrency: int | None = None
    per_tenant: int | None = None
    rate_per_s: int | None = None
    burst: int = 1

    def __post_init__(self) -> None:
        for name in ("concurrency", "per_tenant", "rate_per_s"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ConfigError(f"queue: {name} must be a whole number >= 1, got {value!r}")
        if isinstance(self.burst, bool) or self.burst < 1:
            raise ConfigError(f"queue: burst must be a whole number >= 1, got {self.burst!r}")

    @property
    def limits_anything(self) -> bool:
        return any(v is not None for v in (self.concurrency, self.per_tenant, self.rate_per_s))


@dataclass(frozen=True)
class QueueEntry:
    """One run in a queue. ``arrival``: its number in arrival order, given by the queue."""

    run_id: str
    tenant: str
    priority: int = 0
    arrival: int = 0

    @property
    def order(self) -> tuple[int, int]:
        """Where it stands among the waiting: higher priority first, then earlier arrival."""
        return (-self.priority, self.arrival)


@dataclass(frozen=True)
class QueueState:
    """A queue, as one value. ``waiting`` is kept in start order (``QueueEntry.order``).

    ``tokens_milli``: the rate limit's bucket in milli-tokens, None while full and untouched;
    ``refilled_ms``: the latest time it was refilled to."""

    running: tuple[QueueEntry, ...] = ()
    waiting: tuple[QueueEntry, ...] = ()
    next_arrival: int = 0
    tokens_milli: int | None = None
    refilled_ms: int = 0
    ended: tuple[str, ...] = ()

    def holds(self, run_id: str) -> bool:
        return any(e.run_id == run_id for e in (*self.running, *self.waiting))

    def running_of(self, tenant: str) -> int:
        return sum(1 for e in self.running if e.tenant == tenant)


@dataclass(frozen=True)
class QueueDecision:
    """The new state and the runs to start now (in order). ``outcome``: what the input did —
    ``started``, ``queued``, ``released``, ``withdrawn``, ``ticked`` or ``duplicate``."""

    state: QueueState
    start: tuple[QueueEntry, ...]
    outcome: str


def arrive(
    state: QueueState,
    limits: QueueLimits,
    run_id: str,
    tenant: str,
    priority: int,
    now_ms: int,
) -> QueueDecision:
    """An admitted run reaches the queue: it starts now if the limits allow, else it waits."""
    if state.holds(run_id) or run_id in state.ended:
        return QueueDecision(state, (), "duplicate")
    entry = QueueEntry(run_id, tenant, priority, state.next_arrival)
    waiting = tuple(sorted((*state.waiting, entry), key=lambda e: e.order))
    queued = replace(state, waiting=waiting, next_arrival=state.next_arrival + 1)
    after, started = _fill(queued, limits, now_ms)
    return QueueDecision(after, started, "started" if entry in started else "queued")


def end(
    state: QueueState, limits: QueueLimits, run_id: str, now_ms: int, memory: int = ENDED_MEMORY
) -> QueueDecision:
    """A run ended: its slot is released and the waiting runs that now fit start. A run still
    waiting is withdrawn; a run the queue does not hold changes nothing (a duplicate end)."""
    if not state.holds(run_id):
        return QueueDecision(state, (), "duplicate")
    outcome = "released" if any(e.run_id == run_id for e in state.running) else "withdrawn"
    left = replace(
        state,
        running=tuple(e for e in state.running if e.run_id != run_id),
        waiting=tuple(e for e in state.waiting if e.run_id != run_id),
        ended=_remember(state.ended, run_id, memory),
    )
    after, started = _fill(left, limits, now_ms)
    return QueueDecision(after, started, outcome)


def tick(state: QueueState, limits: QueueLimits, now_ms: int) -> QueueDecision:
    """Time passed: the rate limit's bucket refills and the waiting runs it allows start.
    Without waiting runs nothing changes (no row is rewritten for an idle queue)."""
    if not state.waiting:
        return QueueDecision(state, (), "ticked")
    after, started = _fill(state, limits, now_ms)
    return QueueDecision(after if started else state, started, "ticked")


def _remember(ended: tuple[str, ...], run_id: str, memory: int) -> tuple[str, ...]:
    return (*ended, run_id)[-memory:] if memory > 0 else ()


def _refill(state: QueueState, limits: QueueLimits, now_ms: int) -> tuple[int | None, int]:
    """(tokens, refilled_ms) at ``now_ms``; the bucket holds at most ``burst`` tokens."""
    if limits.rate_per_s is None:
        return state.tokens_milli, max(state.refilled_ms, now_ms)
    full = limits.burst * _MILLI
    tokens = full if state.tokens_milli is None else min(state.tokens_milli, full)
    gained = max(0, now_ms - state.refilled_ms) * limits.rate_per_s  # milli-tokens per ms
    return min(full, tokens + gained), max(state.refilled_ms, now_ms)


def _fill(
    state: QueueState, limits: QueueLimits, now_ms: int
) -> tuple[QueueState, tuple[QueueEntry, ...]]:
    """Start the waiting runs the limits allow, in start order, passing over a run whose
    tenant is at its limit; stop when the queue is full or the bucket empty."""
    tokens, refilled = _refill(state, limits, now_ms)
    per_tenant = Counter(e.tenant for e in state.running)
    running = len(state.running)
    started: list[QueueEntry] = []
    for entry in state.waiting:
        if limits.concurrency is not None and running >= limits.concurrency:
            break
        if tokens is not None and limits.rate_per_s is not None and tokens < _MILLI:
            break
        if limits.per_tenant is not None and per_tenant[entry.tenant] >= limits.per_tenant:
            continue
        started.append(entry)
        running += 1
        per_tenant[entry.tenant] += 1
        if tokens is not None and limits.rate_per_s is not None:
            tokens -= _MILLI
    gone = {e.run_id for e in started}
    after = replace(
        state,
        running=(*state.running, *started),
        waiting=tuple(e for e in state.waiting if e.run_id not in gone),
        tokens_milli=tokens,
        refilled_ms=refilled,
    )
    return after, tuple(started)
