"""A run's live stream as an HTTP response: what ``GET /runs/{id}/stream`` (bearer token) and
the runs UI's live panel (``GET /ui/stream/{id}``, its sign-in cookie) both answer.

The caller has authenticated the principal already, each its own way; here the run is looked
up as that principal's (404 for an unknown run or another tenant's, before Kafka is touched),
``Last-Event-ID`` (or ``?after=``) says where to resume, and a run already over is read to
the end of what the stream retains instead of being waited on.
"""

from __future__ import annotations

import asyncio

from fastapi import HTTPException
from fastapi.responses import StreamingResponse

from runplane.journal.summary import TERMINAL
from runplane.runs.stream import KEEP_ALIVE_S, SSE_HEADERS, BadEventId, Follow, sse_body
from runplane.runs.stream import last_event_id as last_event_id_of
from runplane.serving.auth import Principal
from services.journal.runs import Runs, scan_since


async def stream_response(
    runs: Runs,
    follow: Follow | None,
    run_id: str,
    who: Principal,
    last_event_id: str | None,
    after: int | None,
) -> StreamingResponse:
    """The run's events for ``who`` as server-sent events; 400 for a malformed
    ``Last-Event-ID``, 404 for a run ``who`` may not see, 503 without streaming configured."""
    try:
        resume = last_event_id_of(last_event_id)
    except BadEventId as exc:
        raise HTTPException(400, str(exc)) from exc
    resume = after if resume is None else resume
    summary = await asyncio.to_thread(runs.known, run_id, who)  # 404: unknown, or not yours
    if follow is None:
        raise HTTPException(503, "streaming is not configured on this instance")
    events = follow(
        run_id,
        after=resume,
        since_ms=None if resume is not None else scan_since(summary),
        to_end=summary.status in TERMINAL,
        idle_s=KEEP_ALIVE_S,
    )
    return StreamingResponse(
        sse_body(events, run_id), media_type="text/event-stream", headers=SSE_HEADERS
    )
