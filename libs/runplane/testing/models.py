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
model has ``Seen`` returning either. ``ScriptedModel`` is a ``ModelProvider`` around a model
function of the fakes (``runplane.fakes.scripted``, ``obeys_instructions``): the same turn
picker and the same injections as a fake model server, so the reply is a pure function of the
prompt (how many turns it holds, what its tool messages say) — no counter inside — and a
crash, a restore or a replay that asks again gets the same answer; the test can count calls
(``calls``). ``model``: the model function it answers from (give one instead of a script to
write a turn's logic by hand, as Pydantic AI's ``FunctionModel`` allows). Usage is counted
here: tokens in, the prompt's words; out, the answer's words, or five per proposed call.

``obey_injections``: the model obeys an instruction it reads in a tool result. A tool message
containing ``call NAME {json arguments}`` makes the next turn propose exactly that call (its id
``inj-<the tool message's call id>``), once, before the script goes on — the model every
injection defence must survive; it sees the refusal like any tool error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from runplane.core import Generation, canonical_json
from runplane.core.turns import Message, Role, ToolSpec, messages_from_json
from runplane.fakes import ModelFunction, ScriptExhausted, obeys_instructions, scripted

__all__ = ["Call", "ScriptedModel", "Seen"]


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


def _said(turn: Turn) -> str | list[tuple[str, Mapping[str, Any]]]:
    return turn if isinstance(turn, str) else [(c.name, c.arguments) for c in turn]


def _turn(step: Turn | Callable[[Seen], Turn]) -> Any:
    """A script's turn as the fakes' ``scripted`` takes it."""
    if not callable(step):
        return _said(step)

    def answer(messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> Any:
        return _said(step(Seen(messages, tuple(t.name for t in tools))))

    return answer


class ScriptedModel:
    """A ``ModelProvider`` for the Driver that proposes tool calls from a script."""

    def __init__(
        self,
        script: Script = (),
        *,
        obey_injections: bool = False,
        name: str = "scripted",
        model: ModelFunction | None = None,
    ) -> None:
        self.name = name
        self.obey_injections = obey_injections
        answers = scripted(*map(_turn, script)) if model is None else model
        self.model = obeys_instructions(answers) if obey_injections else answers
        self.calls = 0
        self.prompts: list[tuple[Message, ...]] = []  # what each performed turn was sent

    def reply(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        self.calls += 1
        messages = messages_from_json(prompt)
        self.prompts.append(messages)
        tools = tuple(ToolSpec.from_json(t) for t in params.get("tools") or ())
        try:
            said = self.model(messages, tools)
        except ScriptExhausted:
            said = Generation("the script has ended", stop_reason="end")
        out = 5 * len(said.tool_calls) if said.tool_calls else len(said.text.split())
        return replace(said, tokens_in=len(canonical_json(prompt).split()), tokens_out=out)

    async def generate(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        return self.reply(model, prompt, params)
