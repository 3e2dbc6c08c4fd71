"""HTTP tools: a tool that is one HTTP request to a peer (``runplane.core.Tool``).

A tool is declared once (method, URL template, its ``EffectDecl``: mutating, recovery, probe,
retry, timeout) and called with a mapping of arguments: ``{name}`` placeholders in the URL are
filled (URL-quoted) from the arguments — or from the call's idempotency key for
``{idempotency_key}`` — and the rest go in the query string (GET/DELETE) or the JSON body
(POST/PUT/PATCH). A mutating tool sends the idempotency key in a header, so a peer that
dedupes by key makes an allowed retry harmless. A probe may answer "not found" as ``None``:
that is an answer to "did it happen?", not a failure.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from runplane.core.agents import EffectDecl
from runplane.errors import ConfigError, TerminalError
from runplane.providers._errors import PeerCallError, Reach, classify_status, classify_transport
from runplane.serving.tracing import inject_http
from runplane.wire import Label

_METHODS = frozenset({"GET", "POST", "PUT", "DELETE", "PATCH"})


class HttpTool:
    """A tool backed by one HTTP request, registered under ``name``."""

    def __init__(
        self,
        name: str,
        method: str,
        url: str,
        *,
        decl: EffectDecl | None = None,
        not_found_is_none: bool = False,
        idempotency_header: str = "Idempotency-Key",
        client: httpx.AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
        label: Label | None = None,
    ) -> None:
        if not name:
            raise ConfigError("a tool needs a name")
        if method not in _METHODS:
            raise ConfigError(f"tool {name}: unsupported method {method!r}")
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"tool {name}: url must be http(s), got {url!r}")
        self.name = name
        self.method = method
        self.url = url
        # Undeclared means the conservative treatment: mutating, requires_operator.
        self.decl = decl if decl is not None else EffectDecl(name)
        self.not_found_is_none = not_found_is_none
        self.idempotency_header = idempotency_header
        # A mutating call always sends its key in that header (``call``), so a reconciling
        # HTTP tool carries it by construction (``_keyed``).
        self.carries_key = True
        self._client = client
        # Sent with every request (auth, read from the environment by the config loader);
        # kept out of repr and of the journal: only the arguments are witnessed.
        self._headers = dict(headers or {})
        self.label = label

    def bind(self, client: httpx.AsyncClient) -> HttpTool:
        """The same tool sending through ``client`` (the executor's pooled client)."""
        return HttpTool(
            self.name,
            self.method,
            self.url,
            decl=self.decl,
            not_found_is_none=self.not_found_is_none,
            idempotency_header=self.idempotency_header,
            client=client,
            headers=self._headers,
            label=self.label,
        )

    def placeholders(self) -> frozenset[str]:
        return frozenset(f for _, f, _, _ in string.Formatter().parse(self.url) if f)

    def _request_parts(
        self, args: Mapping[str, Any], idempotency_key: str | None
    ) -> tuple[str, dict[str, Any]]:
        wanted = self.placeholders()
        values: dict[str, Any] = dict(args)
        if idempotency_key is not None:
            values.setdefault("idempotency_key", idempotency_key)
        missing = wanted - set(values)
        if missing:
            raise TerminalError(f"tool {self.name}: missing arguments {sorted(missing)}")
        url = self.url.format(**{k: quote(str(values[k]), safe="") for k in wanted})
        return url, {k: v for k, v in args.items() if k not in wanted}

    async def call(self, args: Mapping[str, Any], *, idempotency_key: str | None = None) -> Any:
        """Perform one attempt; raise :class:`PeerCallError` classified by reach."""
        url, rest = self._request_parts(args, idempotency_key)
        headers: dict[str, str] = dict(self._headers)
        if self.decl.mutating:
            if not idempotency_key:
                raise TerminalError(f"tool {self.name} mutates and needs an idempotency key")
            headers[self.idempotency_header] = idempotency_key
        body_kw: dict[str, Any] = (
            {"params": {k: str(v) for k, v in rest.items()}}
            if self.method in ("GET", "DELETE")
            else {"json": rest}
        )
        client = self._client
        if client is None:
            async with httpx.AsyncClient() as own:
                return await self._send(own, url, headers, body_kw)
        return await self._send(client, url, headers, body_kw)

    async def _send(
        self,
        client: httpx.AsyncClient,
        url: str,
        headers: dict[str, str],
        body_kw: dict[str, Any],
    ) -> Any:
        headers = dict(headers)
        inject_http(headers)  # W3C trace context of the effect's span, when traced
        try:
            response = await client.request(self.method, url, headers=headers, **body_kw)
        except httpx.TransportError as exc:
            raise classify_transport(exc) from exc
        if response.status_code == 404 and self.not_found_is_none:
            return None
        if response.status_code // 100 != 2:
            raise classify_status(response)
        try:
            return response.json() if response.content else None
        except ValueError as exc:
            raise PeerCallError(
                f"tool {self.name}: reply is not JSON", reach=Reach.IN_DOUBT, retryable=True
            ) from exc
