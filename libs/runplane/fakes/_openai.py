"""A fake OpenAI-compatible chat-completions server on loopback.

Speaks ``POST /v1/chat/completions`` as the provider uses it: ``model``, ``messages``,
``tools``, ``tool_choice`` in; one ``choices[0].message`` (``content``, ``tool_calls`` with
``function.arguments`` a JSON string) with its ``finish_reason``, and ``usage`` out. It refuses
with a 400, as the real API does, a request that breaks the protocol: a ``tool`` message that
answers no pending call, an assistant's call left unanswered, arguments that are not a JSON
string, a ``tool_choice`` naming a tool not offered. What it answers is a model function
(``runplane.fakes._script``; ``model=``), or, without one, the texts of ``script()`` and then a
deterministic echo of the last user message, so a test can predict them. A request with
``stream: true`` is answered as chat completions streams (``ChatCompletions.events``).
"""

from __future__ import annotations

import json
from typing import Any

from runplane.core.agents import Generation
from runplane.core.canonical import canonical_json
from runplane.core.turns import Message, Role, StopReason, ToolCall, ToolSpec
from runplane.fakes._http import JSON, Request, Response
from runplane.fakes._model import BadRequest, ModelFake, Split, Usage, sse

_FINISH = {str(StopReason.TOOL_CALLS): "tool_calls", str(StopReason.MAX_TOKENS): "length"}


class ChatCompletions:
    """The chat-completions protocol (``runplane.fakes._model.Codec``)."""

    path = "/v1/chat/completions"

    def listing(self, req: Request) -> Response | None:
        if req.method == "GET" and req.path == "/v1/models":
            return Response(200, {"object": "list", "data": [{"id": "fake-model"}]})
        return None

    def refused(self, req: Request, api_key: str | None) -> Response | None:
        if api_key is not None and req.headers.get("authorization") != f"Bearer {api_key}":
            return self.error(401, "auth", "invalid api key")
        return None

    def error(self, status: int, kind: str, message: str) -> Response:
        return Response(status, {"error": {"message": message, "type": kind}})

    def read(self, body: JSON) -> tuple[tuple[Message, ...], tuple[ToolSpec, ...]]:
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise BadRequest("model must be a non-empty string")
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise BadRequest("messages must be a non-empty list")
        messages: list[Message] = []
        pending: set[str] = set()  # calls of the last assistant message not answered yet
        for i, m in enumerate(raw):
            if not isinstance(m, dict) or m.get("role") not in (
                "system",
                "user",
                "assistant",
                "tool",
            ):
                raise BadRequest("each message needs a role of system, user, assistant or tool")
            if m["role"] == "tool":
                call_id = m.get("tool_call_id")
                if call_id not in pending:
                    raise BadRequest(
                        f"messages[{i}]: a message with role 'tool' must answer a tool call of "
                        f"the preceding assistant message (tool_call_id {call_id!r})"
                    )
                pending.discard(call_id)
                messages.append(Message(Role.TOOL, _text(m, i), tool_call_id=call_id))
                continue
            if pending:
                raise BadRequest(
                    f"messages[{i}]: the tool calls {sorted(pending)} were not answered by "
                    "tool messages"
                )
            calls = _calls(m, i)
            pending = {c.id for c in calls}
            messages.append(Message(Role(m["role"]), _text(m, i), tool_calls=calls))
        return tuple(messages), _tools(body)

    def write(self, gen: Generation, usage: Usage, body: JSON, n: int) -> JSON:
        message: dict[str, Any] = {"role": "assistant", "content": gen.text}
        if gen.tool_calls:
            message["content"] = gen.text or None
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
                }
                for c in gen.tool_calls
            ]
        stop = gen.stop_reason or (str(StopReason.TOOL_CALLS) if gen.tool_calls else None)
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {"index": 0, "message": message, "finish_reason": _FINISH.get(str(stop), "stop")}
            ],
            "usage": {
                "prompt_tokens": usage.tokens_in,
                "completion_tokens": usage.tokens_out,
                "total_tokens": usage.tokens_in + usage.tokens_out,
            },
        }

    def events(self, reply: JSON, body: JSON, split: Split) -> tuple[bytes, ...]:
        """``chat.completion.chunk`` events: the role, the text in pieces, each call opened
        (id, name) then its arguments in pieces, the finish reason, the usage alone last when
        ``stream_options.include_usage`` asks for it, then ``[DONE]``."""
        choice = reply["choices"][0]
        message = choice["message"]
        head = {k: reply[k] for k in ("id", "created", "model")}

        def chunk(delta: JSON, finish: str | None = None) -> bytes:
            one = {"index": 0, "delta": delta, "finish_reason": finish}
            return sse({**head, "object": "chat.completion.chunk", "choices": [one]})

        out = [chunk({"role": "assistant", "content": ""})]
        out.extend(chunk({"content": piece}) for piece in split(message.get("content") or ""))
        for i, call in enumerate(message.get("tool_calls") or []):
            fn = call["function"]
            opening = {"index": i, "id": call["id"], "type": "function"}
            out.append(chunk({"tool_calls": [{**opening, "function": {"name": fn["name"]}}]}))
            out.extend(
                chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                for piece in split(fn["arguments"])
            )
        out.append(chunk({}, choice["finish_reason"]))
        if (body.get("stream_options") or {}).get("include_usage") is True:
            out.append(
                sse(
                    {
                        **head,
                        "object": "chat.completion.chunk",
                        "choices": [],
                        "usage": reply["usage"],
                    }
                )
            )
        out.append(sse("[DONE]"))
        return tuple(out)


