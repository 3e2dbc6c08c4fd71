"""Real refund runs (through the executor) audited by the journal service, and a quarantine.

The executor writes the chains; the journal service audits run A as it grows (parked on the
approval, then completed): every record VERIFIED, in order, once each, across a restart of the
journal service between the park and the decision. A forged record on run B's chain (B is
parked on its approval) is reported broken at its seq, and the quarantine wake reaches the
executor, which quarantines the live run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_journal_service import read_audit, running, wait_audit

from runplane.config import Settings
from runplane.core.chain import Draft, seal
from runplane.fakes import FakeBillingServer
from runplane.journal.summary import summarize
from runplane.wire import (
    DecisionOutcome,
    JournalKind,
    OpenTask,
    RunStatus,
    TaskDecision,
    Verdict,
    encode,
)
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import (
    admit,
    chain_of,
    executor_thread,
    plain_producer,
    read_topic,
    send,
    sessions,
)
from tests.helpers.waiting import wait_for


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[FakeBillingServer]:
    with FakeBillingServer(counts_path=tmp_path / "billing.json") as server:
        yield server


def _status(settings: Settings, run_id: str, status: RunStatus) -> bool:
    snap = sessions(settings).get(run_id)
    return snap is not None and snap.status is status


def test_refund_run_audited_verified_once_then_tamper_quarantines(
    settings: Settings, billing: FakeBillingServer
) -> None:
    own = ExecutorSettings(
        base=settings, billing_url=billing.url, agent_modules=("examples.refund",)
    )
    producer = plain_producer(settings)
    with executor_thread(own):
        run_a, run_b = admit(
            producer,
            settings,
            "refund",
            [{"invoice_id": "INV-7", "reason": "dup"}, {"invoice_id": "INV-8", "reason": "dup"}],
        )
        a, b = run_a.run_id, run_b.run_id
        for rid in (a, b):
            wait_for(
                lambda rid=rid: _status(settings, rid, RunStatus.AWAITING_HUMAN),
                timeout_s=60,
                what="park",
            )
        parked_records, _ = chain_of(settings, a)
        with running(settings):
            audits = wait_audit(settings, a, len(parked_records))
        assert summarize(a, audits).status is RunStatus.AWAITING_HUMAN

        [task] = [
            r
            for _, r in read_topic(settings, "tasks.commands")
            if isinstance(r, OpenTask) and r.session_id == a
        ]
        send(
            producer,
            settings,
            "runs.inbox",
            a,
            TaskDecision(
                session_id=a,
                task_id=task.task_id,
                era=task.era,
                call_seq=task.call_seq,
                outcome=DecisionOutcome.APPROVED,
                decided_by=("alice",),
                decided_ms=int(time.time() * 1000),
            ),
        )
        wait_for(lambda: _status(settings, a, RunStatus.COMPLETED), timeout_s=60, what="completion")
        records, _ = chain_of(settings, a)

        with running(settings):  # a new journal service instance carries on from the audit stream
            wait_audit(settings, a, len(records))
            time.sleep(1.5)
            audits = read_audit(settings, a)
            assert [x.seq for x in audits] == list(range(len(records)))  # in order, once each
            assert {x.verdict for x in audits} == {Verdict.VERIFIED}
            assert summarize(a, audits).status is RunStatus.COMPLETED

            # run b waits for its approval; a forged record lands on its chain (wrong link)
            chain_b, _ = chain_of(settings, b)
            wait_audit(settings, b, len(chain_b))
            n = len(chain_b)
            forged = seal(
                Draft(
                    b,
                    n,
                    0,
                    JournalKind.SIGNAL_RECEIVED,
                    int(time.time() * 1000),
                    attrs={"forged": "yes"},
                ),
                "e" * 64,
            )
            producer.produce(settings.topic("journal"), key=b.encode(), value=encode(forged))
            producer.flush(10)
            bad = wait_audit(settings, b, n + 1)[n]
            assert bad.verdict is Verdict.BROKEN and bad.broken_at_seq == n
            assert (bad.reason or "").startswith("bad_link")
            # the executor received the quarantine wake and quarantined the live run
            wait_for(
                lambda: _status(settings, b, RunStatus.QUARANTINED), timeout_s=60, what="quarantine"
            )
    assert json.loads(sessions(settings)[a].output_json or "null")["status"] == "refunded"
