"""Run queries over HTTP (FastAPI; OpenAPI at ``/openapi.json``, docs at ``/docs``).

Every endpoint needs ``Authorization: Bearer <token>`` of a configured principal (any role;
401 without one); bodies need the role ``auditor`` as well (403 without it). A principal sees
the runs of their own tenant only (``tenant`` in the principals file): another tenant's run is
left out of lists and answers 404, as an unknown id does.

- ``GET /runs`` — runs from the Redis index, newest first; filters: status, capability, case,
  time range (``since_ms``/``until_ms`` on the start time), ``limit``.
- ``GET /runs/{id}`` — one run: status, capability, case, era, cost, timestamps, parked on,
  the audit verdict, and how it ended (a failure's reason and error type; CANCELLED with who
  cancelled it and why — body-free facts of its end record).
- ``GET /runs/{id}/journal`` — the run's records, read from ``journal`` itself; with
  ``bodies=true`` also each call's body from ``results``, only for a bearer token whose
  principal has the role ``auditor`` (401 without a valid token, 403 without the role).
- ``GET /runs/{id}/verify`` — the chain verified now, from the topics (the same fold as the
  service and ``runplane journal verify``), next to the service's own audit verdict.
- ``GET /runs/{id}/stream`` — the run's live stream as server-sent events (``runs.stream``:
  text and tool-call fragments, calls started and finished, parked, resumed, ended, progress);
  each event's ``id`` is its place in the stream, and a reconnect with ``Last-Event-ID`` (or
  ``?after=``) resumes right after it, with no gap and no duplicate. It ends after the run's
  ``ENDED`` event (a run already over: at the end of what the stream retains). A view, never
  the truth: the journal is (``runplane.runs.stream``).
- ``GET /ui`` — the runs UI for people (``services.journal.ui``), same tokens and tenancy.

Reading a run from Kafka costs a scan of its session's partition, so the API bounds it: a run
the index does not know is 404 without touching Kafka (an id is not a licence to scan), the
scan starts at the run's indexed start time (less a clock-skew margin) instead of the
partition's beginning, and at most ``max_scans`` scans run at once — one more is answered 503
with ``Retry-After`` rather than queued behind them.

Bad input is a 4xx with a message; a backend that does not answer (Kafka, Redis) is a 503 with
the reason; nothing is a 500.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from runplane.core.verify import bodies_of, verify_records
from runplane.errors import RunplaneError
from runplane.journal.index import RunFilter, RunIndex
from runplane.journal.summary import RunSummary
from runplane.runs.stream import Follow
from runplane.serving.apidocs import api_app
from runplane.serving.auth import Principal, PrincipalSource
from runplane.serving.shell import install_backend_errors
from runplane.wire import RunStatus, to_dict
from services.journal.auth import body_reader, run_reader
from services.journal.live import stream_response
from services.journal.repair import Repairer, install_repair_routes
from services.journal.runs import DEFAULT_MAX_SCANS, RunReader, Runs, ScanLimit
from services.journal.ui import install_ui

RunId = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f/]+$")]


class CostOut(BaseModel):
    tokens_in: int
    tokens_out: int
    units: float
    tokens: int


class RunOut(BaseModel):
    run_id: str
    status: str | None = Field(
        description="ADMITTED, RUNNING, AWAITING_HUMAN, PARKED, COMPLETED, FAILED, QUARANTINED,"
        " CANCELLED"
    )
    capability: str | None
    tenant: str | None = Field(None, description="The run's tenant (only its principals see it)")
    case_id: str | None
    era: int
    last_seq: int
    records: int
    cost: CostOut
    started_ms: int | None
    updated_ms: int | None
    ended_ms: int | None
    parked_on: str | None
    verdict: str = Field(description="The audit verdict so far: VERIFIED, BODY_MISSING or BROKEN")
    broken_at_seq: int | None
    reason: str | None
    body_missing: int
    ended_reason: str | None = Field(
        None, description="Why the run failed, was quarantined or was cancelled (its end record)"
    )
    error_type: str | None = Field(None, description="The error type of a failure")
    cancelled_by: str | None = Field(None, description="Who cancelled the run")
    erased_bodies: int | None = Field(
        None, description="How many bodies were erased (RUN_ERASED); null while they are kept"
    )
    erased_by: str | None = Field(None, description="Who erased them (an operator, retention)")


class RunList(BaseModel):
    runs: list[RunOut]


class JournalOut(BaseModel):
    run_id: str
    records: list[dict[str, Any]] = Field(
        description="JournalRecords as Avro-mapped dicts, in topic order"
    )
    bodies: dict[str, dict[str, Any] | None] | None = Field(
        None, description="era/call_seq -> ResultEntry (null: erased); only for auditors"
    )


class VerifyOut(BaseModel):
    run_id: str
    verified: bool
    records: int
    broken_at_seq: int | None
    reason: str | None
    body_missing: list[int]
    service_verdict: str | None = Field(
        None, description="What the journal service's audit stream says"
    )


def _run_out(s: RunSummary) -> RunOut:
    return RunOut.model_validate(s.to_json())


def caller(request: Request, authorization: Annotated[str | None, Header()] = None) -> Principal:
    """Whoever the bearer token names (any role); 401 without a known token."""
    readers: PrincipalSource = request.app.state.readers
    return run_reader(readers, authorization)


Who = Annotated[Principal, Depends(caller)]


def build_api(
    index: Callable[[], RunIndex | None],
    reader: RunReader,
    readers: PrincipalSource,
    *,
    title: str = "runplane journal",
    max_scans: int = DEFAULT_MAX_SCANS,
    ui: bool = True,
    public_origin: str | None = None,
    repairer: Repairer | None = None,
    stream: Follow | None = None,
) -> FastAPI:
    """The run-query app; ``index`` returns None when no Redis index is configured.

    ``readers``: who may query at all (any principal) and read bodies (role ``auditor``).
    ``max_scans``: how many Kafka partition scans (journal, verify) may run at once.
    ``ui``: serve the runs UI at ``/ui`` (``services.journal.ui``) on the same app;
    ``public_origin``: the address people reach it at (its form posts are checked against it).
    ``stream``: follows a run's live stream (``runplane.runs.stream.follow`` bound to the
    settings); None: ``GET /runs/{id}/stream`` answers 503.
    """
    app = api_app(title=title, description=__doc__ or "")
    app.state.readers = readers
    install_backend_errors(app, redis_holds="run index")

    @app.exception_handler(RunplaneError)
    async def _runplane(_: Request, exc: RunplaneError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    runs = Runs(index, reader, readers, ScanLimit(max_scans))
    _install_index_routes(app, runs)
    _install_journal_routes(app, runs)
    _install_stream_route(app, runs, stream)
    install_repair_routes(app, runs, readers, repairer)  # POST resume/fork/erase (operators)
    if ui:
        install_ui(app, runs, readers, public_origin=public_origin, stream=stream)
    return app


_AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or unknown bearer token"}
}
_SCAN_ERRORS: dict[int | str, dict[str, Any]] = {
    **_AUTH_ERRORS,
    404: {},
    503: {"description": "too many reads at once"},
}


def _install_index_routes(app: FastAPI, runs: Runs) -> None:
    """``GET /runs`` and ``GET /runs/{id}``: answered from the Redis index alone."""

    @app.get(
        "/runs", response_model=RunList, responses=_AUTH_ERRORS, summary="List runs, newest first"
    )
    def list_runs(
        who: Who,
        status: RunStatus | None = None,
        capability: str | None = Query(None, max_length=256),
        case: str | None = Query(None, max_length=256),
        since_ms: int | None = Query(None, ge=0),
        until_ms: int | None = Query(None, ge=0),
        limit: int = Query(100, ge=1, le=1000),
    ) -> RunList:
        if since_ms is not None and until_ms is not None and since_ms > until_ms:
            raise HTTPException(400, "since_ms is after until_ms")
        f = RunFilter(status, capability, case, since_ms, until_ms, limit, tenant=who.tenant)
        return RunList(runs=[_run_out(s) for s in runs.run_index().list(f)])

    @app.get(
        "/runs/{run_id}",
        response_model=RunOut,
        responses={**_AUTH_ERRORS, 404: {"description": "unknown run"}},
    )
    def get_run(run_id: RunId, who: Who) -> RunOut:
        return _run_out(runs.known(run_id, who))


def _install_journal_routes(app: FastAPI, runs: Runs) -> None:
    """``GET /runs/{id}/journal`` and ``/verify``: a bounded scan of the run's partitions."""

    @app.get(
        "/runs/{run_id}/journal",
        response_model=JournalOut,
        responses={**_SCAN_ERRORS, 403: {}},
    )
    def get_journal(
        run_id: RunId,
        who: Who,
        bodies: bool = Query(False, description="include each call's body (role auditor)"),
        authorization: str | None = Header(None),
    ) -> JournalOut:
        if bodies:
            body_reader(runs.readers, authorization)  # 403 unless an auditor's token
        _, history = runs.history(run_id, who, bodies=bodies)
        out = JournalOut(
            run_id=run_id, records=[_jsonable(to_dict(r)) for r in history.records], bodies=None
        )
        if bodies:
            out.bodies = {
                f"{era}/{call}": None if e is None else _jsonable(to_dict(e))
                for (era, call), e in sorted(history.bodies.items())
            }
        return out

    @app.get("/runs/{run_id}/verify", response_model=VerifyOut, responses=_SCAN_ERRORS)
    def verify(run_id: RunId, who: Who) -> VerifyOut:
        summary, history = runs.history(run_id, who, bodies=True)
        report = verify_records(
            run_id, history.records, bodies_of(history.bodies), history.unsigned
        )
        return VerifyOut(
            run_id=run_id,
            verified=report.verified,
            records=report.records,
            broken_at_seq=report.broken_at_seq,
            reason=report.reason,
            body_missing=list(report.body_missing),
            service_verdict=str(summary.verdict),
        )


def _install_stream_route(app: FastAPI, runs: Runs, follow: Follow | None) -> None:
    """``GET /runs/{id}/stream``: the run's live events as server-sent events."""

    @app.get(
        "/runs/{run_id}/stream",
        response_class=StreamingResponse,
        responses={**_AUTH_ERRORS, 400: {}, 404: {}, 503: {}},
        summary="The run's live events (server-sent events, resumable with Last-Event-ID)",
    )
    async def stream_run(
        run_id: RunId,
        who: Who,
        last_event_id: str | None = Header(None),
        after: int | None = Query(None, ge=0, description="resume after this event id"),
    ) -> StreamingResponse:
        return await stream_response(runs, follow, run_id, who, last_event_id, after)


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    # bytes and enums out of to_dict become JSON-safe text
    result: dict[str, Any] = json.loads(
        json.dumps(d, default=lambda v: v.hex() if isinstance(v, bytes) else str(v))
    )
    return result
