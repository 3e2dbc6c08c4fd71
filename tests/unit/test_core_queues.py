"""The queue's pure decisions (runplane.core.queues): limits hold, every run starts exactly
once, in priority then arrival order, over random interleavings with redelivery."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.core.queues import (
    QueueDecision,
    QueueEntry,
    QueueLimits,
    QueueState,
    arrive,
    end,
    tick,
)
from runplane.errors import ConfigError

TENANTS = ("acme", "globex", "initech")


def test_a_run_starts_at_once_while_there_is_room_and_waits_when_full() -> None:
    limits = QueueLimits(concurrency=1)
    first = arrive(QueueState(), limits, "r1", "acme", 0, 0)
    assert first.outcome == "started" and [e.run_id for e in first.start] == ["r1"]
    second = arrive(first.state, limits, "r2", "acme", 0, 0)
    assert second.outcome == "queued" and second.start == ()
    released = end(second.state, limits, "r1", 10)
    assert released.outcome == "released" and [e.run_id for e in released.start] == ["r2"]


def test_higher_priority_starts_first_then_arrival_order() -> None:
    limits = QueueLimits(concurrency=1)
    state = arrive(QueueState(), limits, "busy", "acme", 0, 0).state
    for run, priority in (("low1", 0), ("high", 5), ("low2", 0), ("mid", 1)):
        state = arrive(state, limits, run, "acme", priority, 0).state
    order = []
    running = "busy"
    while True:
        d = end(state, limits, running, 0)
        state = d.state
        if not d.start:
            break
        running = d.start[0].run_id
        order.append(running)
    assert order == ["high", "mid", "low1", "low2"]


def test_a_tenant_at_its_limit_does_not_hold_up_another_tenant() -> None:
    limits = QueueLimits(concurrency=3, per_tenant=1)
    state = arrive(QueueState(), limits, "a1", "acme", 0, 0).state
    waits = arrive(state, limits, "a2", "acme", 9, 0)
    assert waits.outcome == "queued"
    other = arrive(waits.state, limits, "g1", "globex", 0, 0)
    assert other.outcome == "started"
    assert [e.run_id for e in end(other.state, limits, "a1", 0).start] == ["a2"]


def test_the_rate_limit_refills_with_time_passed_as_an_argument() -> None:
    limits = QueueLimits(rate_per_s=2, burst=2)
    state = QueueState()
    outcomes: list[str] = []
    for i in range(4):
        d = arrive(state, limits, f"r{i}", "acme", 0, 1_000)
        state, outcomes = d.state, [*outcomes, d.outcome]
    assert outcomes == ["started", "started", "queued", "queued"]
    assert tick(state, limits, 1_499).start == ()  # 0.998 of a token
    half = tick(state, limits, 1_500)
    assert [e.run_id for e in half.start] == ["r2"]
    # A clock behind the last refill (a new owner) refills nothing.
    assert tick(half.state, limits, 0).start == ()
    assert [e.run_id for e in tick(half.state, limits, 2_000).start] == ["r3"]


def test_duplicates_change_nothing() -> None:
    limits = QueueLimits(concurrency=1)
    d = arrive(QueueState(), limits, "r1", "acme", 0, 0)
    again = arrive(d.state, limits, "r1", "acme", 0, 0)
    assert again == QueueDecision(d.state, (), "duplicate")
    ended = end(d.state, limits, "r1", 0)
    assert end(ended.state, limits, "r1", 0) == QueueDecision(ended.state, (), "duplicate")
    # A redelivered arrival of a run that already ran does not queue it again.
    assert arrive(ended.state, limits, "r1", "acme", 0, 0).outcome == "duplicate"


def test_a_run_that_ends_while_waiting_is_withdrawn() -> None:
    limits = QueueLimits(concurrency=1)
    state = arrive(QueueState(), limits, "r1", "acme", 0, 0).state
    state = arrive(state, limits, "r2", "acme", 0, 0).state
    withdrawn = end(state, limits, "r2", 0)
    assert withdrawn.outcome == "withdrawn" and withdrawn.start == ()
    assert end(withdrawn.state, limits, "r1", 0).start == ()


@pytest.mark.parametrize(
    "bad", [{"concurrency": 0}, {"per_tenant": -1}, {"rate_per_s": 0}, {"burst": 0}]
)
def test_a_limit_below_one_is_a_named_configuration_error(bad: dict[str, int]) -> None:
    with pytest.raises(ConfigError, match="queue:"):
        QueueLimits(**bad)


# -- properties over random interleavings --------------------------------------------------


@dataclass
class Model:
    """What the test saw: every decision's starts, checked against the limits as it goes."""

    limits: QueueLimits
    state: QueueState = field(default_factory=QueueState)
    arrived: set[str] = field(default_factory=set)
    withdrawn: set[str] = field(default_factory=set)
    starts: Counter[str] = field(default_factory=Counter)
    now: int = 0

    def apply(self, d: QueueDecision, before: QueueState) -> None:
        check_order(d, self.limits)
        check_conserving(d.state, self.limits)
        self.starts.update(e.run_id for e in d.start)
        if d.outcome == "withdrawn":
            self.withdrawn.update(e.run_id for e in before.waiting if not d.state.holds(e.run_id))
        self.state = d.state
        running = self.state.running
        if self.limits.concurrency is not None:
            assert len(running) <= self.limits.concurrency
        if self.limits.per_tenant is not None:
            assert max(Counter(e.tenant for e in running).values(), default=0) <= (
                self.limits.per_tenant
            )
        ids = [e.run_id for e in (*running, *self.state.waiting)]
        assert len(ids) == len(set(ids))  # never both running and waiting, never twice


