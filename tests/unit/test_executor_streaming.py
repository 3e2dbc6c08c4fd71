"""The executor's live stream, without a broker: what a live call publishes, attempt by attempt,
and the facts a step's journal records say once committed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runplane.core import Generation, LiveCall
from runplane.core.agents import Recovery, RetryPolicy
from runplane.core.turns import ToolCall
from runplane.providers import DeltaSink, PeerCallError, Reach
from runplane.providers._stream import Delta
from runplane.wire import (
    JournalKind,
    JournalRecord,
    Label,
    Sensitivity,
    StreamEvent,
    StreamKind,
    Trust,
)
from services.executor.calls import Performer
from services.executor.live import CallStatus
from services.executor.streaming import NO_CALL, RunStreams

GEN = Generation(
    text="hello there",
    tool_calls=(ToolCall("c-1", "lookup", {"q": "x"}),),
    stop_reason="tool_calls",
)


class Streamy:
    """A streaming provider: two text fragments, a call in two pieces; fails ``fail`` times
    after its first fragment (a connection cut mid-generation)."""

    name = "m"

    def __init__(self, fail: int = 0) -> None:
        self.fail = fail

    async def generate(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        return GEN

    async def stream(
        self, model: str, prompt: Any, params: Mapping[str, Any], sink: DeltaSink
    ) -> Generation:
        sink(Delta("text", text="hello"))
        if self.fail:
            self.fail -= 1
            raise PeerCallError("cut", reach=Reach.IN_DOUBT, retryable=True)
        sink(Delta("text", text=" there"))
        sink(Delta("tool_call", index=0, call_id="c-1", name="lookup"))
        sink(Delta("tool_call", index=0, arguments='{"q": "x"}'))
        return GEN


def _call(family: str = "generation", target: str = "m") -> LiveCall:
    return LiveCall(
        session_id="r-1",
        era=0,
        call_seq=3,
        family=family,
        name=f"{family}:{target}",
        target=target,
        request={"model": "default", "prompt": "hi", "params": {}},
        witness="0" * 64,
        mutating=False,
        recovery=Recovery.RETRY,
        retry=RetryPolicy(max_attempts=3, initial_backoff_s=0.0, max_backoff_s=0.0),
        timeout_s=5.0,
        announce_first=True,
    )


def _performer(provider: Any, events: list[StreamEvent], clock: list[int]) -> Performer:
    def wall_ms() -> int:
        clock[0] += 1
        return clock[0]

    return Performer(
        tools={},
        providers={"m": provider},
        max_inflight=4,
        call_timeout_s=5.0,
        streams=RunStreams(events.append, wall_ms),
    )


async def test_a_generation_streams_its_fragments_then_its_proposals() -> None:
    events: list[StreamEvent] = []
    performer = _performer(Streamy(), events, [1000])
    await performer.perform("r-1", None, _call())  # type: ignore[arg-type]
    assert performer.completions[0].outcome.status is CallStatus.OK
    assert performer.completions[0].outcome.value == GEN
    kinds = [e.kind for e in events]
    assert kinds == [
        StreamKind.TURN_STARTED,
        StreamKind.TEXT_DELTA,
        StreamKind.TEXT_DELTA,
        StreamKind.TOOL_CALL_DELTA,
        StreamKind.TOOL_CALL_DELTA,
        StreamKind.TOOL_CALL_PROPOSED,
    ]
    assert [e.seq for e in events] == list(range(6))
    assert {(e.session_id, e.era, e.call_seq) for e in events} == {("r-1", 0, 3)}
    assert len({e.attempt for e in events}) == 1
    text = "".join(json.loads(e.payload_json)["text"] for e in events[1:3])
    assert text == GEN.text
    assert json.loads(events[-1].payload_json)["arguments"] == {"q": "x"}


async def test_a_retried_generation_is_a_new_attempt_with_its_own_seq() -> None:
    events: list[StreamEvent] = []
    clock = [1000]
    performer = _performer(Streamy(fail=1), events, clock)
    await performer.perform("r-1", None, _call())  # type: ignore[arg-type]
    attempts = sorted({e.attempt for e in events})
    assert len(attempts) == 2
    first = [e for e in events if e.attempt == attempts[0]]
    second = [e for e in events if e.attempt == attempts[1]]
    assert [e.kind for e in first] == [StreamKind.TURN_STARTED, StreamKind.TEXT_DELTA]
    assert [e.seq for e in second] == list(range(len(second)))
    assert second[-1].kind is StreamKind.TOOL_CALL_PROPOSED


def test_attempts_are_strictly_increasing_within_one_millisecond() -> None:
    streams = RunStreams(lambda e: None, lambda: 5)
    stamps = [streams.attempt("r", 0, 1).attempt for _ in range(3)]
    assert stamps == sorted(set(stamps)) and len(stamps) == 3


def _record(
    seq: int, kind: JournalKind, call_seq: int | None = None, name: str | None = None, **attrs: str
) -> JournalRecord:
    return JournalRecord(
        session_id="r-1",
        seq=seq,
        era=0,
        kind=kind,
        call_seq=call_seq,
        name=name,
        stamp_ms=1,
        prev_hash="0" * 64,
        hash="1" * 64,
        label=Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=()),
        attrs=attrs,
    )


def test_journaled_facts_become_stream_events() -> None:
    events: list[StreamEvent] = []
    streams = RunStreams(events.append, lambda: 7)
    streams.journaled(
        "r-1",
        [
            _record(5, JournalKind.EFFECT_ANNOUNCED),
            _record(6, JournalKind.EFFECT_RECORDED, call_seq=4, name="refund", gate="refused"),
            _record(7, JournalKind.RUN_PARKED, parked_on="TASK"),
            _record(8, JournalKind.RUN_RESUMED),
            _record(9, JournalKind.RUN_COMPLETED),
        ],
    )
    assert [e.kind for e in events] == [
        StreamKind.TOOL_CALL_REFUSED,
        StreamKind.PARKED,
        StreamKind.RESUMED,
        StreamKind.ENDED,
    ]
    assert events[0].call_seq == 4 and json.loads(events[0].payload_json)["name"] == "refund"
    facts = events[1:]
    assert {e.call_seq for e in facts} == {NO_CALL} and [e.seq for e in facts] == [0, 1, 2]
    assert json.loads(events[-1].payload_json)["status"] == "completed"
