"""A fake Anthropic Messages API server on loopback.

Speaks ``POST /v1/messages`` as the provider uses it: ``x-api-key`` and ``anthropic-version``
headers; ``model``, ``max_tokens`` (required), top-level ``system``, ``messages`` whose content
is a string or blocks (``text``, ``tool_use``, ``tool_result``), ``tools`` (``input_schema``)
and ``tool_choice`` in; ``content`` blocks (``text``, ``tool_use`` with its ``input``),
``stop_reason`` and ``usage`` out. It refuses with a 400, as the real API does, what breaks the
protocol: a ``system`` role among the messages, a ``tool_result`` not in the user message right
after the assistant message that called it, a call left unanswered there, results after other
content, a ``tool_choice`` naming a tool not offered. Its answers come from a model function,
or the texts of ``script()`` and then the echo (``runplane.fakes._model``). A request with
``stream: true`` is answered as the Messages API streams (``Messages.events``).
"""

from __future__ import annotations

import json
from typing import Any

from runplane.core.agents import Generation
from runplane.core.turns import Message, Role, StopReason, ToolCall, ToolSpec
from runplane.fakes._http import JSON, Request, Response
from runplane.fakes._model import BadRequest, ModelFake, Split, Usage, sse

_STOP = {str(StopReason.TOOL_CALLS): "tool_use", str(StopReason.MAX_TOKENS): "max_tokens"}