def check_order(d: QueueDecision, limits: QueueLimits) -> None:
    """No run left waiting, whose tenant still has room, stands before a run that started."""
    if not d.start:
        return
    latest = max(e.order for e in d.start)
    for w in d.state.waiting:
        tenant_full = limits.per_tenant is not None and (
            d.state.running_of(w.tenant) >= limits.per_tenant
        )
        assert tenant_full or w.order > latest, (w, d.start)


def check_conserving(state: QueueState, limits: QueueLimits) -> None:
    """No run waits that the limits would let start: a full queue, an empty bucket or its
    tenant at its limit holds back every waiting run."""
    if limits.concurrency is not None and len(state.running) >= limits.concurrency:
        return
    # (a bucket never touched is full: no run waits before the first fill)
    tokens = state.tokens_milli
    if limits.rate_per_s is not None and tokens is not None and tokens < 1000:
        return
    for w in state.waiting:
        assert limits.per_tenant is not None and state.running_of(w.tenant) >= limits.per_tenant, w


limit_sets = st.builds(
    QueueLimits,
    concurrency=st.one_of(st.none(), st.integers(1, 5)),
    per_tenant=st.one_of(st.none(), st.integers(1, 3)),
    rate_per_s=st.one_of(st.none(), st.integers(1, 20)),
    burst=st.integers(1, 4),
)
ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("arrive"), st.integers(0, 40), st.sampled_from(TENANTS), st.integers(0, 3)
        ),
        st.tuples(st.just("end_running"), st.integers(0, 10)),
        st.tuples(st.just("end_any"), st.integers(0, 40)),
        st.tuples(st.just("tick"), st.integers(0, 700)),
    ),
    max_size=120,
)


def step(m: Model, op: tuple[object, ...]) -> None:
    before = m.state
    match op:
        case ("arrive", n, tenant, priority):
            run = f"r{n}"
            m.arrived.add(run)
            m.apply(arrive(before, m.limits, run, str(tenant), int(priority), m.now), before)  # type: ignore[call-overload]
        case ("end_running", i):
            if before.running:
                run = before.running[int(i) % len(before.running)].run_id  # type: ignore[call-overload]
                m.apply(end(before, m.limits, run, m.now), before)
        case ("end_any", n):  # an end of a waiting run, an unknown one, or a duplicate
            m.apply(end(before, m.limits, f"r{n}", m.now), before)
        case ("tick", dt):
            m.now += int(dt)  # type: ignore[call-overload]
            m.apply(tick(before, m.limits, m.now), before)


@settings(max_examples=300, deadline=None)
@given(limits=limit_sets, script=ops)
def test_limits_hold_and_every_run_starts_exactly_once_in_order(
    limits: QueueLimits, script: list[tuple[object, ...]]
) -> None:
    m = Model(limits)
    for op in script:
        step(m, op)
    # Drain: end whatever runs, let time pass; every arrived run that was not withdrawn starts.
    for _ in range(10_000):
        if not m.state.running and not m.state.waiting:
            break
        before = m.state
        if before.running:
            m.apply(end(before, limits, before.running[0].run_id, m.now), before)
        else:
            m.now += 1_000
            m.apply(tick(before, limits, m.now), before)
    assert not m.state.waiting and not m.state.running
    assert all(count == 1 for count in m.starts.values()), m.starts
    assert set(m.starts) == m.arrived - m.withdrawn


@settings(max_examples=200, deadline=None)
@given(limits=limit_sets, script=ops)
def test_redelivering_every_input_changes_nothing(
    limits: QueueLimits, script: list[tuple[object, ...]]
) -> None:
    """Each input handled a second time (a redelivery) right after the first is a no-op."""
    m = Model(limits)
    for op in script:
        step(m, op)
        if op[0] == "arrive":
            last = m.state
            n, tenant, priority = op[1], op[2], op[3]
            again = arrive(last, limits, f"r{n}", str(tenant), int(priority), m.now)  # type: ignore[call-overload]
            assert again == QueueDecision(last, (), "duplicate")
        elif op[0] in ("end_any", "end_running") and m.state.ended:
            last = m.state
            assert end(last, limits, last.ended[-1], m.now) == QueueDecision(last, (), "duplicate")


def test_an_entry_orders_by_priority_then_arrival() -> None:
    assert QueueEntry("a", "t", 2, 9).order < QueueEntry("b", "t", 1, 0).order
    assert QueueEntry("a", "t", 1, 0).order < QueueEntry("b", "t", 1, 1).order
