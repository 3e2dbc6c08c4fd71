"""``ctx.close_case()``: refused (``CaseRefused``) while an obligation is open, accepted once
it is met; the answers are journaled, so a replay asks nothing again."""

from __future__ import annotations

from typing import Any

import pytest

from runplane.core import AgentRegistry, CaseRefused, StepCtx
from runplane.core.engine import replay_history
from runplane.testing import Driver
from runplane.wire import RunStatus

pytestmark = pytest.mark.unit

AGENTS = AgentRegistry()


@AGENTS.agent("closer", durability="replayable")
async def closer(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    await ctx.deadline("reply", {"hours": 4})
    try:
        await ctx.close_case()
        early = "closed"
    except CaseRefused as exc:
        early = str(exc)
    await ctx.meet_deadline("reply")
    await ctx.close_case()
    return {"early": early}


@AGENTS.agent("caseless", durability="replayable")
async def caseless(ctx: StepCtx, input: Any) -> str:
    await ctx.close_case()
    return "unreachable"


def test_a_case_closes_only_after_its_obligation_is_met() -> None:
    driver = Driver(AGENTS)
    view = driver.run("closer", {}, case_id="c-1")
    assert view.status is RunStatus.COMPLETED, view.error
    assert "obligations still open: reply" in view.output["early"]
    assert "c-1" in driver.closed_cases
    assert driver.verify(view.session_id).ok
    report = replay_history(AGENTS.spec("closer"), view.snapshot, view.results)
    assert (report.status, report.output, report.divergence) == (
        RunStatus.COMPLETED,
        view.output,
        None,
    )


def test_close_case_without_a_case_fails_the_call() -> None:
    view = Driver(AGENTS).run("caseless", None)
    assert view.status is RunStatus.FAILED and view.error is not None and "NoCase" in view.error
