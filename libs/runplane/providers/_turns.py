"""What both model providers read from a generation request, and check in its reply.

A generation's request is ``(model, prompt, params)``: the prompt a string or a list of
provider-neutral messages (``runplane.core.turns``), the params may hold ``tools`` (tool spec
JSONs) and ``tool_choice``. Each provider translates the one shape to its protocol; the rules
they share live here, once: what a malformed request is (a ``TerminalError``: sending it again
reproduces it), what a reply may propose (only offered tools), and when a stop reason is
recorded (on a turn that offered tools — a plain text generation records what it always did).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runplane.core.agents import Generation
from runplane.core.turns import (
    Message,
    StopReason,
    ToolCall,
    ToolChoice,
    ToolSpec,
    messages_from_json,
    tool_choice_from_json,
    tools_from_json,
)
from runplane.errors import TerminalError
from runplane.providers._errors import ModelReplyError


@dataclass(frozen=True)
class Turn:
    """One generation request, read: its messages, the tools offered, the choice asked."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    choice: ToolChoice | None
    offers_tools: bool  # the request carried ``tools`` (a tool-calling turn)

    @classmethod
    def read(cls, provider: str, prompt: Any, params: Mapping[str, Any]) -> Turn:
        try:
            messages = messages_from_json(prompt)
            tools = tools_from_json(params.get("tools"))
            choice = tool_choice_from_json(params.get("tool_choice"), tools)
        except (ValueError, KeyError, TypeError) as exc:
            raise TerminalError(
                f"model provider {provider}: bad generation request: {exc}"
            ) from exc
        if not messages:
            raise TerminalError(f"model provider {provider}: a generation needs a message")
        return cls(messages, tools, choice, offers_tools="tools" in params)

    def generation(
        self,
        text: str,
        calls: tuple[ToolCall, ...],
        stop: StopReason | None,
        tokens_in: int,
        tokens_out: int,
    ) -> Generation:
        """The recorded value of the turn; a call to a tool not offered is refused here."""
        offered = {t.name for t in self.tools}
        for call in calls:
            if call.name not in offered:
                raise ModelReplyError(
                    f"the model called tool {call.name!r} (call {call.id!r}), which this turn "
                    f"did not offer (offered: {', '.join(sorted(offered)) or 'none'})"
                )
        if calls and stop is not StopReason.MAX_TOKENS:
            stop = StopReason.TOOL_CALLS  # some servers say "stop" with calls in hand
        return Generation(
            text=text,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            tool_calls=calls,
            stop_reason=str(stop) if self.offers_tools and stop is not None else None,
        )


def tool_call(call_id: Any, name: Any, arguments: Any) -> ToolCall:
    """A proposed call read from a reply; arguments that are not a JSON object are the
    model's mistake, named (``ModelReplyError``), never a crash."""
    if not isinstance(arguments, Mapping):
        raise ModelReplyError(
            f"the model's call {call_id!r} to tool {name!r} has arguments that are not a "
            f"JSON object: {str(arguments)[:200]!r}"
        )
    try:
        return ToolCall(id=str(call_id or ""), name=str(name or ""), arguments=arguments)
    except ValueError as exc:
        raise ModelReplyError(f"the model proposed an unusable tool call: {exc}") from exc
