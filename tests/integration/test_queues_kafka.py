"""Queues on the broker: admission, the queue service and an executor. A burst of runs of a
capability limited to 5 concurrent never has more than 5 running at once — measured from
their journal stamps — and all complete; a higher-priority run admitted after the burst
starts before the runs that waited longer (docs/decisions.md 33)."""

from __future__ import annotations

import json
import time

import pytest

from runplane.config import Settings
from runplane.core.agents import import_agent_modules
from runplane.core.policy import Policy, parse_policy
from runplane.core.queues import QueueLimits
from runplane.runs.client import Client
from runplane.wire import (
    AdmissionClaim,
    AdmissionRequest,
    JournalKind,
    JournalRecord,
    RunStatus,
    StartRun,
    TenantId,
    serde_for,
)
from services.executor.settings import ExecutorSettings
from services.queues.serve import build as build_queues
from services.queues.settings import QueuesSettings
from tests.helpers.harness import executor_thread, plain_producer, read_topic, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

MODULES = ("examples.plan_triage",)
CAP = "risk.score"  # one read-only tool call that takes slow_s of real time
LIMIT = 5
RUN_INPUT = {"amount": 10, "slow_s": 0.3}
BURST = 99  # and one urgent run: 100 in all


def _request(key: str, priority: int) -> AdmissionRequest:
    return AdmissionRequest(
        admission_key=key,
        capability=CAP,
        input_json=json.dumps(RUN_INPUT),
        tenant=TenantId("acme"),
        initiator="emitter",
        requested_ms=int(time.time() * 1000),
        priority=priority,
    )


def _send(settings: Settings, keys: list[str], *, priority: int) -> None:
    """Admission requests for ``keys``, produced at once (unsigned: admission in dev mode)."""
    serde = serde_for(settings)
    producer = plain_producer(settings)
    for key in keys:
        producer.produce(
            settings.topic("admission"),
            key=key.encode(),
            value=serde.encode("admission", _request(key, priority)),
        )
    producer.flush(30)


