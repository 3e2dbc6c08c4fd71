"""A deadline resolved on a deployment calendar keeps its journaled instant on replay, even
after the holiday table changed (the core's ``ctx.deadline`` calling our registry)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from runplane.core.agents import AgentRegistry
from runplane.core.calendars import CalendarRegistry, WorkingDays
from runplane.core.ctx import StepCtx
from runplane.testing import Driver, FakeClock
from runplane.wire import JournalKind, RunStatus

pytestmark = pytest.mark.unit

REGISTRY = AgentRegistry()


@REGISTRY.agent("deadline-then-wait")
async def deadline_then_wait(ctx: StepCtx, _input: Any) -> Any:
    due = await ctx.deadline("aperak", {"working_days": 1}, calendar="wd")
    await ctx.wait_signal("go")
    return due


def calendars(*holidays: dt.date) -> CalendarRegistry:
    return CalendarRegistry([WorkingDays(name="wd", holidays=frozenset(holidays))])


def test_replay_under_a_changed_holiday_table_returns_the_journaled_instant() -> None:
    wednesday = int(dt.datetime(2025, 6, 4, 10, tzinfo=dt.UTC).timestamp() * 1000)
    before = calendars()
    driver = Driver(REGISTRY, clock=FakeClock(wednesday), calendars=before)
    view = driver.run("deadline-then-wait", {}, case_id="c-1")
    assert view.status != RunStatus.COMPLETED
    registered = [r for r in view.journal if r.kind == JournalKind.DEADLINE_REGISTERED]
    assert len(registered) == 1
    assert registered[0].attrs["calendar_digest"] == before["wd"].digest

    # Thursday becomes a holiday; the run is evicted and rebuilt by replay.
    after = calendars(dt.date(2025, 6, 5))
    assert after["wd"].digest != before["wd"].digest
    journaled = before.resolve("wd", {"working_days": 1}, wednesday)[0]
    assert after.resolve("wd", {"working_days": 1}, wednesday)[0] != journaled
    driver.calendars = after
    driver.crash(view.session_id)
    done = driver.signal(view.session_id, "go")
    assert done.status == RunStatus.COMPLETED
    assert done.output == journaled
