"""An OpenAI-compatible chat-completions provider over httpx.

Works against any server speaking ``POST {base_url}/chat/completions`` (OpenAI, vLLM, Ollama's
OpenAI endpoint, :class:`runplane.fakes.FakeOpenAIServer`). Tool calling is the protocol's own:
the offered tools go as ``tools`` (``{"type": "function", "function": {name, description,
parameters}}``) with ``tool_choice``; the reply's ``message.tool_calls`` (several in one turn,
``function.arguments`` a JSON string) become the generation's ``tool_calls``; an assistant
message with calls goes back with ``tool_calls``, each result as a ``tool`` message. The provider performs one attempt;
timeouts, retries and the bound on calls in flight belong to the executor's live-call runner,
which reads the typed :class:`PeerCallError` this raises.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from runplane.core.agents import Generation
from runplane.core.canonical import canonical_json
from runplane.core.turns import Message, Role, StopReason, ToolSpec
from runplane.errors import ConfigError
from runplane.providers._errors import (
    ModelReplyError,
    PeerCallError,
    Reach,
    classify_status,
    classify_transport,
)
from runplane.providers._sse import post_events
from runplane.providers._stream import ChatChunks, DeltaSink, StreamError
from runplane.providers._turns import Turn, tool_call
from runplane.serving.tracing import inject_http


@dataclass(frozen=True)
class Completion:
    """What one chat completion returned."""

    text: str
    model: str
    tokens_in: int
    tokens_out: int
    finish_reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "model": self.model,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "finish_reason": self.finish_reason,
        }


class OpenAIProvider:
    """Models behind one OpenAI-compatible endpoint (``runplane.core.ModelProvider``).

    ``name`` is the provider name agents pass to ``ctx.generate(name, model, prompt)``;
    ``model`` is the default model, used when an agent asks for ``"default"``.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        name: str = "openai",
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"RUNPLANE_OPENAI_BASE_URL must be an http(s) URL, got {base_url!r}")
        if not model:
            raise ConfigError("a model name is required")
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self._client = client
        self._owns_client = client is None

    def request_body(self, model: str, prompt: Any, params: Mapping[str, Any]) -> dict[str, Any]:
        """The chat-completions body for ``ctx.generate``'s (model, prompt, params)."""
        return self._body(Turn.read(self.name, prompt, params), model, params)

    def _body(self, turn: Turn, model: str, params: Mapping[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model if model in ("", "default") else model,
            "messages": [_message(m) for m in turn.messages],
        }
        if params.get("temperature") is not None:
            body["temperature"] = params["temperature"]
        if params.get("max_tokens") is not None:
            body["max_tokens"] = params["max_tokens"]
        if turn.offers_tools:
            body["tools"] = [_tool(t) for t in turn.tools]
        if turn.offers_tools and turn.choice is not None:  # the protocol refuses it alone
            body["tool_choice"] = (
                {"type": "function", "function": {"name": turn.choice.name}}
                if turn.choice.mode == "tool"
                else turn.choice.mode
            )
        return body

    async def generate(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        """One chat completion; ``prompt`` is a string (one user message) or a list of
        provider-neutral messages (``runplane.core.turns``), ``params`` may offer ``tools``."""
        turn = Turn.read(self.name, prompt, params)
        return _read(turn, await self._post(self._body(turn, model, params)))

    async def stream(
        self, model: str, prompt: Any, params: Mapping[str, Any], sink: DeltaSink
    ) -> Generation:
        """``generate``, streamed (``stream: true``, usage in the last chunk): each text and
        tool-call fragment goes to ``sink`` as it arrives; the chunks are assembled into the
        completion a non-streaming call returns, read by the same code, so the generation is
        the one ``generate`` would have returned for the same answer."""
        turn = Turn.read(self.name, prompt, params)
        body = {
            **self._body(turn, model, params),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        chunks = ChatChunks()
        try:
            whole = await post_events(
                self._http(),
                f"{self.base_url}/chat/completions",
                body,
                self._headers(),
                chunks.feed,
                sink,
            )
            data = chunks.completion() if whole is None else whole
        except StreamError as exc:
            raise _unreadable(exc) from exc
        return _read(turn, data)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0))
        return self._client

    def _headers(self) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        inject_http(headers)  # W3C trace context of the effect's span, when traced
        return headers

    async def _post(self, body: Mapping[str, Any]) -> dict[str, Any]:
        try:
            response = await self._http().post(
                f"{self.base_url}/chat/completions", json=body, headers=self._headers()
            )
        except httpx.TransportError as exc:
            raise classify_transport(exc) from exc
        if response.status_code // 100 != 2:
            raise classify_status(response)
        try:
            data = response.json()
        except ValueError as exc:
            raise _unreadable(exc) from exc
        if not isinstance(data, dict):
            raise _unreadable(TypeError(f"a completion is an object, got {type(data).__name__}"))
        return data

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        body: dict[str, Any] = {
            "model": model or self.model,
            "messages": [dict(m) for m in messages],
        }
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        data = await self._post(body)
        try:
            choice = data["choices"][0]
            usage = data.get("usage") or {}
            return Completion(
                text=str(choice["message"].get("content") or ""),
                model=str(data.get("model", "")),
                tokens_in=int(usage.get("prompt_tokens", 0)),
                tokens_out=int(usage.get("completion_tokens", 0)),
                finish_reason=str(choice.get("finish_reason") or ""),
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise _unreadable(exc) from exc

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()


def _read(turn: Turn, data: Mapping[str, Any]) -> Generation:
    """The generation a ``chat.completion`` records (streamed or not)."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
        usage = data.get("usage") or {}
        text = str(message.get("content") or "")
        raw_calls = message.get("tool_calls") or []
        tokens = (int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
        finish = choice.get("finish_reason")
        calls = tuple(
            tool_call(c.get("id"), c["function"].get("name"), _arguments(c["function"]))
            for c in raw_calls
        )
    except ModelReplyError:
        raise
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise _unreadable(exc) from exc
    return turn.generation(text, calls, _STOP.get(str(finish)), *tokens)


# finish_reason → the neutral stop reason ("function_call": the deprecated single-call form).
_STOP = {
    "stop": StopReason.END,
    "content_filter": StopReason.END,
    "tool_calls": StopReason.TOOL_CALLS,
    "function_call": StopReason.TOOL_CALLS,
    "length": StopReason.MAX_TOKENS,
}


def _unreadable(exc: Exception) -> PeerCallError:
    # The peer answered 2xx with something we cannot read: it did act (a generation was
    # billed) but retrying is harmless for a generation, so in doubt + retryable.
    return PeerCallError(f"unreadable completion: {exc!r}", reach=Reach.IN_DOUBT, retryable=True)


def _message(m: Message) -> dict[str, Any]:
    """A neutral message as chat completions takes it. A plain one stays ``{role, content}``,
    exactly what was sent before tools existed."""
    if m.role is Role.TOOL:
        # Chat completions has no error flag on a tool message: the content says it.
        content = f"error: {m.content}" if m.is_error else m.content
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": content}
    if m.tool_calls:
        return {
            "role": "assistant",
            "content": m.content or None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    # A JSON string, as the protocol has it (canonical: the same every era).
                    "function": {"name": c.name, "arguments": canonical_json(c.arguments)},
                }
                for c in m.tool_calls
            ],
        }
    return {"role": str(m.role), "content": m.content}


def _tool(t: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {"name": t.name}
    if t.description:
        function["description"] = t.description
    function["parameters"] = dict(t.parameters)
    return {"type": "function", "function": function}


def _arguments(function: Mapping[str, Any]) -> Any:
    """``function.arguments``: a JSON string by the protocol (an object from some compatible
    servers is taken as is); one that does not parse is the model's mistake, named."""
    raw = function.get("arguments")
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ModelReplyError(
            f"the model's call to tool {function.get('name')!r} has arguments that are not "
            f"JSON ({exc}): {raw[:200]!r}"
        ) from exc
