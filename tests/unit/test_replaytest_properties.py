"""Replay testing, as properties: for any recorded call sequence, the recording code replays
OK, and changing the request of call i (or dropping the calls from i on) is reported at
exactly call_seq i."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.core import AgentRegistry, AgentSpec, StepCtx
from runplane.core.engine import ReplayResult, attach_requests, replay_recording
from runplane.core.recording import Recording
from runplane.testing import Driver

CALLS = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3)), min_size=1, max_size=8)


def _spec(
    calls: list[tuple[str, int]], change: int | None = None, stop: int | None = None
) -> AgentSpec:
    reg = AgentRegistry()

    @reg.agent("seq", tools=["a", "b"])
    async def seq(ctx: StepCtx, value: Any) -> int:
        total = 0
        for i, (tool, n) in enumerate(calls):
            if i == stop:
                break
            args = {"n": n, "changed": True} if i == change else {"n": n}
            total += (await ctx.tool(tool, args))["n"]
        return total

    return reg.spec("seq")


def _record(calls: list[tuple[str, int]]) -> Recording:
    driver = Driver(_spec(calls), tools={t: (lambda args, key: {"n": args["n"]}) for t in "ab"})
    run = driver.run("seq", {}, session_id="s-prop")
    return attach_requests(_spec(calls), Recording(run.snapshot, run.journal, run.results))


@settings(max_examples=40, deadline=None)
@given(CALLS, st.data())
def test_the_first_divergence_is_where_the_code_changed(
    calls: list[tuple[str, int]], data: st.DataObject
) -> None:
    rec = _record(calls)
    assert replay_recording(_spec(calls), rec).ok
    i = data.draw(st.integers(0, len(calls) - 1))
    changed = replay_recording(_spec(calls, change=i), rec)
    assert changed.result is ReplayResult.DIVERGED and changed.divergence is not None
    assert changed.divergence.call_seq == i
    d = changed.divergence
    assert d.recorded is not None and d.issued is not None
    assert d.recorded.request["args"] == {"n": calls[i][1]}
    assert d.issued.request["args"] == {"n": calls[i][1], "changed": True}
    stopped = replay_recording(_spec(calls, stop=i), rec)
    assert stopped.divergence is not None and stopped.divergence.call_seq == i
    assert stopped.divergence.issued is None