class Messages:
    """The Messages protocol (``runplane.fakes._model.Codec``)."""

    path = "/v1/messages"

    def listing(self, req: Request) -> Response | None:
        return None

    def refused(self, req: Request, api_key: str | None) -> Response | None:
        if api_key is not None and req.headers.get("x-api-key") != api_key:
            return self.error(401, "authentication_error", "invalid x-api-key")
        if not req.headers.get("anthropic-version"):
            return self.error(400, "invalid_request_error", "anthropic-version header required")
        return None

    def error(self, status: int, kind: str, message: str) -> Response:
        return Response(status, {"type": "error", "error": {"type": kind, "message": message}})

    def read(self, body: JSON) -> tuple[tuple[Message, ...], tuple[ToolSpec, ...]]:
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise BadRequest("model: a non-empty string is required")
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            raise BadRequest("max_tokens: a positive integer is required")
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise BadRequest("messages: a non-empty list is required")
        out: list[Message] = []
        system = body.get("system")
        if system is not None:
            if not isinstance(system, str):
                raise BadRequest("system: a string")
            out.append(Message(Role.SYSTEM, system))
        pending: set[str] = set()
        for i, m in enumerate(raw):
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
                raise BadRequest(f"messages.{i}.role: 'user' or 'assistant' (system is top-level)")
            blocks = _blocks(m.get("content"), i)
            if m["role"] == "assistant":
                if pending:
                    raise BadRequest(_unanswered(i, pending))
                calls = tuple(_call(b, i) for b in blocks if b["type"] == "tool_use")
                pending = {c.id for c in calls}
                text = "".join(str(b.get("text", "")) for b in blocks if b["type"] == "text")
                out.append(Message(Role.ASSISTANT, text, tool_calls=calls))
                continue
            out.extend(_user(blocks, i, pending))
            pending = set()
        if pending:
            raise BadRequest(_unanswered(len(raw), pending))
        return tuple(out), _tools(body)

    def write(self, gen: Generation, usage: Usage, body: JSON, n: int) -> JSON:
        content: list[dict[str, Any]] = []
        if gen.text or not gen.tool_calls:
            content.append({"type": "text", "text": gen.text})
        content.extend(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments)}
            for c in gen.tool_calls
        )
        stop = gen.stop_reason or (str(StopReason.TOOL_CALLS) if gen.tool_calls else None)
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": _STOP.get(str(stop), "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": usage.tokens_in, "output_tokens": usage.tokens_out},
        }

    def events(self, reply: JSON, body: JSON, split: Split) -> tuple[bytes, ...]:
        """The Messages API's events: ``message_start`` (no content yet, input usage), per
        block ``content_block_start``, its ``text_delta`` / ``input_json_delta`` pieces and
        ``content_block_stop``, then ``message_delta`` (stop reason, output usage) and
        ``message_stop``."""
        usage = reply["usage"]
        start = {
            **reply,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1},
        }
        out = [sse({"type": "message_start", "message": start}, "message_start")]
        for i, block in enumerate(reply["content"]):
            if block["type"] == "text":
                opening: JSON = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": p} for p in split(block["text"])]
            else:
                opening = {**block, "input": {}}
                raw = json.dumps(block["input"])
                deltas = [{"type": "input_json_delta", "partial_json": p} for p in split(raw)]
            out.append(
                sse(
                    {"type": "content_block_start", "index": i, "content_block": opening},
                    "content_block_start",
                )
            )
            out.extend(
                sse({"type": "content_block_delta", "index": i, "delta": d}, "content_block_delta")
                for d in deltas
            )
            out.append(sse({"type": "content_block_stop", "index": i}, "content_block_stop"))
        ending = {"stop_reason": reply["stop_reason"], "stop_sequence": reply["stop_sequence"]}
        out.append(
            sse(
                {
                    "type": "message_delta",
                    "delta": ending,
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
                "message_delta",
            )
        )
        out.append(sse({"type": "message_stop"}, "message_stop"))
        return tuple(out)


def _unanswered(i: int, pending: set[str]) -> str:
    return (
        f"messages.{i}: tool_use ids were found without tool_result blocks immediately after: "
        f"{', '.join(sorted(pending))}"
    )


def _blocks(content: Any, i: int) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise BadRequest(f"messages.{i}.content: a string or a list of content blocks")
    for j, b in enumerate(content):
        if b.get("type") not in ("text", "tool_use", "tool_result"):
            raise BadRequest(f"messages.{i}.content.{j}.type: {b.get('type')!r} is not supported")
        if b["type"] == "text" and not isinstance(b.get("text"), str):
            raise BadRequest(f"messages.{i}.content.{j}.text: a string")
    return content


def _call(b: dict[str, Any], i: int) -> ToolCall:
    if not isinstance(b.get("input"), dict):
        raise BadRequest(f"messages.{i}: a tool_use block's input is an object")
    try:
        return ToolCall(str(b.get("id") or ""), str(b.get("name") or ""), b["input"])
    except ValueError as exc:
        raise BadRequest(f"messages.{i}: {exc}") from exc


def _user(blocks: list[dict[str, Any]], i: int, pending: set[str]) -> list[Message]:
    """A user turn: its tool results first (each answering a call of the turn before, every
    such call answered), then its text."""
    out: list[Message] = []
    texts: list[str] = []
    answered: set[str] = set()
    for j, b in enumerate(blocks):
        if b["type"] == "tool_use":
            raise BadRequest(f"messages.{i}.content.{j}: tool_use is an assistant's block")
        if b["type"] == "text":
            texts.append(b["text"])
            continue
        if texts:
            raise BadRequest(f"messages.{i}.content.{j}: tool_result blocks must come first")
        use_id = b.get("tool_use_id")
        if use_id not in pending or use_id in answered:
            raise BadRequest(
                f"messages.{i}.content.{j}: unexpected tool_use_id {use_id!r} in tool_result "
                "blocks: each must answer a tool_use block of the previous message"
            )
        answered.add(use_id)
        content = b.get("content", "")
        if isinstance(content, list):
            content = "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        if not isinstance(content, str):
            raise BadRequest(f"messages.{i}.content.{j}.content: a string or text blocks")
        out.append(
            Message(Role.TOOL, content, tool_call_id=use_id, is_error=b.get("is_error") is True)
        )
    if pending - answered:
        raise BadRequest(_unanswered(i, pending - answered))
    if texts or not out:
        out.append(Message(Role.USER, "".join(texts)))
    return out


def _tools(body: JSON) -> tuple[ToolSpec, ...]:
    raw = body.get("tools") or []
    if not isinstance(raw, list):
        raise BadRequest("tools: a list")
    specs = []
    for j, t in enumerate(raw):
        if not isinstance(t, dict) or not isinstance(t.get("input_schema"), dict):
            raise BadRequest(f"tools.{j}: needs a name and an input_schema")
        try:
            specs.append(
                ToolSpec(
                    str(t.get("name") or ""), str(t.get("description") or ""), t["input_schema"]
                )
            )
        except ValueError as exc:
            raise BadRequest(f"tools.{j}: {exc}") from exc
    choice = body.get("tool_choice")
    if choice is not None:
        kind = choice.get("type") if isinstance(choice, dict) else None
        if kind not in ("auto", "any", "none", "tool"):
            raise BadRequest(f"tool_choice.type: auto, any, none or tool, not {kind!r}")
        if kind == "tool" and choice.get("name") not in {s.name for s in specs}:
            raise BadRequest(f"tool_choice.name: {choice.get('name')!r} is not in tools")
    return tuple(specs)


class FakeAnthropicServer(ModelFake):
    """The Messages API fake; ``url`` is the base URL a client configures."""

    CODEC = Messages
