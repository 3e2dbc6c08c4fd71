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
from runplane.providers._stream import Delta, DeltaSink, SSEDecoder, SSEEvent


async def post_events(
    client: httpx.AsyncClient,
    url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    feed: Callable[[SSEEvent], list[Delta]],
    sink: DeltaSink,
) -> None:
    """POST ``body`` to ``url`` and feed each event of the reply to ``feed``, its fragments
    to ``sink`` as they arrive."""
    decoder = SSEDecoder()
    try:
        async with client.stream(
            "POST", url, json=dict(body), headers={**headers, "Accept": "text/event-stream"}
        ) as response:
            if response.status_code // 100 != 2:
                await response.aread()
                raise classify_status(response)
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
    except httpx.TransportError as exc:
        raise classify_transport(exc) from exc
