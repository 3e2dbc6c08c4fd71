"""A mutating call unanswered within its timeout is in doubt and follows its declared recovery
(issue 35.2), against the billing fake made slow over real HTTP: the charge is applied at once
and its answer held past the executor's call timeout. The refund's ``charge_card`` reconciles:
the run waits out the charge's deadline (from the journal's stamp of its announce), then the
probe finds the charge — one charge, the run completed, no RUN_FAILED naming the doubt."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from executor_process_support import ExecutorProcess

from runplane.config import Settings
from runplane.core import verify_chain
from runplane.fakes import FakeBillingServer, read_counts
from runplane.wire import JournalKind, OpenTask, RunStatus, TaskKind
from tests.helpers.harness import admit, chain_of, plain_producer, read_topic, sessions
from tests.integration.test_executor_faults import _approve_open_tasks

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
# The refund's charge declares two 10 s attempts and a 1 s backoff: its doubt is probed 21 s
# after the announce (decisions §32).
DEADLINE_MS = 21_000


@pytest.fixture
def slow_billing(tmp_path: Path) -> Iterator[FakeBillingServer]:
    # Applied, then its answer held 3 s: past the executor's 1 s call timeout.
    with FakeBillingServer(counts_path=tmp_path / "billing.json", charge_delay_s=3.0) as server:
        yield server


def test_a_charge_unanswered_in_time_is_reconciled_after_its_deadline_not_failed(
    settings: Settings, slow_billing: FakeBillingServer, tmp_path: Path
) -> None:
    executor = ExecutorProcess(
        settings,
        "slow",
        tmp_path,
        {
            "RUNPLANE_BILLING_URL": slow_billing.url,
            "RUNPLANE_AGENT_MODULES": "examples.refund",
            "RUNPLANE_TOOLS_CONFIG": str(ROOT / "examples" / "tools" / "billing.yaml"),
            "RUNPLANE_EXECUTOR_CALL_TIMEOUT_S": "1",
            "RUNPLANE_EXECUTOR_BATCH_MS": "5",
        },
    )
    producer = plain_producer(settings)
    decided: set[str] = set()
    try:
        [run] = admit(producer, settings, "refund", [{"invoice_id": "INV-slow"}])
        deadline = time.monotonic() + 120
        snap = None
        while time.monotonic() < deadline:
            _approve_open_tasks(settings, producer, decided)
            snap = sessions(settings).get(run.run_id)
            if snap is not None and snap.status in (RunStatus.COMPLETED, RunStatus.FAILED):
                break
            time.sleep(0.5)
    finally:
        executor.stop()
    assert snap is not None and snap.status is RunStatus.COMPLETED, snap
    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    assert not any(r.kind is JournalKind.RUN_FAILED for r in records)
    (announce,) = [
        r
        for r in records
        if r.kind is JournalKind.EFFECT_ANNOUNCED and r.name == "tool://charge_card"
    ]
    (doubt,) = [r for r in records if r.kind is JournalKind.EFFECT_IN_DOUBT]
    due = announce.stamp_ms + DEADLINE_MS
    assert doubt.attrs["recovery"] == "reconcile" and doubt.attrs["probe_at"] == str(due)
    (probe,) = [
        r for r in records if r.kind is JournalKind.EFFECT_ANNOUNCED and r.family == "probe"
    ]
    assert probe.stamp_ms >= due  # the probe asked after the deadline, not before
    assert any(r.attrs.get("reconciled") == "applied" for r in records)
    # The peer's own ledger: the charge was sent once and applied once.
    counts = read_counts(tmp_path / "billing.json")
    assert counts.charges.get(f"refund/{run.run_id}") == 1, counts.charges
    # No operator was asked: the probe could tell.
    opened = [r for _, r in read_topic(settings, "tasks.commands") if isinstance(r, OpenTask)]
    assert not [t for t in opened if t.session_id == run.run_id and t.kind is TaskKind.OPERATOR]
