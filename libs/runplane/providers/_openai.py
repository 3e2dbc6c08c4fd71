"""An OpenAI-compatible chat-completions provider over httpx.

Works against any server speaking ``POST {base_url}/chat/completions`` (OpenAI, vLLM, Ollama's
OpenAI endpoint, :class:`runplane.fakes.FakeOpenAIServer`). The provider performs one attempt;
timeouts, retries and the bound on calls in flight belong to the executor's live-call runner,
which reads the typed :class:`PeerCallError` this raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from runplane.core.agents import Generation
from runplane.errors import ConfigError
from runplane.providers._errors import PeerCallError, Reach, classify_status, classify_transport
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

    async def generate(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        """One chat completion; ``prompt`` is a string (one user message) or a message list."""
        messages = (
            [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        )
        done = await self.complete(
            messages,
            model=None if model in ("", "default") else model,
            temperature=params.get("temperature"),
            max_tokens=params.get("max_tokens"),
        )
        return Generation(text=done.text, tokens_in=done.tokens_in, tokens_out=done.tokens_out)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0))
        return self._client

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
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        inject_http(headers)  # W3C trace context of the effect's span, when traced
        try:
            response = await self._http().post(
                f"{self.base_url}/chat/completions", json=body, headers=headers
            )
        except httpx.TransportError as exc:
            raise classify_transport(exc) from exc
        if response.status_code // 100 != 2:
            raise classify_status(response)
        return _parse(response)

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()


def _parse(response: httpx.Response) -> Completion:
    try:
        data = response.json()
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
        # The peer answered 2xx with something we cannot read: it did act (a generation was
        # billed) but retrying is harmless for a generation, so in doubt + retryable.
        raise PeerCallError(
            f"unreadable completion: {exc!r}", reach=Reach.IN_DOUBT, retryable=True
        ) from exc
