"""Streamed generations: what a provider assembles from a stream is what it reads unstreamed.

The property (pure, over scripted answers and over how the stream is cut): the fake's events
for a reply, fed to the protocol's assembler, read as the very ``Generation`` the reply
itself reads as — for chat completions and the Messages API, tool calls split across events
included. Then, over loopback HTTP, each provider's ``stream`` against its fake: the same
generation as ``generate``, and the fragments arrive in order and add up to it.
"""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from runplane.core.agents import Generation
from runplane.core.turns import StopReason, ToolCall
from runplane.fakes import FakeAnthropicServer, FakeOpenAIServer
from runplane.fakes._anthropic import Messages
from runplane.fakes._model import Usage, pieces
from runplane.fakes._openai import ChatCompletions
from runplane.providers import AnthropicProvider, ModelReplyError, OpenAIProvider
from runplane.providers._anthropic import read_message
from runplane.providers._openai import _read
from runplane.providers._stream import (
    ChatChunks,
    Delta,
    MessageEvents,
    SSEDecoder,
    SSEEvent,
    StreamError,
)
from runplane.providers._turns import Turn

TOOLS = [
    {"name": "lookup", "description": "find", "parameters": {"type": "object"}},
    {"name": "refund", "description": "pay back", "parameters": {"type": "object"}},
]
PARAMS: dict[str, Any] = {"tools": TOOLS}
TURN = Turn.read("p", "hello", PARAMS)

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=12)
)
arguments = st.dictionaries(st.text(min_size=1, max_size=8), json_scalars, max_size=4)
calls = st.lists(st.tuples(st.sampled_from(["lookup", "refund"]), arguments), max_size=3).map(
    lambda pairs: tuple(ToolCall(f"call-{i}", name, args) for i, (name, args) in enumerate(pairs))
)
generations = st.builds(
    lambda text, tool_calls, max_tokens: Generation(
        text=text,
        tool_calls=tool_calls,
        stop_reason=str(
            StopReason.MAX_TOKENS
            if max_tokens
            else (StopReason.TOOL_CALLS if tool_calls else StopReason.END)
        ),
    ),
    st.text(max_size=60),
    calls,
    st.booleans(),
)
usages = st.builds(Usage, st.integers(0, 10**6), st.integers(0, 10**6))


def _decode(events: tuple[bytes, ...]) -> list[SSEEvent]:
    decoder, out = SSEDecoder(), []
    for line in b"".join(events).decode().split("\n"):
        event = decoder.feed(line)
        if event is not None:
            out.append(event)
    return out


def _feed(assembler: ChatChunks | MessageEvents, events: tuple[bytes, ...]) -> list[Delta]:
    return [d for e in _decode(events) for d in assembler.feed(e)]


@settings(max_examples=150, deadline=None)
@given(generations, usages, st.integers(1, 9))
def test_chat_completions_stream_assembles_the_unstreamed_generation(
    gen: Generation, usage: Usage, size: int
) -> None:
    codec = ChatCompletions()
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True}}
    reply = codec.write(gen, usage, body, 1)
    chunks = ChatChunks()
    deltas = _feed(chunks, codec.events(reply, body, pieces(size)))
    assert chunks.done
    streamed = _read(TURN, chunks.completion())
    assert streamed == _read(TURN, reply)
    assert streamed.text == gen.text and streamed.tool_calls == gen.tool_calls
    assert (streamed.tokens_in, streamed.tokens_out) == (usage.tokens_in, usage.tokens_out)
    assert "".join(d.text for d in deltas if d.kind == "text") == gen.text
    for i, call in enumerate(gen.tool_calls):
        mine = [d for d in deltas if d.kind == "tool_call" and d.index == i]
        assert mine[0].call_id == call.id and mine[0].name == call.name
        assert json.loads("".join(d.arguments for d in mine)) == dict(call.arguments)