def _max_overlap(intervals: list[tuple[int, int]]) -> int:
    """The most intervals [start, end) open at one instant (an end before a start at a tie)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_a_burst_never_runs_more_than_the_limit_and_priority_goes_first(
    settings: Settings,
) -> None:
    from test_admission import running

    from services.admission.serve import build, capabilities_from, queued
    from services.admission.settings import AdmissionSettings

    policy_caps = queued(capabilities_from(import_agent_modules(MODULES)), _policy({CAP: LIMIT}))
    admission = build(
        AdmissionSettings(base=settings, allow_unsigned=True), capabilities=policy_caps
    )
    queues = build_queues(
        QueuesSettings(base=settings, limits={CAP: QueueLimits(concurrency=LIMIT)})
    )
    own = ExecutorSettings(base=settings, agent_modules=MODULES)
    tag = settings.instance_id
    keys = [f"burst-{tag}-{i}" for i in range(BURST)]
    urgent = f"urgent-{tag}"
    began = time.monotonic()
    with running(admission), running(queues), executor_thread(own):
        _send(settings, keys, priority=0)
        # Admitted once the whole burst is (its claims are written): it arrives behind them.
        wait_for(lambda: _admitted(settings) >= BURST, timeout_s=30, what="the burst admitted")
        with Client(settings) as client:  # the emitter's way in, priority and all
            reply = client.admit(
                CAP, urgent, RUN_INPUT, tenant="acme", initiator="emitter", priority=10
            )
        assert reply.status is RunStatus.QUEUED, reply  # behind the burst: it waits

        def all_done() -> bool:
            done = [s for s in sessions(settings).values() if s.status is RunStatus.COMPLETED]
            return len(done) >= BURST + 1

        wait_for(all_done, timeout_s=120, every_s=1.0, what="every run completed")
    took = time.monotonic() - began
    spans: dict[str, list[int]] = {}
    ends: dict[str, int] = {}
    for run, record in read_topic(settings, "journal"):
        if not isinstance(record, JournalRecord):
            continue
        if record.seq > 0:  # seq 0 is admission's; the executor's records are the run's life
            spans.setdefault(run, []).append(record.stamp_ms)
        if record.kind is JournalKind.RUN_COMPLETED:
            ends[run] = record.stamp_ms
    assert len(ends) == BURST + 1, (len(ends), took)
    intervals = {run: (min(spans[run]), ends[run]) for run in ends}
    most = _max_overlap(list(intervals.values()))
    lasted = sorted(e - s for s, e in intervals.values())
    print(
        f"{BURST + 1} runs, limit {LIMIT}: at most {most} running at once, {took:.1f} s; "
        f"a run lasted {lasted[0]}..{lasted[-1]} ms (median {lasted[len(lasted) // 2]})"
    )
    assert most <= LIMIT
    assert most == LIMIT  # the queue keeps the capability busy, not merely under its limit
    starts = sorted(intervals, key=lambda run: intervals[run][0])
    urgent_run = _run_of(settings, urgent)
    # Every run of the burst still waiting when it arrived starts after it.
    rank = starts.index(urgent_run)
    print(f"the urgent run started {rank + 1}th of {len(starts)}")
    assert len(starts) - rank - 1 >= BURST - 3 * LIMIT, rank


def _policy(limits: dict[str, int]) -> Policy:
    lines = "".join(f"  {cap}: {{concurrency: {n}}}\n" for cap, n in limits.items())
    return parse_policy("queues:\n" + lines)


def _claims(settings: Settings) -> list[AdmissionClaim]:
    return [r for _, r in read_topic(settings, "admission.claims") if isinstance(r, AdmissionClaim)]


def _admitted(settings: Settings) -> int:
    return len({c.run_id for c in _claims(settings)})


def _run_of(settings: Settings, key: str) -> str:
    (claim,) = {c.run_id: c for c in _claims(settings) if c.admission_key == key}.values()
    return claim.run_id


def test_the_queue_survives_a_restart_of_its_service(settings: Settings) -> None:
    """The queue service stops mid-burst and a new instance takes over from the compacted
    row: no run starts twice, none is lost, the limit still holds."""
    from test_admission import running

    from services.admission.serve import build, capabilities_from, queued
    from services.admission.settings import AdmissionSettings

    limit, burst = 3, 30
    caps = queued(capabilities_from(import_agent_modules(MODULES)), _policy({CAP: limit}))
    admission = build(AdmissionSettings(base=settings, allow_unsigned=True), capabilities=caps)
    own = QueuesSettings(base=settings, limits={CAP: QueueLimits(concurrency=limit)})
    keys = [f"restart-{settings.instance_id}-{i}" for i in range(burst)]

    def completed() -> int:
        return sum(1 for s in sessions(settings).values() if s.status is RunStatus.COMPLETED)

    with (
        running(admission),
        executor_thread(ExecutorSettings(base=settings, agent_modules=MODULES)),
    ):
        with running(build_queues(own)):
            _send(settings, keys, priority=0)
            wait_for(lambda: completed() >= 6, timeout_s=60, what="a few runs completed")
        # Stopped: what it released runs on, what it holds waits. A new instance restores it.
        with running(build_queues(own)):
            wait_for(lambda: completed() >= burst, timeout_s=120, every_s=1.0, what="all runs")
    starts: dict[str, int] = {}
    intervals: list[tuple[int, int]] = []
    first: dict[str, int] = {}
    for run, record in read_topic(settings, "journal"):
        if isinstance(record, JournalRecord) and record.seq > 0:
            first.setdefault(run, record.stamp_ms)
            if record.kind is JournalKind.RUN_COMPLETED:
                intervals.append((first[run], record.stamp_ms))
    for run, record in read_topic(settings, "runs.inbox"):
        if isinstance(record, StartRun):
            starts[run] = starts.get(run, 0) + 1
    assert len(starts) == burst and set(starts.values()) == {1}, starts  # each started once
    assert len(intervals) == burst
    assert _max_overlap(intervals) <= limit
