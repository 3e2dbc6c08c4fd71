"""Runs spread over two executor instances; stopping one moves its runs to the other, which
continues them from their journals (replay: no tool call is repeated). Idle parked runtimes
are evicted after the grace and rebuilt by replay on their next message."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from runplane.config import Settings
from runplane.fakes import FakeBillingServer, read_counts
from runplane.wire import DecisionOutcome, OpenTask, RunStatus, TaskDecision
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import (
    admit,
    executor_thread,
    plain_producer,
    read_topic,
    send,
    sessions,
    with_instance,
)
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

RUNS = 16


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[FakeBillingServer]:
    with FakeBillingServer(counts_path=tmp_path / "billing.json") as server:
        yield server


def test_runs_spread_and_move_when_an_instance_stops(
    settings: Settings, billing: FakeBillingServer, tmp_path: Path
) -> None:
    def own(instance: str, grace_s: float) -> ExecutorSettings:
        return ExecutorSettings(
            base=with_instance(settings, f"{settings.instance_id}-{instance}"),
            billing_url=billing.url,
            agent_modules=("examples.refund",),
            idle_grace_s=grace_s,
        )

    producer = plain_producer(settings)
    with ExitStack() as outer:
        a = outer.enter_context(executor_thread(own("a", grace_s=1.0)))
        with ExitStack() as inner:
            b = inner.enter_context(executor_thread(own("b", grace_s=300.0)))
            wait_for(
                lambda: (
                    a.owned_partitions | b.owned_partitions == set(range(settings.partitions))
                    and not a.owned_partitions & b.owned_partitions
                    and bool(a.owned_partitions)
                    and bool(b.owned_partitions)
                ),
                timeout_s=60,
                what="partitions split between a and b",
            )
            runs = admit(
                producer, settings, "refund", [{"invoice_id": f"S-{i}"} for i in range(RUNS)]
            )
            ids = {r.run_id for r in runs}
            wait_for(
                lambda: all(
                    (s := sessions(settings).get(i)) is not None
                    and s.status is RunStatus.AWAITING_HUMAN
                    for i in ids
                ),
                timeout_s=60,
                what="all runs parked on approval",
            )
            on_b = set(b.resident_sessions)
            assert on_b and on_b < ids  # b holds some of the runs, a the rest
            # a's grace is 1 s: its parked runtimes are evicted; b keeps its own.
            wait_for(lambda: not a.resident_sessions, timeout_s=10, what="eviction on a")
            assert b.resident_sessions == on_b
        # b stopped: a takes over every partition.
        wait_for(
            lambda: a.owned_partitions == set(range(settings.partitions)),
            timeout_s=60,
            what="a owning every partition",
        )
        for _, task in read_topic(settings, "tasks.commands"):
            assert isinstance(task, OpenTask)
            send(
                producer,
                settings,
                "runs.inbox",
                task.session_id,
                TaskDecision(
                    session_id=task.session_id,
                    task_id=task.task_id,
                    era=task.era,
                    call_seq=task.call_seq,
                    outcome=DecisionOutcome.APPROVED,
                    decided_by=("carol",),
                    decided_ms=int(time.time() * 1000),
                ),
            )
        wait_for(
            lambda: all(sessions(settings)[i].status is RunStatus.COMPLETED for i in ids),
            timeout_s=90,
            what="all runs completed on a",
        )
    counts = read_counts(tmp_path / "billing.json")
    # Rebuilt by replay, not re-run: each invoice fetched once, each refund charged once.
    assert counts.fetches == {f"S-{i}": 1 for i in range(RUNS)}
    assert counts.charges == {f"refund/{i}": 1 for i in ids}
