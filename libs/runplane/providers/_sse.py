"""One streamed HTTP request: POST a body, read its server-sent events, hand on the fragments.

Both model providers stream through :func:`post_events`; what the events mean is the
protocol's assembler's (``runplane.providers._stream``). Failures are classified as the
non-streaming call's are: no connection is NOT_REACHED, a non-2xx status is read and
classified by it, a break after the head arrived is IN_DOUBT (the peer acted).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx

from runplane.providers._errors import classify_status, classify_transport
from runplane.providers._stream import Delta, DeltaSink, SSEDecoder, SSEEvent, StreamError


async def post_events(
    client: httpx.AsyncClient,
    url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    feed: Callable[[SSEEvent], list[Delta]],
    sink: DeltaSink,
) -> dict[str, Any] | None:
    """POST ``body`` to ``url`` and feed each event of the reply to ``feed``, its fragments
    to ``sink`` as they arrive. A server that answers with a whole JSON reply instead (some
    compatible servers ignore ``stream``) has that reply returned, to be read as unstreamed."""
    decoder = SSEDecoder()
    try:
        async with client.stream(
            "POST", url, json=dict(body), headers={**headers, "Accept": "text/event-stream"}
        ) as response:
            if response.status_code // 100 != 2:
                await response.aread()
                raise classify_status(response)
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                await response.aread()
                try:
                    whole = response.json()
                except ValueError as exc:
                    raise StreamError(f"neither events nor JSON: {response.text[:200]!r}") from exc
                if not isinstance(whole, dict):
                    raise StreamError(f"a reply is an object, got {type(whole).__name__}")
                return whole
            async for line in response.aiter_lines():
                event = decoder.feed(line.rstrip("\r"))
                if event is None:
                    continue
                for delta in feed(event):
                    sink(delta)
            event = decoder.feed("")  # a last event without its blank line
            if event is not None:
                for delta in feed(event):
                    sink(delta)
        return None
    except httpx.TransportError as exc:
        raise classify_transport(exc) from exc