def _text(m: JSON, i: int) -> str:
    content = m.get("content")
    if content is not None and not isinstance(content, str):
        raise BadRequest(f"messages[{i}].content must be a string or null")
    return content or ""


def _calls(m: JSON, i: int) -> tuple[ToolCall, ...]:
    raw = m.get("tool_calls")
    if raw is None:
        return ()
    if m["role"] != "assistant" or not isinstance(raw, list) or not raw:
        raise BadRequest(f"messages[{i}]: tool_calls is a non-empty list, on an assistant message")
    calls = []
    for j, c in enumerate(raw):
        fn = c.get("function") if isinstance(c, dict) else None
        if c.get("type") != "function" or not isinstance(fn, dict) or not c.get("id"):
            raise BadRequest(
                f"messages[{i}].tool_calls[{j}]: needs an id, type 'function', function"
            )
        if not isinstance(fn.get("arguments"), str):
            raise BadRequest(f"messages[{i}].tool_calls[{j}].function.arguments must be a string")
        try:
            args = json.loads(fn["arguments"])
            calls.append(ToolCall(str(c["id"]), str(fn.get("name") or ""), args))
        except ValueError as exc:
            raise BadRequest(f"messages[{i}].tool_calls[{j}]: {exc}") from exc
    return tuple(calls)


def _tools(body: JSON) -> tuple[ToolSpec, ...]:
    raw = body.get("tools")
    choice = body.get("tool_choice")
    if raw is None:
        if choice is not None:
            raise BadRequest("tool_choice is only allowed when tools are specified")
        return ()
    if not isinstance(raw, list):
        raise BadRequest("tools must be a list")
    specs = []
    for j, t in enumerate(raw):
        fn = t.get("function") if isinstance(t, dict) else None
        if t.get("type") != "function" or not isinstance(fn, dict):
            raise BadRequest(f"tools[{j}]: needs type 'function' and a function")
        try:
            specs.append(
                ToolSpec(
                    str(fn.get("name") or ""),
                    str(fn.get("description") or ""),
                    fn.get("parameters") or {"type": "object", "properties": {}},
                )
            )
        except ValueError as exc:
            raise BadRequest(f"tools[{j}]: {exc}") from exc
    names = {s.name for s in specs}
    if isinstance(choice, dict):
        named = (choice.get("function") or {}).get("name")
        if choice.get("type") != "function" or named not in names:
            raise BadRequest(f"tool_choice names a function not in tools: {canonical_json(choice)}")
    elif choice is not None and choice not in ("auto", "none", "required"):
        raise BadRequest(f"tool_choice must be auto, none, required or a function, not {choice!r}")
    return tuple(specs)


class FakeOpenAIServer(ModelFake):
    """The chat-completions fake; ``url`` is the base URL a client configures (``…/v1``)."""

    CODEC = ChatCompletions

    @property
    def url(self) -> str:
        return super().url + "/v1"
