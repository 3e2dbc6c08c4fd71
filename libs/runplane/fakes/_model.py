"""What the fake model servers share: a loopback server answering a model protocol from a
model function (``runplane.fakes._script``), with faults on demand.

A protocol (chat completions, Messages) is a :class:`Codec`: where it listens, who may call,
how a request reads as provider-neutral messages and offered tools — refusing, as the real
API does, a request that breaks the protocol (HTTP 400) — and how a turn's ``Generation`` is
written back. Everything else is here, once: the model function, or the queued texts of
``script()`` and then the echo of the last user message (what the fakes always answered);
``fail_next`` and ``respond_next`` (any status and body, such as a reply no model should send);
``delay_s``; a request with ``stream: true`` answered as the protocol streams (``events``),
text word by word (``split``), an event every ``chunk_delay_s``; ``requests`` and ``bodies``, which is how a test proves a replay did not re-pay a
generation.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar, Protocol, Self

from runplane.core.agents import Generation
from runplane.core.canonical import canonical_json
from runplane.core.turns import Message, ToolSpec
from runplane.fakes._http import JSON, LoopbackServer, Request, Response
from runplane.fakes._script import ModelFunction, echo

# How a streamed reply cuts a string into the pieces its events carry.
Split = Callable[[str], list[str]]


def words(value: str) -> list[str]:
    """The fakes' default cut for text: word by word, each with the spaces before it (as a
    model streams tokens)."""
    return re.findall(r"\s*\S+\s*?(?=\s|$)|\s+$", value) or ([value] if value else [])


def pieces(size: int) -> Split:
    """A cut into pieces of ``size`` characters (tool-call arguments, split mid-token)."""
    return lambda value: [value[i : i + size] for i in range(0, len(value), size)]


def sse(data: JSON | str, event: str | None = None) -> bytes:
    """One server-sent event."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


class BadRequest(ValueError):
    """A request the real API would refuse (HTTP 400), with its reason."""


@dataclass(frozen=True)
class Usage:
    tokens_in: int
    tokens_out: int


class Codec(Protocol):
    """One model protocol, as a fake server speaks it."""

    path: str

    def listing(self, req: Request) -> Response | None:
        """A reply to a request other than a turn (a model list), or ``None``."""

    def refused(self, req: Request, api_key: str | None) -> Response | None:
        """A refusal of the caller (401, a missing version header), or ``None``."""

    def read(self, body: JSON) -> tuple[tuple[Message, ...], tuple[ToolSpec, ...]]:
        """The request as neutral messages and offered tools; ``BadRequest`` if invalid."""

    def write(self, gen: Generation, usage: Usage, body: JSON, n: int) -> JSON:
        """The reply body of the ``n``-th answered request."""

    def error(self, status: int, kind: str, message: str) -> Response:
        """An error reply in the protocol's shape."""

    def events(self, reply: JSON, body: JSON, split: Split) -> tuple[bytes, ...]:
        """``reply`` (what ``write`` returned) as the protocol streams it, each text and
        argument string cut into the pieces ``split`` makes."""


class ModelFake:
    """A fake model server on 127.0.0.1, speaking the protocol its class names (``CODEC``)."""

    CODEC: ClassVar[type[Codec]]

    def __init__(
        self,
        *,
        replies: Iterable[str] = (),
        model: ModelFunction | None = None,
        api_key: str | None = None,
        delay_s: float = 0.0,
        chunk_delay_s: float = 0.0,
        split: Split = words,
        port: int = 0,
    ) -> None:
        self.codec = self.CODEC()
        self.model = model  # None: the queued replies, then the echo
        self.api_key = api_key
        self.delay_s = delay_s
        # A request that asks to stream is answered as events, one every chunk_delay_s.
        self.chunk_delay_s = chunk_delay_s
        self.split = split
        self._lock = threading.Lock()
        self._replies: deque[str] = deque(replies)
        self._failures: deque[int] = deque()
        self._raw: deque[Response] = deque()
        self.requests = 0
        self.bodies: list[JSON] = []
        self._server = LoopbackServer(self._route, port=port)

    @property
    def url(self) -> str:
        return self._server.url

    def start(self) -> Self:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def script(self, *replies: str) -> None:
        """Texts the next requests answer, in order (used while no ``model`` is set)."""
        with self._lock:
            self._replies.extend(replies)

    def fail_next(self, count: int = 1, status: int = 500) -> None:
        with self._lock:
            self._failures.extend([status] * count)

    def respond_next(self, status: int, body: JSON) -> None:
        """Answer the next valid request with exactly this (a malformed reply, say)."""
        with self._lock:
            self._raw.append(Response(status, body))

    def _route(self, req: Request) -> Response:
        listed = self.codec.listing(req)
        if listed is not None:
            return listed
        if req.method != "POST" or req.path != self.codec.path:
            return self.codec.error(404, "not_found_error", f"no route {req.method} {req.path}")
        refused = self.codec.refused(req, self.api_key)
        if refused is not None:
            return refused
        if req.body is None:
            return self.codec.error(400, "invalid_request_error", "a JSON body is required")
        try:
            messages, tools = self.codec.read(req.body)
        except BadRequest as exc:
            return self.codec.error(400, "invalid_request_error", str(exc))
        with self._lock:
            self.requests += 1
            self.bodies.append(req.body)
            n = self.requests
            failure = self._failures.popleft() if self._failures else None
            raw = self._raw.popleft() if self._raw else None
            queued = self._replies.popleft() if self._replies and self.model is None else None
        if self.delay_s > 0:
            threading.Event().wait(self.delay_s)
        if failure is not None:
            return self.codec.error(failure, "server_error", "injected failure")
        if raw is not None:
            return raw
        try:
            gen = (
                Generation(text=queued)
                if queued is not None
                else (self.model or echo)(messages, tools)
            )
        except Exception as exc:  # the script's own failure, said to the test as a 500
            return self.codec.error(500, "api_error", f"the model function failed: {exc!r}")
        reply = self.codec.write(gen, _usage(gen, messages), req.body, n)
        if req.body.get("stream") is True:
            events = self.codec.events(reply, req.body, self.split)
            return Response(200, {}, events=events, pace_s=self.chunk_delay_s)
        return Response(200, reply)


def _usage(gen: Generation, messages: tuple[Message, ...]) -> Usage:
    """What the model function says it cost, else words in and out (predictable in tests)."""
    if gen.tokens_in or gen.tokens_out:
        return Usage(gen.tokens_in, gen.tokens_out)
    tokens_in = sum(len(m.content.split()) for m in messages)
    tokens_out = len(gen.text.split()) + sum(
        len(canonical_json(c.arguments).split()) for c in gen.tool_calls
    )
    return Usage(tokens_in, tokens_out)
