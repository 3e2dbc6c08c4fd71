"""The refund example through admission and the executor on the real stack.

An emitter asks for a refund; admission admits it and hands it to the executor, which parks
it on an approval. The same admission key asked again is answered DUPLICATE with the run's
status — AWAITING_HUMAN and the task, "already waiting for you" — because the executor tells
admission where its runs are. After the decision the run completes with exactly one charge,
and a third ask is answered DUPLICATE / COMPLETED.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runplane.config import Settings
from runplane.core import verify_chain
from runplane.fakes import FakeBillingServer, read_counts
from runplane.kafka.clients import admin
from runplane.kafka.topics import create_topics, delete_topics
from runplane.runs.client import Client
from runplane.stack import StackError, ensure_up
from runplane.wire import AdmissionOutcome, DecisionOutcome, RunStatus, TaskDecision
from services.admission.serve import build as build_admission
from services.admission.settings import AdmissionSettings
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import chain_of, executor_thread, plain_producer, send, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def settings() -> Iterator[Settings]:
    try:
        stack = ensure_up(Settings.from_env(), root=ROOT)
    except StackError as exc:
        pytest.fail(f"the local stack is not available: {exc}", pytrace=False)
    tag = uuid.uuid4().hex[:8]
    own = dataclasses.replace(stack.settings, topic_prefix=f"e{tag}.", instance_id=f"e2e-{tag}")
    client = admin(own)
    create_topics(own, client)
    yield own
    delete_topics(own, client)


@pytest.fixture
def admission(settings: Settings) -> Iterator[None]:
    processor = build_admission(
        AdmissionSettings(base=settings, agent_modules=("examples.refund",), allow_unsigned=True)
    )
    stop = threading.Event()
    thread = threading.Thread(target=processor.run, args=(stop,), daemon=True)
    thread.start()
    assert processor.ready.wait(60), "admission never got its partitions"
    yield
    stop.set()
    thread.join(30)


def test_refund_through_admission_answers_duplicates_with_status(
    settings: Settings, admission: None, tmp_path: Path
) -> None:
    key = f"refund-{uuid.uuid4().hex[:8]}"
    with (
        FakeBillingServer(counts_path=tmp_path / "billing.json") as billing,
        Client(settings) as emitter,
    ):
        own = ExecutorSettings(
            base=settings, billing_url=billing.url, agent_modules=("examples.refund",)
        )
        with executor_thread(own):
            first = emitter.admit(
                "refund", key, {"invoice_id": "INV-E2E"}, tenant="acme", initiator="bob"
            )
            assert first.outcome is AdmissionOutcome.ADMITTED and first.run_id is not None
            run_id = first.run_id

            def duplicate_says_waiting() -> bool:
                again = emitter.admit(
                    "refund", key, {"invoice_id": "INV-E2E"}, tenant="acme", initiator="bob"
                )
                return (
                    again.outcome is AdmissionOutcome.DUPLICATE
                    and again.status is RunStatus.AWAITING_HUMAN
                )

            wait_for(
                duplicate_says_waiting,
                timeout_s=60,
                every_s=0.5,
                what="duplicate answered AWAITING_HUMAN",
            )
            again = emitter.admit(
                "refund", key, {"invoice_id": "INV-E2E"}, tenant="acme", initiator="bob"
            )
            assert (again.run_id, again.task_id) == (run_id, f"{run_id}/0/1")

            snap = sessions(settings)[run_id]
            assert snap.parked_on is not None
            send(
                plain_producer(settings),
                settings,
                "runs.inbox",
                run_id,
                TaskDecision(
                    session_id=run_id,
                    task_id=snap.parked_on.ref,
                    era=snap.parked_on.era,
                    call_seq=snap.parked_on.call_seq,
                    outcome=DecisionOutcome.APPROVED,
                    decided_by=("alice",),
                    decided_ms=int(time.time() * 1000),
                ),
            )

            def duplicate_says_completed() -> bool:
                later = emitter.admit(
                    "refund", key, {"invoice_id": "INV-E2E"}, tenant="acme", initiator="bob"
                )
                return (
                    later.outcome is AdmissionOutcome.DUPLICATE
                    and later.status is RunStatus.COMPLETED
                )

            wait_for(
                duplicate_says_completed,
                timeout_s=60,
                every_s=0.5,
                what="duplicate answered COMPLETED",
            )

    assert read_counts(tmp_path / "billing.json").charges == {f"refund/{run_id}": 1}
    records, results = chain_of(settings, run_id)
    assert verify_chain(records, results).ok
    assert [r.seq for r in records] == list(range(len(records)))
    assert records[0].kind.name == "RUN_ADMITTED" and records[-1].kind.name == "RUN_COMPLETED"
