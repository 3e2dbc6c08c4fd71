"""Scripted models, pure: what a fake model server, or the Driver's ``ScriptedModel``, answers.

A **model function** is any callable ``(messages, tools) -> Generation``: the conversation so
far (provider-neutral ``Message``s) and the tools this turn offers, to the turn's answer (its
text, or the tool calls it proposes) — the idea of Pydantic AI's ``FunctionModel``. It does no
I/O; the fakes put a protocol around it (``FakeOpenAIServer``, ``FakeAnthropicServer``), and
``runplane.testing.ScriptedModel`` a ``ModelProvider`` for the in-memory Driver.

* :func:`scripted` — a list of turns, one per model turn of the conversation: a text, a
  ``Generation``, a list of ``(tool, arguments)`` pairs (the calls of one turn, in parallel,
  ids ``call-<n>-<i>``), or a function ``(messages, tools)`` returning one of those. The turn
  answered is picked by how many of its own turns (assistant messages, the obeyed ones below
  left out) the conversation already holds, not by a counter: a turn asked again (a retry, a
  run recovered after a crash) gets the same answer, as a durable test needs.
* :func:`obeys_instructions` — a model that does what a tool result tells it: a result
  containing ``call NAME {json}`` (``INSTRUCTION: call refund with {"to": "...", "amount":
  5}`` reads too; as text, or inside a JSON string of the result) makes its next turn propose
  exactly that call, if the tool is offered, with id ``inj-<the result's call id>``; each
  result is obeyed once. Otherwise, and after, it answers as the model it wraps does, shown
  the whole conversation (refusals of the obeyed calls included; ``scripted`` goes on with its
  own next turn as if it had never obeyed). It is the injected document's victim, for
  injection tests.
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
Said = str | Generation | Sequence[tuple[str, Mapping[str, Any]]]
# ... or a function of the conversation and the tools offered, answering one of those.
ScriptTurn = Said | Callable[[tuple[Message, ...], tuple[ToolSpec, ...]], Said]

OBEYED_PREFIX = "inj-"  # the ids of the calls an obedient model proposed
# ``call NAME {`` (``INSTRUCTION: call NAME with {`` too): the JSON arguments start at the brace.
_INSTRUCTION = re.compile(r"\bcall\s+([A-Za-z_][\w./-]*)\s*(?:with\s*)?(?=\{)", re.IGNORECASE)


class ScriptExhausted(LookupError):
    """The conversation asked for a turn the script does not have."""


def text(value: str) -> Generation:
    """A turn that answers ``value`` and proposes nothing."""
    return Generation(text=value, stop_reason=str(StopReason.END))


def calls(turn: int, pairs: Sequence[tuple[str, Mapping[str, Any]]]) -> Generation:
    """A turn proposing ``pairs`` in parallel, with ids ``call-{turn}-{i}`` (unique in the
    conversation, the same each time the turn is asked)."""
    return Generation(
        text="",
        tool_calls=tuple(
            ToolCall(id=f"call-{turn}-{i}", name=name, arguments=dict(args))
            for i, (name, args) in enumerate(pairs)
        ),
        stop_reason=str(StopReason.TOOL_CALLS),
    )


def _obeyed(m: Message) -> bool:
    """An assistant message made only of calls an obedient model proposed."""
    return bool(m.tool_calls) and all(c.id.startswith(OBEYED_PREFIX) for c in m.tool_calls)


def scripted(*turns: ScriptTurn) -> ModelFunction:
    """A model answering its turn ``n`` of a conversation with ``turns[n]``."""
    script = tuple(turns)

    def model(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> Generation:
        said = [m for m in messages if m.role is Role.ASSISTANT]
        n = sum(1 for m in said if not _obeyed(m))
        if n >= len(script):
            raise ScriptExhausted(f"the script has {len(script)} turn(s); turn {n} was asked")
        turn = script[n]
        answer = turn(messages, tools) if callable(turn) else turn
        if isinstance(answer, str):
            return text(answer)
        if isinstance(answer, Generation):
            return answer
        # Ids by the conversation's turn count (obeyed turns too): unique in the conversation.
        return calls(len(said), answer)

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
    """``then``, made to obey the instructions planted in tool results not obeyed yet."""

    def model(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> Generation:
        offered = {t.name for t in tools}
        proposed = {c.id for m in messages for c in m.tool_calls}
        planted: list[ToolCall] = []
        for m in messages:
            if (
                m.role is not Role.TOOL
                or m.is_error
                or f"{OBEYED_PREFIX}{m.tool_call_id}" in proposed
            ):
                continue
            found = [(name, args) for name, args in instructions(m.content) if name in offered]
            planted.extend(
                ToolCall(f"{OBEYED_PREFIX}{m.tool_call_id}" + (f"-{k}" if k else ""), name, args)
                for k, (name, args) in enumerate(found)
            )
        if planted:
            return Generation(
                text="", tool_calls=tuple(planted), stop_reason=str(StopReason.TOOL_CALLS)
            )
        return then(messages, tools)

    return model
