"""A scripted tool-calling model for the Driver: an agent loop's tests, turn by turn.

    model = ScriptedModel([
        [Call("crm_lookup", {"customer": "c-1"}), Call("fetch_document", {"id": "d-9"})],
        lambda seen: [Call("refund", {"recipient": seen.result("crm_lookup")["iban"],
                                      "amount_eur": 40})],
        "Refunded 40 EUR.",
    ], obey_injections=True)
    driver = Driver(REGISTRY, providers={"scripted": model}, tools=...)

Each turn of the script is the model's answer to one prompt: a string (the final answer), a
list of ``Call`` (proposed together: the loop fans the reads out), or a function of what the
model has ``Seen`` returning either. The reply is a pure function of the prompt (how many
turns it holds, what its tool messages say) — no counter inside — so a crash, a restore or a
replay that asks again gets the same answer, and the test can count calls (``calls``).

``obey_injections``: the model obeys an instruction it reads in a tool result. A tool message
containing ``call NAME {json arguments}`` makes the next turn propose exactly that call (its id
``inj-<the tool message's call id>``), once, before the script goes on — the model every
injection defence must survive; it sees the refusal like any tool error.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runplane.core import Generation, canonical_json
from runplane.core.turns import Message, Role, ToolCall, messages_from_json

__all__ = ["Call", "ScriptedModel", "Seen"]

_INSTRUCTION = re.compile(r"call\s+([A-Za-z_][\w./-]*)\s*(\{.*\})", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Call:
    """A call the scripted model proposes."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Seen:
    """What the model has been shown: the conversation and the tools offered."""

    messages: tuple[Message, ...]
    tools: tuple[str, ...]

    def _named(self) -> list[tuple[str, Message]]:
        names = {c.id: c.name for m in self.messages for c in m.tool_calls}
        return [
            (names.get(m.tool_call_id or "", ""), m) for m in self.messages if m.role is Role.TOOL
        ]

    def result(self, tool: str) -> Any:
        """The last successful result of ``tool``, decoded (KeyError if there is none)."""
        for name, m in reversed(self._named()):
            if name == tool and not m.is_error:
                return json.loads(m.content)
        raise KeyError(f"the model has seen no result of {tool!r}")

    @property
    def errors(self) -> tuple[str, ...]:
        """Every tool error the model has read (refusals included), oldest first."""
        return tuple(m.content for _, m in self._named() if m.is_error)


Turn = str | Sequence[Call]
Script = Sequence[Turn | Callable[[Seen], Turn]]


class ScriptedModel:
    """A ``ModelProvider`` for the Driver that proposes tool calls from a script."""

    def __init__(
        self, script: Script, *, obey_injections: bool = False, name: str = "scripted"
    ) -> None:
        self.name = name
        self._script = list(script)
        self.obey_injections = obey_injections
        self.calls = 0
        self.prompts: list[tuple[Message, ...]] = []  # what each performed turn was sent

    def reply(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        self.calls += 1
        messages = messages_from_json(prompt)
        self.prompts.append(messages)
        tools = tuple(str(t["name"]) for t in params.get("tools") or ())
        turn = sum(1 for m in messages if m.role is Role.ASSISTANT)
        tokens_in = len(canonical_json(prompt).split())
        injected = self._injection(messages) if self.obey_injections else None
        if injected is not None:
            return _proposing((injected,), tokens_in)
        obeyed = sum(
            1
            for m in messages
            if m.role is Role.ASSISTANT and any(c.id.startswith("inj-") for c in m.tool_calls)
        )
        index = turn - obeyed
        step: Turn | Callable[[Seen], Turn] = (
            self._script[index] if index < len(self._script) else "the script has ended"
        )
        said = step(Seen(messages, tools)) if callable(step) else step
        if isinstance(said, str):
            return Generation(said, tokens_in, len(said.split()), stop_reason="end")
        calls = tuple(
            ToolCall(f"call-{turn}-{i}", c.name, dict(c.arguments)) for i, c in enumerate(said)
        )
        return _proposing(calls, tokens_in)

    async def generate(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        return self.reply(model, prompt, params)

    @staticmethod
    def _injection(messages: Sequence[Message]) -> ToolCall | None:
        """The first planted instruction in a tool result not obeyed yet."""
        proposed = {c.id for m in messages for c in m.tool_calls}
        for m in messages:
            if m.role is not Role.TOOL or m.is_error:
                continue
            inj_id = f"inj-{m.tool_call_id}"
            if inj_id in proposed:
                continue
            text = m.content
            with contextlib.suppress(ValueError):  # usually inside a JSON result's string
                text = " ".join(str(v) for v in _strings(json.loads(text)))
            found = _INSTRUCTION.search(text)
            if found is None:
                continue
            try:
                args = json.loads(found.group(2))
            except ValueError:
                continue
            if isinstance(args, dict):
                return ToolCall(inj_id, found.group(1), args)
        return None


def _proposing(calls: tuple[ToolCall, ...], tokens_in: int) -> Generation:
    return Generation("", tokens_in, 5 * len(calls), tool_calls=calls, stop_reason="tool_calls")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
