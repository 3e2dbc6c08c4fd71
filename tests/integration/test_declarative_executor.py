"""Declarative agents through the real executor on the broker: the example manifests run like
coded agents — the approval parks the run, the decision arrives in the inbox, an evicted run
is rebuilt by replay without asking the model again, the charge happens once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runplane.config import Settings
from runplane.core import AgentRegistry, verify_chain
from runplane.core.manifest import register_manifests
from runplane.fakes import FakeBillingServer, FakeOpenAIServer, invoice_amount_cents, read_counts
from runplane.wire import DecisionOutcome, JournalKind, OpenTask, RunStatus, TaskDecision
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

pytestmark = pytest.mark.integration

MANIFESTS = Path(__file__).resolve().parents[2] / "examples" / "agents"


def _registry() -> AgentRegistry:
    registry = AgentRegistry()
    register_manifests(MANIFESTS, registry)
    return registry


def _status(settings: Settings, run_id: str, status: RunStatus) -> bool:
    snap = sessions(settings).get(run_id)
    return snap is not None and snap.status is status


def _approve(settings: Settings, run_id: str) -> None:
    [task] = [
        r
        for _, r in read_topic(settings, "tasks.commands")
        if isinstance(r, OpenTask) and r.session_id == run_id
    ]
    send(
        plain_producer(settings),
        settings,
        "runs.inbox",
        run_id,
        TaskDecision(
            session_id=run_id,
            task_id=task.task_id,
            era=task.era,
            call_seq=task.call_seq,
            outcome=DecisionOutcome.APPROVED,
            decided_by=("erin",),
            decided_ms=int(time.time() * 1000),
        ),
    )


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[FakeBillingServer]:
    with FakeBillingServer(counts_path=tmp_path / "billing.json") as server:
        yield server


def test_summarise_manifest_parks_is_evicted_and_completes_without_a_second_generation(
    settings: Settings,
) -> None:
    registry = _registry()
    with FakeOpenAIServer(api_key="sk-test", replies=["A three sentence summary."]) as model:
        own = ExecutorSettings(
            base=settings,
            openai_base_url=model.url,
            openai_api_key="sk-test",
            openai_model="fake-model",
            idle_grace_s=0.5,
            agent_modules=(),
        )
        producer = plain_producer(settings)
        with executor_thread(own, registry=registry) as executor:
            [run] = admit(
                producer,
                settings,
                "summarise",
                [{"title": "Q3", "text": "Revenue up, costs down."}],
            )
            wait_for(
                lambda: _status(settings, run.run_id, RunStatus.AWAITING_HUMAN),
                timeout_s=60,
                what="approval park",
            )
            [task] = [
                r for _, r in read_topic(settings, "tasks.commands") if isinstance(r, OpenTask)
            ]
            assert (
                json.loads(task.answer_json) == {"text": "A three sentence summary."}
                and task.role == "editor"
            )
            wait_for(
                lambda: run.run_id not in executor.resident_sessions, timeout_s=10, what="eviction"
            )
            _approve(settings, run.run_id)
            wait_for(
                lambda: _status(settings, run.run_id, RunStatus.COMPLETED),
                timeout_s=60,
                what="completion",
            )
        assert model.requests == 1  # the rebuilt run was served its generation from the journal

    output = json.loads(sessions(settings)[run.run_id].output_json or "null")
    assert output == {
        "status": "approved",
        "text": "A three sentence summary.",
        "decided_by": ["erin"],
        "steps": {},
    }
    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    first = results[(0, 0)]
    assert (
        first.family == "manifest"
        and json.loads(first.value_json or "null")["digest"] == registry.spec("summarise").digest
    )
    assert [r.family for r in records if r.kind is JournalKind.EFFECT_RECORDED][:2] == [
        "manifest",
        "generation",
    ]


def test_collect_manifest_asks_then_charges_once(
    settings: Settings, billing: FakeBillingServer, tmp_path: Path
) -> None:
    own = ExecutorSettings(base=settings, billing_url=billing.url, agent_modules=())
    producer = plain_producer(settings)
    with executor_thread(own, registry=_registry()):
        [run] = admit(producer, settings, "collect", [{"invoice_id": "INV-7"}])
        wait_for(
            lambda: _status(settings, run.run_id, RunStatus.AWAITING_HUMAN),
            timeout_s=60,
            what="approval park",
        )
        assert billing.counts().charges == {}
        _approve(settings, run.run_id)
        wait_for(
            lambda: _status(settings, run.run_id, RunStatus.COMPLETED),
            timeout_s=60,
            what="completion",
        )
    output = json.loads(sessions(settings)[run.run_id].output_json or "null")
    assert (
        output["amount_cents"] == invoice_amount_cents("INV-7") and output["invoice_id"] == "INV-7"
    )
    assert read_counts(tmp_path / "billing.json").charges == {f"collect/{run.run_id}/charge": 1}
    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
