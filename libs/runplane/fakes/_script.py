"""Scripted models, pure: what a fake model server (or a Driver-side scripted model) answers.

A **model function** is any callable ``(messages, tools) -> Generation``: the conversation so
far (provider-neutral ``Message``s) and the tools this turn offers, to the turn's answer (its
text, or the tool calls it proposes) — the idea of Pydantic AI's ``FunctionModel``. It does no
I/O; the fakes put a protocol around it (``FakeOpenAIServer``, ``FakeAnthropicServer``).

* :func:`scripted` — a list of turns, one per model turn of the conversation: a text, a
  ``Generation``, or a list of ``(tool, arguments)`` pairs (the calls of one turn, in
  parallel). The turn answered is picked by how many assistant messages the conversation
  already holds, not by a counter: a turn asked again (a retry, a run recovered after a
  crash) gets the same answer, as a durable test needs.
* :func:`obeys_instructions` — a model that does what a tool result tells it: a result
  containing ``INSTRUCTION: call refund with {"to": "...", "amount": 5}`` (as text, or inside
  a JSON string of the result) makes its next turn propose exactly that call, if the tool is
  offered; otherwise, and after, it answers as the model it wraps would have answered had it
  never obeyed. It is the injected document's victim, for injection tests.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from runplane.core.agents import Generation
from runplane.core.canonical import canonical_json
from runplane.core.turns import Message, Role, StopReason, ToolCall, ToolSpec

ModelFunction = Callable[[tuple[Message, ...], tuple[ToolSpec, ...]], Generation]
# One scripted turn: a text, a whole Generation, or the (tool, arguments) calls of the turn.
ScriptTurn = str | Generation | Sequence[tuple[str, Mapping[str, Any]]]

OBEYED_PREFIX = "obeyed_"  # the ids of the calls an obedient model proposed
_INSTRUCTION = re.compile(r"INSTRUCTION:\s*call\s+([A-Za-z0-9_./\-]+)\s+with\s+(?=\{)")


class ScriptExhausted(LookupError):
    """The conversation asked for a turn the script does not have."""


def text(value: str) -> Generation:
    """A turn that answers ``value`` and proposes nothing."""
    return Generation(text=value, stop_reason=str(StopReason.END))


def calls(turn: int, pairs: Sequence[tuple[str, Mapping[str, Any]]]) -> Generation:
    """A turn proposing ``pairs`` in parallel, with ids ``call_{turn}_{i}`` (unique in the
    conversation, the same each time the turn is asked)."""
    return Generation(
        text="",
        tool_calls=tuple(
            ToolCall(id=f"call_{turn}_{i}", name=name, arguments=dict(args))
            for i, (name, args) in enumerate(pairs)
        ),
        stop_reason=str(StopReason.TOOL_CALLS),
    )


def scripted(*turns: ScriptTurn) -> ModelFunction:
    """A model answering turn ``n`` of a conversation with ``turns[n]``."""
    script = tuple(turns)

    def model(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> Generation:
        n = sum(1 for m in messages if m.role is Role.ASSISTANT)
        if n >= len(script):
            raise ScriptExhausted(f"the script has {len(script)} turn(s); turn {n} was asked")
        turn = script[n]
        if isinstance(turn, str):
            return text(turn)
        if isinstance(turn, Generation):
            return turn
        return calls(n, turn)

    return model


def echo(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> Generation:
    """The fakes' default: ``echo: `` and the last user message."""
    last = next((m for m in reversed(messages) if m.role is Role.USER), None)
    return Generation(text="echo: " + (last.content if last else ""))


def instructions(content: str) -> list[tuple[str, dict[str, Any]]]:
    """The ``INSTRUCTION: call NAME with {json}`` found in a tool result, each once: in its
    text, and in every string of it when it is JSON (where the planted quotes are escaped)."""
    texts = [content]
    with contextlib.suppress(ValueError):  # not JSON: its text alone
        texts.extend(_strings(json.loads(content)))
    decoder = json.JSONDecoder()
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for t in texts:
        for match in _INSTRUCTION.finditer(t):
            try:
                args, _ = decoder.raw_decode(t, match.end())
            except ValueError:
                continue
            if isinstance(args, dict):
                found.setdefault(canonical_json([match.group(1), args]), (match.group(1), args))
    return list(found.values())


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def obeys_instructions(then: ModelFunction) -> ModelFunction:
    """``then``, made to obey the instructions planted in the newest tool results."""

    def model(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> Generation:
        offered = {t.name for t in tools}
        last_assistant = max(
            (i for i, m in enumerate(messages) if m.role is Role.ASSISTANT), default=-1
        )
        newest = [m for m in messages[last_assistant + 1 :] if m.role is Role.TOOL]
        planted = [
            (name, args)
            for m in newest
            for name, args in instructions(m.content)
            if name in offered
        ]
        if planted:
            n = sum(1 for m in messages if m.role is Role.ASSISTANT)
            return Generation(
                text="",
                tool_calls=tuple(
                    ToolCall(id=f"{OBEYED_PREFIX}{n}_{i}", name=name, arguments=args)
                    for i, (name, args) in enumerate(planted)
                ),
                stop_reason=str(StopReason.TOOL_CALLS),
            )
        return then(_unobeyed(messages), tools)

    return model


def _unobeyed(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """The conversation as if the obeyed turns had never happened: their assistant messages
    and the results of their calls left out, so the wrapped model's turns line up."""
    obeyed = {
        c.id
        for m in messages
        if m.tool_calls and all(c.id.startswith(OBEYED_PREFIX) for c in m.tool_calls)
        for c in m.tool_calls
    }
    return tuple(
        m
        for m in messages
        if not (m.tool_calls and all(c.id in obeyed for c in m.tool_calls))
        and not (m.role is Role.TOOL and m.tool_call_id in obeyed)
    )
