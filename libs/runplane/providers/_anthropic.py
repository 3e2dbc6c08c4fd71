"""An adapter for Anthropic's Messages API, whose shape differs from chat completions.

``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version`` headers; the
system prompt is a field of its own, ``max_tokens`` is required, and the reply is a list of
content blocks. One attempt per call, classified by reach (``runplane.providers._errors``),
like every provider: timeouts and retries are the executor's.

Tool calling is the protocol's own: the offered tools go as ``tools`` (name, description,
``input_schema``) with ``tool_choice`` (``auto``, ``any``, ``none``, or ``tool`` with its
name); the reply's ``tool_use`` blocks (id, name, input) become the generation's
``tool_calls``; an assistant message with calls goes back as ``text`` + ``tool_use`` blocks,
and the results of one turn's calls — consecutive ``tool`` messages — as ``tool_result``
blocks (``is_error`` when the call failed or was refused) in one user message, the roles
alternating as the protocol requires.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from runplane.core.agents import Generation
from runplane.core.turns import Message, Role, StopReason, ToolChoice, ToolSpec
from runplane.errors import ConfigError
from runplane.providers._errors import (
    ModelReplyError,
    PeerCallError,
    Reach,
    classify_status,
    classify_transport,
)
from runplane.providers._sse import post_events
from runplane.providers._stream import DeltaSink, MessageEvents, StreamError
from runplane.providers._turns import Turn, tool_call

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024

# stop_reason → the neutral one (pause_turn: a server tool paused; refusal: it declined).
_STOP = {
    "end_turn": StopReason.END,
    "stop_sequence": StopReason.END,
    "pause_turn": StopReason.END,
    "refusal": StopReason.END,
    "tool_use": StopReason.TOOL_CALLS,
    "max_tokens": StopReason.MAX_TOKENS,
}
_CHOICE = {"auto": "auto", "none": "none", "required": "any", "tool": "tool"}


class AnthropicProvider:
    """Claude models behind the Messages API (``runplane.core.ModelProvider``)."""

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        model: str,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"model provider {name}: base_url must be http(s), got {base_url!r}")
        if not model:
            raise ConfigError(f"model provider {name}: a model name is required")
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self._client = client

    def request_body(self, model: str, prompt: Any, params: Mapping[str, Any]) -> dict[str, Any]:
        """The Messages API body for ``ctx.generate``'s (model, prompt, params)."""
        return self._body(Turn.read(self.name, prompt, params), model, params)

    def _body(self, turn: Turn, model: str, params: Mapping[str, Any]) -> dict[str, Any]:
        # The Messages API takes the system prompt apart from the turns.
        system = [m.content for m in turn.messages if m.role is Role.SYSTEM]
        body: dict[str, Any] = {
            "model": self.model if model in ("", "default") else model,
            "max_tokens": int(params.get("max_tokens") or DEFAULT_MAX_TOKENS),
            "messages": _messages(m for m in turn.messages if m.role is not Role.SYSTEM),
        }
        if system:
            body["system"] = "\n\n".join(system)
        if params.get("temperature") is not None:
            body["temperature"] = params["temperature"]
        if turn.offers_tools:
            body["tools"] = [_tool(t) for t in turn.tools]
            if turn.choice is not None:
                body["tool_choice"] = _choice(turn.choice)
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    async def generate(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        turn = Turn.read(self.name, prompt, params)
        headers = self._headers()
        body = self._body(turn, model, params)
        try:
            if self._client is None:
                async with httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0)) as own:
                    response = await own.post(
                        f"{self.base_url}/v1/messages", json=body, headers=headers
                    )
            else:
                response = await self._client.post(
                    f"{self.base_url}/v1/messages", json=body, headers=headers
                )
        except httpx.TransportError as exc:
            raise classify_transport(exc) from exc
        if response.status_code // 100 != 2:
            raise classify_status(response)
        return parse_message(response, turn)

    async def stream(
        self, model: str, prompt: Any, params: Mapping[str, Any], sink: DeltaSink
    ) -> Generation:
        """``generate``, streamed (``stream: true``): each text and ``tool_use`` input
        fragment goes to ``sink`` as it arrives; the events are assembled into the message a
        non-streaming call returns, read by the same code (:func:`read_message`)."""
        turn = Turn.read(self.name, prompt, params)
        body = {**self._body(turn, model, params), "stream": True}
        events = MessageEvents()
        url = f"{self.base_url}/v1/messages"
        try:
            if self._client is None:
                async with httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0)) as own:
                    whole = await post_events(own, url, body, self._headers(), events.feed, sink)
            else:
                whole = await post_events(
                    self._client, url, body, self._headers(), events.feed, sink
                )
            data = events.message() if whole is None else whole
        except StreamError as exc:
            raise _unreadable(exc) from exc
        return read_message(data, turn)


def parse_message(response: httpx.Response, turn: Turn) -> Generation:
    """The generation a Messages API reply records."""
    try:
        data = response.json()
    except ValueError as exc:
        raise _unreadable(exc) from exc
    return read_message(data, turn)


def read_message(data: Any, turn: Turn) -> Generation:
    """The generation a ``message`` records (streamed or not): its text blocks joined, its
    ``tool_use`` blocks as tool calls in their order, its usage and stop reason."""
    try:
        blocks = data["content"]
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        calls = tuple(
            tool_call(b.get("id"), b.get("name"), b.get("input", {}))
            for b in blocks
            if b.get("type") == "tool_use"
        )
        usage = data.get("usage") or {}
        tokens = (int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)))
        stop = _STOP.get(str(data.get("stop_reason")))
    except ModelReplyError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _unreadable(exc) from exc
    return turn.generation(text, calls, stop, *tokens)


def _unreadable(exc: Exception) -> PeerCallError:
    # 2xx but unreadable: it acted, and repeating a generation is harmless.
    return PeerCallError(f"unreadable message: {exc!r}", reach=Reach.IN_DOUBT, retryable=True)


def _messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Neutral messages as Messages API turns. A plain message stays ``{role, content}`` (a
    string), exactly what was sent before tools existed; the results of one turn's calls are
    ``tool_result`` blocks of one user message, and a user message right after them joins it
    (after the results, which the protocol wants first)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role is Role.TOOL:
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m.tool_call_id,
                "content": m.content,
            }
            if m.is_error:
                block["is_error"] = True
            if out and _is_results(out[-1]):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.role is Role.USER and out and _is_results(out[-1]):
            if m.content:
                out[-1]["content"].append({"type": "text", "text": m.content})
        elif m.tool_calls:
            blocks: list[dict[str, Any]] = (
                [{"type": "text", "text": m.content}] if m.content else []
            )
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments)}
                for c in m.tool_calls
            )
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": str(m.role), "content": m.content})
    return out


def _is_results(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and bool(content)
        and content[0].get("type") == "tool_result"
    )


def _tool(t: ToolSpec) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": t.name}
    if t.description:
        tool["description"] = t.description
    tool["input_schema"] = dict(t.parameters)
    return tool


def _choice(choice: ToolChoice) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _CHOICE[choice.mode]}
    if choice.name is not None:
        out["name"] = choice.name
    return out
