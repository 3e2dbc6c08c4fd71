"""Streamed generations, pure: server-sent events in, the fragments and the whole reply out.

A provider asked to stream reads the reply as server-sent events and hands every fragment to
a :data:`DeltaSink` as it arrives (a :class:`Delta`: a piece of text, or a piece of a proposed
tool call). The fragments are a view for people watching; what is *recorded* is the assembled
reply, and it is assembled here into exactly the JSON the protocol's non-streaming reply would
have been, so each provider reads it with the very code that reads its non-streaming reply —
a streamed generation and an unstreamed one of the same answer are the same ``Generation``.

* :class:`SSEDecoder` — the event-stream framing (``event:``, ``data:`` lines, a blank line
  ends an event; comments and ``retry:`` ignored), fed line by line.
* :class:`ChatChunks` — chat completions' ``chat.completion.chunk`` objects (``stream: true``
  with ``stream_options.include_usage``): ``choices[0].delta.content``, ``delta.tool_calls``
  fragments by ``index`` (the first names ``id`` and ``function.name``, later ones append to
  ``function.arguments``), ``finish_reason``, and the usage-only last chunk (empty
  ``choices``) before ``data: [DONE]``.
* :class:`MessageEvents` — the Messages API's events: ``message_start`` (input usage),
  ``content_block_start`` / ``content_block_delta`` (``text_delta``, ``input_json_delta``) /
  ``content_block_stop``, ``message_delta`` (stop reason, output usage), ``message_stop``;
  ``ping`` ignored, ``error`` raised.

Nothing here does I/O; a malformed stream is a ``StreamError`` (a ``ValueError``) the
provider reports as an unreadable reply, like a malformed JSON body.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from runplane.core.agents import Generation


class StreamError(ValueError):
    """A reply stream that breaks its protocol."""


@dataclass(frozen=True)
class Delta:
    """One fragment of a generation as it arrives.

    ``kind`` ``text``: ``text`` is the next piece of the reply's text. ``kind`` ``tool_call``:
    a piece of the proposed call at position ``index`` of the turn — its ``call_id`` and
    ``name`` on the fragment that opens it, ``arguments`` the next piece of its JSON."""

    kind: str
    text: str = ""
    index: int = 0
    call_id: str = ""
    name: str = ""
    arguments: str = ""

    def to_json(self) -> dict[str, Any]:
        if self.kind == "text":
            return {"text": self.text}
        return {
            "index": self.index,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
        }


DeltaSink = Callable[[Delta], None]


@runtime_checkable
class StreamingProvider(Protocol):
    """A model provider that can also stream (both of ours do; a provider that cannot is
    called with ``generate``, and its generation simply arrives whole)."""

    name: str

    async def stream(
        self, model: str, prompt: Any, params: Mapping[str, Any], sink: DeltaSink
    ) -> Generation: ...


@dataclass(frozen=True)
class SSEEvent:
    event: str
    data: str


@dataclass
class SSEDecoder:
    """The event-stream framing, fed one line at a time (without its line ending)."""

    _event: str = ""
    _data: list[str] = field(default_factory=list)

    def feed(self, line: str) -> SSEEvent | None:
        """The event this line completes (a blank line after ``data:``), or ``None``."""
        if line == "":
            if not self._data:
                self._event = ""
                return None
            out = SSEEvent(self._event or "message", "\n".join(self._data))
            self._event, self._data = "", []
            return out
        if line.startswith(":"):
            return None  # a comment (a keep-alive)
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None  # id:, retry: and unknown fields mean nothing to a reply


def _obj(data: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise StreamError(f"an event's data is not JSON: {data[:200]!r}") from exc
    if not isinstance(value, dict):
        raise StreamError(f"an event's data is not a JSON object: {data[:200]!r}")
    return value


@dataclass
class ChatChunks:
    """Chat-completion chunks, assembled into the ``chat.completion`` they stream."""

    _text: list[str] = field(default_factory=list)
    _calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    _finish: str | None = None
    _usage: dict[str, Any] | None = None
    _model: str = ""
    done: bool = False

    def feed(self, event: SSEEvent) -> list[Delta]:
        """The fragments one ``data:`` event carries."""
        if event.data.strip() == "[DONE]":
            self.done = True
            return []
        chunk = _obj(event.data)
        if "error" in chunk:
            raise StreamError(f"the stream reported an error: {str(chunk['error'])[:200]}")
        self._model = str(chunk.get("model") or self._model)
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        out: list[Delta] = []
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # n > 1 is never asked for
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._text.append(content)
                out.append(Delta("text", text=content))
            for piece in delta.get("tool_calls") or []:
                out.append(self._call_piece(piece))
            if choice.get("finish_reason"):
                self._finish = str(choice["finish_reason"])
        return out

    def _call_piece(self, piece: Any) -> Delta:
        if not isinstance(piece, dict) or not isinstance(piece.get("index"), int):
            raise StreamError(f"a tool-call fragment without an index: {str(piece)[:200]}")
        index = piece["index"]
        fn = piece.get("function") or {}
        call = self._calls.setdefault(index, {"id": "", "name": "", "arguments": []})
        call_id, name = str(piece.get("id") or ""), str(fn.get("name") or "")
        arguments = fn.get("arguments") or ""
        if not isinstance(arguments, str):
            raise StreamError("a tool-call fragment's arguments are not a string")
        call["id"] = call["id"] or call_id
        call["name"] = call["name"] or name
        call["arguments"].append(arguments)
        return Delta("tool_call", index=index, call_id=call_id, name=name, arguments=arguments)

    def completion(self) -> dict[str, Any]:
        """The ``chat.completion`` the chunks made (what a non-streaming call returns)."""
        if self._finish is None:
            raise StreamError("the stream ended before its finish_reason")
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text)}
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": "".join(c["arguments"])},
                }
                for _, c in sorted(self._calls.items())
            ]
        out: dict[str, Any] = {
            "model": self._model,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish}],
        }
        if self._usage is not None:
            out["usage"] = self._usage
        return out


@dataclass
class MessageEvents:
    """Messages API events, assembled into the ``message`` they stream."""

    _message: dict[str, Any] | None = None
    _blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    _json: dict[int, list[str]] = field(default_factory=dict)
    done: bool = False

    def feed(self, event: SSEEvent) -> list[Delta]:
        data = _obj(event.data)
        kind = str(data.get("type") or event.event)
        if kind == "error":
            raise StreamError(f"the stream reported an error: {str(data.get('error'))[:200]}")
        if kind == "message_start":
            self._message = dict(data.get("message") or {})
            self._message["usage"] = dict(self._message.get("usage") or {})
            return []
        message = self._started()
        if kind == "content_block_start":
            index, block = self._index(data), dict(data.get("content_block") or {})
            self._blocks[index] = block
            if block.get("type") == "tool_use":
                self._json[index] = []
                return [
                    Delta(
                        "tool_call",
                        index=self._call_index(index),
                        call_id=str(block.get("id") or ""),
                        name=str(block.get("name") or ""),
                    )
                ]
            if block.get("type") == "text" and block.get("text"):
                return [Delta("text", text=str(block["text"]))]
            return []
        if kind == "content_block_delta":
            return self._delta(self._index(data), data.get("delta") or {})
        if kind == "message_delta":
            delta = data.get("delta") or {}
            if "stop_reason" in delta:
                message["stop_reason"] = delta["stop_reason"]
            message["usage"].update(data.get("usage") or {})
        elif kind == "message_stop":
            self.done = True
        return []  # content_block_stop, ping and events to come say nothing we keep

    def _started(self) -> dict[str, Any]:
        if self._message is None:
            raise StreamError("an event before message_start")
        return self._message

    def _index(self, data: dict[str, Any]) -> int:
        index = data.get("index")
        if not isinstance(index, int):
            raise StreamError(f"a content block event without an index: {str(data)[:200]}")
        return index

    def _call_index(self, index: int) -> int:
        # A call's position among the turn's calls (the blocks also count text).
        return sum(1 for i, b in self._blocks.items() if i < index and b.get("type") == "tool_use")

    def _delta(self, index: int, delta: dict[str, Any]) -> list[Delta]:
        block = self._blocks.get(index)
        if block is None:
            raise StreamError(f"a delta for content block {index}, which did not start")
        if delta.get("type") == "text_delta":
            piece = str(delta.get("text") or "")
            block["text"] = str(block.get("text") or "") + piece
            return [Delta("text", text=piece)] if piece else []
        if delta.get("type") == "input_json_delta":
            piece = str(delta.get("partial_json") or "")
            self._json.setdefault(index, []).append(piece)
            return [Delta("tool_call", index=self._call_index(index), arguments=piece)]
        return []  # thinking and signature deltas are not part of what is recorded

    def message(self) -> dict[str, Any]:
        """The ``message`` the events made (what a non-streaming call returns)."""
        message = self._started()
        if not self.done:
            raise StreamError("the stream ended before message_stop")
        content = []
        for index, block in sorted(self._blocks.items()):
            if index in self._json:
                raw = "".join(self._json[index])
                try:
                    block = {**block, "input": json.loads(raw) if raw else {}}
                except ValueError as exc:
                    raise StreamError(
                        f"a tool_use block's input is not JSON: {raw[:200]!r}"
                    ) from exc
            content.append(block)
        return {**message, "content": content}
