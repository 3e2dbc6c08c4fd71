"""An adapter for Anthropic's Messages API, whose shape differs from chat completions.

``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version`` headers; the
system prompt is a field of its own, ``max_tokens`` is required, and the reply is a list of
content blocks. One attempt per call, classified by reach (``runplane.providers._errors``),
like every provider: timeouts and retries are the executor's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from runplane.core.agents import Generation
from runplane.errors import ConfigError
from runplane.providers._errors import PeerCallError, Reach, classify_status, classify_transport

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024


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
        messages = (
            [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        )
        # The Messages API takes the system prompt apart from the turns.
        system = [m["content"] for m in messages if m.get("role") == "system"]
        body: dict[str, Any] = {
            "model": self.model if model in ("", "default") else model,
            "max_tokens": int(params.get("max_tokens") or DEFAULT_MAX_TOKENS),
            "messages": [dict(m) for m in messages if m.get("role") != "system"],
        }
        if system:
            body["system"] = "\n\n".join(str(s) for s in system)
        if params.get("temperature") is not None:
            body["temperature"] = params["temperature"]
        return body

    async def generate(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        headers = {"anthropic-version": API_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        body = self.request_body(model, prompt, params)
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
        return parse_message(response)


def parse_message(response: httpx.Response) -> Generation:
    try:
        data = response.json()
        text = "".join(
            str(block.get("text", "")) for block in data["content"] if block.get("type") == "text"
        )
        usage = data.get("usage") or {}
        return Generation(
            text=text,
            tokens_in=int(usage.get("input_tokens", 0)),
            tokens_out=int(usage.get("output_tokens", 0)),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        # 2xx but unreadable: it acted, and repeating a generation is harmless.
        raise PeerCallError(
            f"unreadable message: {exc!r}", reach=Reach.IN_DOUBT, retryable=True
        ) from exc
