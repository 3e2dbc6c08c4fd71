"""HTTP tools: a tool that is one HTTP request to a peer.

A tool is declared once (method, URL template, whether it mutates) and called with a mapping of
arguments: ``{name}`` placeholders in the URL are filled (URL-quoted) from the arguments, the
rest go in the query string (GET/DELETE) or the JSON body (POST/PUT). A mutating tool sends the
effect's idempotency key in a header, so a peer that dedupes by key makes an allowed retry
harmless. A probe tool may answer "not found" as ``None`` instead of an error: that is an
answer to "did it happen?", not a failure.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from runplane.errors import ConfigError, TerminalError
from runplane.providers._errors import PeerCallError, Reach, classify_status, classify_transport

_METHODS = frozenset({"GET", "POST", "PUT", "DELETE", "PATCH"})


@dataclass(frozen=True)
class HttpTool:
    """A tool backed by one HTTP request. ``name`` is the effect name (``tool://…``)."""

    name: str
    method: str
    url: str
    mutating: bool = False
    idempotency_header: str = "Idempotency-Key"
    not_found_is_none: bool = False

    def __post_init__(self) -> None:
        if self.method not in _METHODS:
            raise ConfigError(f"tool {self.name}: unsupported method {self.method!r}")
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"tool {self.name}: url must be http(s), got {self.url!r}")
        if not self.name:
            raise ConfigError("a tool needs a name")

    def placeholders(self) -> frozenset[str]:
        return frozenset(f for _, f, _, _ in string.Formatter().parse(self.url) if f)

    def _request_parts(self, args: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        wanted = self.placeholders()
        missing = wanted - set(args)
        if missing:
            raise TerminalError(f"tool {self.name}: missing arguments {sorted(missing)}")
        url = self.url.format(**{k: quote(str(args[k]), safe="") for k in wanted})
        return url, {k: v for k, v in args.items() if k not in wanted}

    async def call(
        self,
        client: httpx.AsyncClient,
        args: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> Any:
        """Perform one attempt; raise :class:`PeerCallError` classified by reach."""
        url, rest = self._request_parts(args)
        headers: dict[str, str] = {}
        if self.mutating:
            if not idempotency_key:
                raise TerminalError(f"tool {self.name} mutates and needs an idempotency key")
            headers[self.idempotency_header] = idempotency_key
        body_kw: dict[str, Any] = (
            {"params": {k: str(v) for k, v in rest.items()}}
            if self.method in ("GET", "DELETE")
            else {"json": rest}
        )
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


def billing_tools(base_url: str) -> dict[str, HttpTool]:
    """The refund example's tools against a billing API (see ``runplane.fakes``)."""
    base = base_url.rstrip("/")
    return {
        "fetch_invoice": HttpTool(
            name="tool://billing/fetch_invoice", method="GET", url=base + "/invoices/{invoice_id}"
        ),
        "charge_card": HttpTool(
            name="tool://billing/charge", method="POST", url=base + "/charges", mutating=True
        ),
        "get_charge": HttpTool(
            name="tool://billing/get_charge",
            method="GET",
            url=base + "/charges/{idempotency_key}",
            not_found_is_none=True,
        ),
    }
