"""Patch markers (runplane.core.engine.patches): a fix goes into the live version without
stranding runs. Old histories take the old branch, runs that reach the change take the new one
(journaled), and replay testing passes for both under the patched code."""

from __future__ import annotations

from typing import Any

import pytest

from runplane.core import AgentRegistry, AgentSpec, StepCtx
from runplane.core.engine import ReplayResult, replay_recording
from runplane.core.recording import Recording
from runplane.testing import Driver, FakeClock, RunView
from runplane.wire import RunStatus


def _tools() -> dict[str, Any]:
    return {name: (lambda args, key: {"ok": True}) for name in ("a", "b", "c")}


def _spec(version: str) -> AgentSpec:
    reg = AgentRegistry()

    @reg.agent("fix", tools=["a", "b", "c"])
    async def fix(ctx: StepCtx, value: Any) -> str:
        await ctx.tool("a", {})
        await ctx.approval("go?", {}, role="ops")
        if version == "1":
            await ctx.tool("b", {})
            return "old"
        if version == "1.1":
            if ctx.patched("use-c"):
                await ctx.tool("c", {})
                return "new"
            await ctx.tool("b", {})
            return "old"
        ctx.deprecate_patch("use-c")  # "1.2": every run in flight has the change
        await ctx.tool("c", {})
        return "new"

    return reg.spec("fix")


def _driver(version: str) -> Driver:
    return Driver(_spec(version), tools=_tools(), clock=FakeClock(1_700_000_000_000, 3))


def _recording(run: RunView) -> Recording:
    return Recording(run.snapshot, run.journal, run.results)


def _markers(run: RunView) -> list[str]:
    return [e.name for e in run.results.values() if e.family == "patch"]


def test_an_old_history_takes_the_old_branch_and_replays() -> None:
    driver = _driver("1")
    old = driver.decide(driver.run("fix", {}, session_id="s-old").session_id, "APPROVED")
    assert old.output == "old"
    for version in ("1", "1.1"):
        assert replay_recording(_spec(version), _recording(old)).ok
    # Without the marker the deprecated code would take the new branch: a divergence.
    assert replay_recording(_spec("1.2"), _recording(old)).result is ReplayResult.DIVERGED


def test_a_parked_run_continues_on_the_patched_code_through_the_new_branch() -> None:
    driver = _driver("1")
    parked = driver.run("fix", {}, session_id="s-parked")
    assert parked.status is RunStatus.AWAITING_HUMAN
    driver.agents = AgentRegistry([_spec("1.1")])  # the fix is deployed
    driver.crash(parked.session_id)  # evicted: the next message rebuilds it on the new code
    done = driver.decide(parked.session_id, "APPROVED")
    assert done.status is RunStatus.COMPLETED and done.output == "new"
    assert _markers(done) == ["patch:use-c"] and driver.verify(done.session_id).ok
    assert replay_recording(_spec("1.1"), _recording(done)).ok
    assert replay_recording(_spec("1.2"), _recording(done)).ok


def test_new_runs_record_the_marker_and_old_code_diverges_from_them() -> None:
    driver = _driver("1.1")
    new = driver.decide(driver.run("fix", {}, session_id="s-new").session_id, "APPROVED")
    assert new.output == "new" and _markers(new) == ["patch:use-c"]
    assert replay_recording(_spec("1.1"), _recording(new)).ok
    report = replay_recording(_spec("1"), _recording(new))
    assert report.divergence is not None and report.divergence.call_seq == 2
    assert report.divergence.recorded is not None
    assert report.divergence.recorded.name == "patch:use-c"


def test_deprecated_code_records_no_marker() -> None:
    driver = _driver("1.2")
    run = driver.decide(driver.run("fix", {}, session_id="s-dep").session_id, "APPROVED")
    assert run.output == "new" and _markers(run) == []
    assert replay_recording(_spec("1.2"), _recording(run)).ok


def test_a_patch_needs_a_change_id() -> None:
    reg = AgentRegistry()

    @reg.agent("blank")
    async def blank(ctx: StepCtx, value: Any) -> bool:
        return ctx.patched("")

    run = Driver(reg).run("blank", {})
    assert run.status is RunStatus.FAILED and run.error is not None
    assert "change id" in run.error


@pytest.mark.parametrize("version", ["1", "1.1", "1.2"])
def test_every_version_completes_a_fresh_run(version: str) -> None:
    driver = _driver(version)
    run = driver.decide(driver.run("fix", {}).session_id, "APPROVED")
    assert run.status is RunStatus.COMPLETED


def test_old_code_that_stops_before_a_recorded_marker_is_reported_at_the_marker() -> None:
    reg = AgentRegistry()

    @reg.agent("fix", tools=["a", "b", "c"])
    async def shorter(ctx: StepCtx, value: Any) -> str:
        await ctx.tool("a", {})
        await ctx.approval("go?", {}, role="ops")
        return "old"

    driver = _driver("1.1")
    new = driver.decide(driver.run("fix", {}, session_id="s-m").session_id, "APPROVED")
    report = replay_recording(reg.spec("fix"), _recording(new))
    d = report.divergence
    assert d is not None and d.call_seq == 2 and d.issued is None
    assert d.recorded is not None and d.recorded.name == "patch:use-c"
    assert "returned instead" in d.reason
