"""Deadline commands ask and wait, on the real broker: the executor runs the core, the cases
service answers on ``runs.inbox``, and the run journals the answer — or raises CaseRefused."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from test_cases_support import cases_service, latest_case, reply_to
from test_cases_support import send as send_case_command

import examples.triage  # noqa: F401  (registers "triage")
from runplane.config import Settings
from runplane.core import (
    REGISTRY,
    AgentRegistry,
    CaseRefused,
    StepCtx,
    days,
    run_admitted,
    verify_chain,
)
from runplane.testing import ScriptedProvider
from runplane.wire import (
    CaseReply,
    CloseCase,
    JournalKind,
    ObligationStatus,
    RunStatus,
    StartRun,
    serde_for,
)
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import chain_of, executor_thread, plain_producer, read_topic, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration


async def deadline_on_closed_case(ctx: StepCtx, input: Any) -> Any:
    try:
        await ctx.deadline("late", days(1))
    except CaseRefused as exc:
        return {"refused": exc.reason}
    return {"refused": None}


def _registry() -> AgentRegistry:
    registry = AgentRegistry([REGISTRY.spec("triage")])
    registry.agent("closer")(deadline_on_closed_case)
    return registry


def _admit(settings: Settings, capability: str, value: Any, case_id: str) -> str:
    """What admission writes for a new run on ``case_id``: seq 0 and the StartRun."""
    serde = serde_for(settings)
    run_id = "r-" + uuid.uuid4().hex[:16]
    now_ms = int(time.time() * 1000)
    input_json = json.dumps(value, sort_keys=True)
    seq0 = run_admitted(
        run_id,
        capability=capability,
        admission_key=f"k-{run_id}",
        tenant="acme",
        initiator="emitter",
        input_json=input_json,
        now_ms=now_ms,
        case_id=case_id,
    )
    start = StartRun(
        session_id=run_id,
        capability=capability,
        input_json=input_json,
        case_id=case_id,
        admission_key=f"k-{run_id}",
        tenant="acme",
        initiator="emitter",
        admitted_hash=seq0.hash,
        admitted_ms=now_ms,
    )
    producer = plain_producer(settings)
    producer.produce(
        settings.topic("journal"), key=run_id.encode(), value=serde.encode("journal", seq0)
    )
    producer.produce(
        settings.topic("runs.inbox"), key=run_id.encode(), value=serde.encode("runs.inbox", start)
    )
    assert producer.flush(30) == 0
    return run_id


def _ended(settings: Settings, run_id: str) -> bool:
    snap = sessions(settings).get(run_id)
    return snap is not None and snap.status in (
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.QUARANTINED,
    )


def test_triage_journals_the_cases_service_accepting_its_deadline(settings: Settings) -> None:
    case_id = "c-" + uuid.uuid4().hex[:24]
    own = ExecutorSettings(base=settings, agent_modules=())
    providers = {"openai": ScriptedProvider(["billing"], name="openai")}
    with cases_service(settings), executor_thread(own, providers=providers, registry=_registry()):
        run_id = _admit(settings, "triage", {"ticket": "charged twice"}, case_id)
        wait_for(lambda: _ended(settings, run_id), timeout_s=90, what="triage to end")
    snap = sessions(settings)[run_id]
    assert snap.status is RunStatus.COMPLETED, snap.error
    out = json.loads(snap.output_json or "null")

    case = latest_case(settings, case_id)
    assert case is not None
    (ob,) = case.obligations
    assert (ob.name, ob.status, ob.due_ms, ob.on_breach) == (
        "first-response",
        ObligationStatus.OPEN,
        out["first_response_due_ms"],
        "escalation",
    )
    assert ob.registered_by == run_id  # named by reply_to, no longer parsed from the request id

    replies = [
        r for k, r in read_topic(settings, "runs.inbox") if k == run_id and isinstance(r, CaseReply)
    ]
    assert sorted(r.op for r in replies) == ["get_state", "put_state", "register_deadline"]
    records, results = chain_of(settings, run_id)
    assert verify_chain(records, results).ok
    registered = [r for r in records if r.kind is JournalKind.DEADLINE_REGISTERED]
    assert (
        len(registered) == 1
        and registered[0].attrs["request_id"] == f"{run_id}/0/{registered[0].call_seq}"
    )


def test_a_deadline_the_cases_service_refuses_raises_case_refused_in_the_agent(
    settings: Settings,
) -> None:
    case_id = "c-" + uuid.uuid4().hex[:24]
    own = ExecutorSettings(base=settings, agent_modules=())
    with cases_service(settings):
        send_case_command(
            settings, CloseCase(case_id=case_id, request_id="setup/0/0", reply_to="setup")
        )
        assert reply_to(settings, "setup", "setup/0/0").accepted
        with executor_thread(own, providers={}, registry=_registry()):
            run_id = _admit(settings, "closer", {}, case_id)
            wait_for(lambda: _ended(settings, run_id), timeout_s=90, what="closer to end")
    snap = sessions(settings)[run_id]
    assert snap.status is RunStatus.COMPLETED, snap.error
    assert json.loads(snap.output_json or "null") == {"refused": "case is closed"}
    records, results = chain_of(settings, run_id)
    assert verify_chain(records, results).ok
    refused = [e for e in results.values() if e.family == "deadline"]
    assert (
        len(refused) == 1
        and refused[0].error is not None
        and refused[0].error.type == "CaseRefused"
    )
