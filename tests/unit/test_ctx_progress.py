"""``ctx.progress``: ephemeral notes for the live stream — they journal nothing, take no slot,
and a rebuild that replays the history does not repeat them."""

from __future__ import annotations

from typing import Any

from test_core_poison import _spec, _start

from runplane.core import Outcome, Runtime, StepCtx
from runplane.wire import RunStatus


async def agent(ctx: StepCtx, input: Any) -> Any:
    ctx.progress("reading", done=0)
    await ctx.generate("m", "default", "one")
    ctx.progress("half way", done=1)
    await ctx.generate("m", "default", "two")
    ctx.progress("done", done=2)
    return "ok"


def _said(text: str) -> Outcome:
    return Outcome.success({"text": text, "tokens_in": 0, "tokens_out": 0, "cost_units": 0.0})


def test_progress_notes_reach_the_executor_and_not_the_journal() -> None:
    runtime, step = _start(agent)
    assert runtime.take_progress() == [{"message": "reading", "done": 0}]
    assert runtime.take_progress() == []  # taken once
    call = step.live_calls[0]
    _, plain_step = _start(_quiet)
    # The same records as an agent that says nothing: progress journals nothing.
    assert step.records == plain_step.records
    assert call.call_seq == plain_step.live_calls[0].call_seq  # and takes no call_seq
    step = runtime.complete(call.call_seq, _said("a"), now_ms=3)
    assert runtime.take_progress() == [{"message": "half way", "done": 1}]
    results = {(e.era, e.call_seq): e for e in step.results}

    # A rebuild replays the first generation: its notes are history, not news.
    rebuilt, again = Runtime.restore(_spec(agent), step.snapshot, results, now_ms=4)
    assert rebuilt.take_progress() == []
    done = rebuilt.complete(again.live_calls[0].call_seq, _said("b"), now_ms=5)
    assert rebuilt.take_progress() == [{"message": "done", "done": 2}]
    assert done.end is RunStatus.COMPLETED


async def _quiet(ctx: StepCtx, input: Any) -> Any:
    await ctx.generate("m", "default", "one")
    return None
