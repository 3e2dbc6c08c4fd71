"""A run no deployed version serves is parked on its version, its inbox records held, and
released — status, timer and wait given back — when its line is deployed again
(runplane.core.engine.stranded). Pure: snapshots of a real run from the Driver."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.core import AgentRegistry, AgentSpec, StepCtx
from runplane.core.engine import (
    held_of,
    hold,
    park_stranded,
    release_stranded,
    strand_unstarted,
    stranded_of,
)
from runplane.core.verify import verify_chain
from runplane.core.versions import inventory
from runplane.journal.summary import summarize
from runplane.testing import Driver
from runplane.wire import (
    AuditRecord,
    DeadLetter,
    JournalKind,
    JournalRecord,
    RunStatus,
    SessionSnapshot,
    StartRun,
    Verdict,
)


def _spec() -> AgentSpec:
    reg = AgentRegistry()

    @reg.agent("flow", version="1", tools=["a"])
    async def flow(ctx: StepCtx, value: Any) -> str:
        await ctx.tool("a", {})
        await ctx.approval("go?", {}, role="ops")
        return "done"

    return reg.spec("flow")


@functools.cache
def _parked_on_approval() -> tuple[SessionSnapshot, tuple[JournalRecord, ...]]:
    driver = Driver(AgentRegistry([_spec()]), tools={"a": lambda a, k: {}})
    run = driver.run("flow", {}, session_id="s-1")
    assert run.status is RunStatus.AWAITING_HUMAN
    return run.snapshot, tuple(run.journal)


def _letter(n: int) -> DeadLetter:
    return DeadLetter(
        source_topic="runplane.runs.inbox",
        partition=0,
        offset=n,
        service="executor",
        reason="held: version_not_deployed",
        key=b"s-1",
        value=bytes([n % 256]),
        at_ms=n,
    )


def _audits(records: list[JournalRecord]) -> list[AuditRecord]:
    return [
        AuditRecord(
            session_id=r.session_id,
            seq=r.seq,
            era=r.era,
            kind=r.kind,
            call_seq=r.call_seq,
            stamp_ms=r.stamp_ms,
            label=r.label,
            attrs=r.attrs,
            hash=r.hash,
            verdict=Verdict.VERIFIED,
            verified_ms=r.stamp_ms,
        )
        for r in records
    ]


def test_a_stranded_run_is_parked_on_its_version_and_released_to_its_wait() -> None:
    snap, journal = _parked_on_approval()
    parked = park_stranded(snap, "1", "version 1 is not deployed", now_ms=snap.updated_ms + 1)
    [record] = parked.records
    assert record.kind is JournalKind.RUN_PARKED and record.seq == snap.next_seq
    assert record.attrs["parked_on"] == "version:1"
    assert record.attrs["waits_for"] == f"task:{snap.parked_on.ref}"  # type: ignore[union-attr]
    assert parked.snapshot.status is RunStatus.PARKED
    assert stranded_of(parked.snapshot) is not None
    assert verify_chain([*journal, record]).ok
    summary = summarize("s-1", _audits([*journal, record]))
    assert (summary.status, summary.parked_on) == (RunStatus.PARKED, "version:1")

    with pytest.raises(ValueError):  # journaled once; what arrives later is only held
        park_stranded(parked.snapshot, "1", "again", now_ms=0)
    held = hold(hold(parked.snapshot, _letter(1)), _letter(2))
    released = release_stranded(held, "1.1", now_ms=snap.updated_ms + 2)
    [again] = released.records
    after = released.snapshot
    assert (after.status, after.wake_at_ms, after.stranded_json, after.held_json) == (
        RunStatus.AWAITING_HUMAN,
        None,
        None,
        None,
    )
    assert (again.kind, again.attrs["parked_on"], again.attrs["version"]) == (
        JournalKind.RUN_PARKED,
        record.attrs["waits_for"],
        "1.1",
    )
    assert verify_chain([*journal, record, again]).ok
    summary = summarize("s-1", _audits([*journal, record, again]))
    assert (summary.status, summary.parked_on) == (
        RunStatus.AWAITING_HUMAN,
        "task:" + again.attrs["task_id"],
    )


def test_holding_needs_a_stranded_run() -> None:
    snap, _ = _parked_on_approval()
    with pytest.raises(ValueError):
        hold(snap, _letter(0))
    with pytest.raises(ValueError):
        release_stranded(snap, "1", now_ms=0)


@given(
    st.sampled_from([RunStatus.RUNNING, RunStatus.PARKED, RunStatus.AWAITING_HUMAN]),
    st.one_of(st.none(), st.integers(0, 2**50)),
    st.integers(0, 6),
)
def test_release_gives_back_what_the_park_took(
    status: RunStatus, wake_at: int | None, n: int
) -> None:
    snap, _ = _parked_on_approval()
    before = dataclasses.replace(snap, status=status, wake_at_ms=wake_at)
    parked = park_stranded(before, "1", "gone", now_ms=5).snapshot
    assert (parked.status, parked.wake_at_ms) == (RunStatus.PARKED, None)  # out of reach
    for i in range(n):
        parked = hold(parked, _letter(i))
    assert held_of(parked) == tuple(_letter(i) for i in range(n))  # bytes kept, in order
    after = release_stranded(parked, "1", now_ms=6).snapshot
    assert (after.status, after.wake_at_ms) == (status, wake_at)
    assert (after.next_seq, after.held_json) == (before.next_seq + 2, None)


def test_the_inventory_counts_runs_parked_on_their_version() -> None:
    rows = inventory({"flow": {"2": "d2"}}, [("flow", "1")] * 3, [("flow", "1")] * 2)
    assert [(r.version, r.in_flight, r.parked, r.stranded) for r in rows] == [
        ("1", 3, 2, True),
        ("2", 0, 0, False),
    ]


def test_a_pinned_start_nobody_serves_is_held_at_the_chain_handover() -> None:
    start = StartRun(
        session_id="s-2",
        capability="flow",
        input_json="{}",
        admission_key="k-2",
        tenant="acme",
        initiator="emitter",
        admitted_hash="a" * 64,
        admitted_ms=7,
        agent_version="1",
    )
    stub = strand_unstarted(start, "1", _letter(0), now_ms=9)
    # Nothing journaled: seq 1 stays the runtime's, after admission's RUN_ADMITTED.
    assert (stub.next_seq, stub.last_hash, stub.status) == (1, "a" * 64, RunStatus.PARKED)
    stranded = stranded_of(stub)
    assert stranded is not None and stranded.unstarted and stranded.version == "1"
    assert held_of(hold(stub, _letter(1))) == (_letter(0), _letter(1))
    with pytest.raises(ValueError):  # nothing to restate: serving the StartRun starts it
        release_stranded(stub, "1.1", now_ms=10)


def test_a_stranded_run_holds_records_only_within_its_buffered_signal_limits() -> None:
    # Held records ride in the snapshot (one Kafka message): the run's buffered-signal
    # limits bound how many, and how many bytes, before the executor dead-letters instead.
    from runplane.core.engine.stranded import can_hold
    from runplane.core.limits import Limits

    snap, _ = _parked_on_approval()
    snap = park_stranded(snap, "1", "version 1 is not deployed", now_ms=snap.updated_ms).snapshot
    letter = dataclasses.replace(_letter(1), value=b"v" * 100)
    few = Limits(max_buffered_signals=2, max_buffered_bytes=10_000)
    assert can_hold(snap, 100, few)
    snap = hold(hold(snap, letter), letter)
    assert len(held_of(snap)) == 2
    assert not can_hold(snap, 100, few)  # the count is reached
    roomy = Limits(max_buffered_signals=100, max_buffered_bytes=10_000)
    assert can_hold(snap, 100, roomy)
    assert not can_hold(snap, 10_000, roomy)  # one more would grow past the bytes