@settings(max_examples=150, deadline=None)
@given(generations, usages, st.integers(1, 9))
def test_messages_stream_assembles_the_unstreamed_message(
    gen: Generation, usage: Usage, size: int
) -> None:
    codec = Messages()
    body = {"model": "m", "max_tokens": 5, "stream": True}
    reply = codec.write(gen, usage, body, 1)
    events = MessageEvents()
    deltas = _feed(events, codec.events(reply, body, pieces(size)))
    assert events.message() == reply  # the very message, field for field
    assert read_message(events.message(), TURN) == read_message(reply, TURN)
    assert "".join(d.text for d in deltas if d.kind == "text") == gen.text
    for i, call in enumerate(gen.tool_calls):
        mine = [d for d in deltas if d.kind == "tool_call" and d.index == i]
        assert mine[0].call_id == call.id and mine[0].name == call.name
        assert json.loads("".join(d.arguments for d in mine)) == dict(call.arguments)


def test_sse_decoder_frames_events_and_skips_comments() -> None:
    decoder = SSEDecoder()
    lines = [": keep-alive", "event: ping", "data: {}", "", "data: a", "data: b", "id: 3", ""]
    got = [e for e in map(decoder.feed, lines) if e is not None]
    assert got == [SSEEvent("ping", "{}"), SSEEvent("message", "a\nb")]


@pytest.mark.parametrize(
    ("assembler", "events", "problem"),
    [
        (ChatChunks(), ['{"choices": [{"index": 0, "delta": {"content": "x"}}]}'], "finish"),
        (ChatChunks(), ["not json"], "not JSON"),
        (ChatChunks(), ['{"error": {"message": "overloaded"}}'], "overloaded"),
        (MessageEvents(), ['{"type": "content_block_start", "index": 0}'], "message_start"),
        (
            MessageEvents(),
            ['{"type": "message_start", "message": {}}', '{"type": "message_delta"}'],
            "message_stop",
        ),
    ],
)
def test_a_broken_stream_is_a_named_error(
    assembler: ChatChunks | MessageEvents, events: list[str], problem: str
) -> None:
    with pytest.raises(StreamError, match=problem):
        for data in events:
            assembler.feed(SSEEvent("message", data))
        if isinstance(assembler, ChatChunks):
            assembler.completion()
        else:
            assembler.message()


SCRIPT = [
    Generation(
        text="let me look that up",
        stop_reason="tool_calls",
        tool_calls=(
            ToolCall("c-1", "lookup", {"q": "order 42", "deep": True}),
            ToolCall("c-2", "refund", {"amount": 5}),
        ),
    ),
]


@pytest.mark.parametrize("fake", [FakeOpenAIServer, FakeAnthropicServer])
async def test_a_provider_streams_over_http_what_it_generates(fake: Any) -> None:
    with fake(model=lambda m, t: SCRIPT[0], chunk_delay_s=0.001, split=pieces(4)) as server:
        provider: OpenAIProvider | AnthropicProvider = (
            OpenAIProvider(base_url=server.url, model="m")
            if fake is FakeOpenAIServer
            else AnthropicProvider(name="a", base_url=server.url, model="m")
        )
        plain = await provider.generate("default", "hello", PARAMS)
        deltas: list[Delta] = []
        streamed = await provider.stream("default", "hello", PARAMS, deltas.append)
    assert streamed == plain
    assert streamed.tool_calls == SCRIPT[0].tool_calls and streamed.text == SCRIPT[0].text
    assert server.bodies[1]["stream"] is True and "stream" not in server.bodies[0]
    assert "".join(d.text for d in deltas if d.kind == "text") == SCRIPT[0].text
    args = [d for d in deltas if d.kind == "tool_call" and d.index == 0 and d.arguments]
    assert len(args) > 1  # the call's arguments arrived split
    assert json.loads("".join(d.arguments for d in args)) == {"q": "order 42", "deep": True}


async def test_a_server_that_ignores_stream_is_read_as_unstreamed() -> None:
    with FakeOpenAIServer() as server:
        provider = OpenAIProvider(base_url=server.url, model="m")
        bad_args = {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "lookup", "arguments": "{nope"},
                            }
                        ],
                    },
                }
            ]
        }
        server.respond_next(200, bad_args)  # a whole JSON reply to a stream request
        deltas: list[Delta] = []
        with pytest.raises(ModelReplyError, match="not JSON"):
            await provider.stream("default", "hi", PARAMS, deltas.append)
        server.script("plain")
        server.respond_next(200, {"choices": [{"message": {"content": "whole"}}]})
        got = await provider.stream("default", "hi", {}, deltas.append)
    assert got.text == "whole" and deltas == []
