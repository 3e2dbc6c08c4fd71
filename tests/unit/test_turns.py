"""The provider-neutral conversation values: round trips through their JSON, invalid shapes
refused in the constructors, and a plain text generation recording what it always did."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.core import Generation
from runplane.core.canonical import canonical_json
from runplane.core.turns import Message, Role, ToolCall, ToolSpec, messages_from_json

NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
ARGS = st.dictionaries(NAMES, st.one_of(st.integers(), st.text(max_size=6), st.booleans()))
CALLS = st.builds(ToolCall, id=NAMES, name=NAMES, arguments=ARGS)
MESSAGES = st.one_of(
    st.builds(Message, role=st.sampled_from([Role.SYSTEM, Role.USER]), content=st.text()),
    st.builds(
        Message,
        role=st.just(Role.ASSISTANT),
        content=st.text(),
        tool_calls=st.lists(CALLS, max_size=3).map(tuple),
    ),
    st.builds(
        Message,
        role=st.just(Role.TOOL),
        content=st.text(),
        tool_call_id=NAMES,
        is_error=st.booleans(),
    ),
)


@given(st.lists(MESSAGES, max_size=6))
def test_messages_round_trip_through_their_json(messages: list[Message]) -> None:
    plain = [m.to_json() for m in messages]
    assert messages_from_json(plain) == tuple(messages)
    canonical_json(plain)  # what a request witness hashes: always encodable


@given(
    st.text(), st.lists(CALLS, max_size=3).map(tuple), st.sampled_from([None, "end", "tool_calls"])
)
def test_a_generation_round_trips_with_its_tool_calls(
    text: str, calls: tuple[ToolCall, ...], stop: str | None
) -> None:
    gen = Generation(text, 3, 4, 0.5, tool_calls=calls, stop_reason=stop)
    assert Generation.from_json(gen.to_json()) == gen


def test_a_plain_generation_records_what_it_did_before_tools() -> None:
    assert Generation("hi", 1, 2).to_json() == {
        "text": "hi",
        "tokens_in": 1,
        "tokens_out": 2,
        "cost_units": 0.0,
    }


def test_a_string_prompt_is_one_user_message() -> None:
    assert messages_from_json("hello") == (Message(Role.USER, "hello"),)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"role": "user", "tool_calls": (ToolCall("1", "t"),)}, "only an assistant"),
        ({"role": "tool"}, "tool_call_id"),
        ({"role": "user", "tool_call_id": "1"}, "tool_call_id"),
        ({"role": "assistant", "is_error": True}, "only a tool message"),
        ({"role": "wizard"}, "wizard"),
    ],
)
def test_invalid_messages_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Message(**kwargs)


def test_invalid_calls_and_specs_are_refused() -> None:
    with pytest.raises(ValueError, match="id and a tool name"):
        ToolCall("", "t")
    with pytest.raises(ValueError, match="JSON object"):
        ToolCall("1", "t", arguments=[1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="object schema"):
        ToolSpec("t", parameters={"type": "string"})
    assert ToolSpec.from_json(ToolSpec("t", "does t").to_json()) == ToolSpec("t", "does t")
