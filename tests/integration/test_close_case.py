"""A case closes only after its obligation is met, on the real broker: ``ctx.close_case()``
through the executor and the cases service, and ``runplane cases close`` from the CLI. And an
obligation's warning reaches someone: a worklist task for its owner role and a sealed,
verifiable warning run on the journal."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from test_cases_support import cases_service, latest_case, read_all
from test_cases_support import send as send_case_command
from test_core_case_requests import _admit, _ended

from runplane.cli.cases import close_case
from runplane.config import Settings
from runplane.core import AgentRegistry, CaseRefused, StepCtx, verify_chain
from runplane.core.keys import warn_request_id
from runplane.wire import (
    JournalKind,
    JournalRecord,
    MeetDeadline,
    ObligationStatus,
    OpenTask,
    RegisterDeadline,
    RunStatus,
    WarnDeadline,
)
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import chain_of, executor_thread, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

AGENTS = AgentRegistry()


@AGENTS.agent("settle", durability="replayable")
async def settle(ctx: StepCtx, input: Any) -> Any:
    await ctx.deadline("refund", {"days": 2})
    try:
        await ctx.close_case()
        early = None
    except CaseRefused as exc:
        early = exc.reason
    await ctx.meet_deadline("refund")
    await ctx.close_case()
    return {"early": early}


def test_a_run_closes_its_case_only_after_meeting_the_obligation(settings: Settings) -> None:
    case_id = "c-" + uuid.uuid4().hex[:24]
    own = ExecutorSettings(base=settings, agent_modules=())
    with cases_service(settings), executor_thread(own, registry=AGENTS):
        run_id = _admit(settings, "settle", {}, case_id)
        wait_for(lambda: _ended(settings, run_id), timeout_s=90, what="settle to end")
    snap = sessions(settings)[run_id]
    assert snap.status is RunStatus.COMPLETED, snap.error
    assert "obligations still open: refund" in json.loads(snap.output_json or "{}")["early"]
    case = latest_case(settings, case_id)
    assert case is not None and case.closed
    records, results = chain_of(settings, run_id)
    assert verify_chain(records, results).ok
    closes = [
        r for r in records if r.kind is JournalKind.EFFECT_RECORDED and r.name == "case:close"
    ]
    assert len(closes) == 2  # the refusal and the close, each journaled as a result


def test_cases_close_from_the_cli_is_refused_until_the_obligation_is_met(
    settings: Settings,
) -> None:
    case_id = "c-" + uuid.uuid4().hex[:24]
    register = RegisterDeadline(
        case_id=case_id,
        request_id="t/register",
        name="reply",
        due_ms=2_000_000_000_000,
        calendar="wall",
        calendar_digest="0" * 64,
        rule_json='{"days":1}',
    )
    with cases_service(settings):
        send_case_command(settings, register)
        accepted, reason = close_case(settings, case_id, "ops")
        assert not accepted and reason == "obligations still open: reply"
        case = latest_case(settings, case_id)
        assert case is not None and not case.closed
        send_case_command(
            settings, MeetDeadline(case_id=case_id, request_id="t/meet", name="reply")
        )
        assert close_case(settings, case_id, "ops") == (True, None)
    case = latest_case(settings, case_id)
    assert case is not None and case.closed


def test_a_warning_opens_a_task_for_the_owner_role_and_journals_a_sealed_run(
    settings: Settings,
) -> None:
    case_id = "c-" + uuid.uuid4().hex[:24]
    due = 2_000_000_000_000
    register = RegisterDeadline(
        case_id=case_id,
        request_id="t/register",
        name="reply",
        due_ms=due,
        warn_ms=due - 3_600_000,
        calendar="wall",
        calendar_digest="0" * 64,
        rule_json='{"days":1}',
        owner_role="billing",
    )
    warn = WarnDeadline(
        case_id=case_id, request_id=warn_request_id(case_id, "reply", due), name="reply", due_ms=due
    )
    with cases_service(settings):
        send_case_command(settings, register, warn, warn)  # the sweeper may warn twice
        wait_for(
            lambda: _warned(settings, case_id), timeout_s=60, what="the obligation to be warned"
        )
    tasks = [v for _, v in read_all(settings, "tasks.commands") if isinstance(v, OpenTask)]
    [task] = [t for t in tasks if t.case_id == case_id]
    assert (task.role, task.expires_ms) == ("billing", due)
    chain = sorted(
        (
            v
            for k, v in read_all(settings, "journal")
            if isinstance(v, JournalRecord) and k == task.session_id
        ),
        key=lambda r: r.seq,
    )
    assert [r.kind for r in chain] == [
        JournalKind.RUN_ADMITTED,
        JournalKind.DEADLINE_WARNED,
        JournalKind.RUN_COMPLETED,
    ]
    assert verify_chain(chain).ok
    assert chain[1].attrs["task_id"] == task.task_id


def _warned(settings: Settings, case_id: str) -> bool:
    case = latest_case(settings, case_id)
    return case is not None and any(o.status is ObligationStatus.WARNED for o in case.obligations)
