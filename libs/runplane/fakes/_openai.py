"""A fake OpenAI-compatible chat-completions server on loopback.

Speaks the subset of ``POST /v1/chat/completions`` the provider uses: ``model``, ``messages``
in; one ``choices[0].message`` and ``usage`` out. Replies are scripted (a queue of texts) or,
when the script is empty, a deterministic echo of the last user message, so a test can predict
them. ``fail_next`` and ``delay_s`` make faults on demand; ``requests`` counts calls, which is
how a test proves a replay did not re-pay a generation.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

from runplane.fakes._http import JSON, LoopbackServer, Request, Response


class FakeOpenAIServer:
    def __init__(
        self,
        *,
        replies: Iterable[str] = (),
        api_key: str | None = None,
        delay_s: float = 0.0,
        port: int = 0,
    ) -> None:
        self.api_key = api_key
        self.delay_s = delay_s
        self._lock = threading.Lock()
        self._replies: deque[str] = deque(replies)
        self._failures: deque[int] = deque()
        self.requests = 0
        self.bodies: list[JSON] = []
        self._server = LoopbackServer(self._route, port=port)

    @property
    def url(self) -> str:
        """The base URL a client configures (``…/v1``)."""
        return self._server.url + "/v1"

    def start(self) -> FakeOpenAIServer:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, *replies: str) -> None:
        with self._lock:
            self._replies.extend(replies)

    def fail_next(self, count: int = 1, status: int = 500) -> None:
        with self._lock:
            self._failures.extend([status] * count)

    def _route(self, req: Request) -> Response:
        if req.method == "GET" and req.path == "/v1/models":
            return Response(200, {"object": "list", "data": [{"id": "fake-model"}]})
        if req.method != "POST" or req.path != "/v1/chat/completions":
            return Response(404, {"error": {"message": f"no route {req.method} {req.path}"}})
        if (
            self.api_key is not None
            and req.headers.get("authorization") != f"Bearer {self.api_key}"
        ):
            return Response(401, {"error": {"message": "invalid api key", "type": "auth"}})
        error = _validate(req.body)
        if error is not None:
            return Response(400, {"error": {"message": error, "type": "invalid_request_error"}})
        assert req.body is not None  # _validate checked it
        with self._lock:
            self.requests += 1
            self.bodies.append(req.body)
            failure = self._failures.popleft() if self._failures else None
            text = self._replies.popleft() if self._replies else None
            n = self.requests
        if self.delay_s > 0:
            threading.Event().wait(self.delay_s)
        if failure is not None:
            return Response(
                failure, {"error": {"message": "injected failure", "type": "server_error"}}
            )
        messages: list[dict[str, Any]] = req.body["messages"]
        if text is None:
            last_user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
            text = "echo: " + str(last_user.get("content", "") if last_user else "")
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
        completion_tokens = len(text.split())
        return Response(
            200,
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 0,
                "model": req.body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )


def _validate(body: JSON | None) -> str | None:
    if body is None:
        return "a JSON body is required"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model must be a non-empty string"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty list"
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
            return "each message needs a role of system, user, assistant or tool"
    return None
