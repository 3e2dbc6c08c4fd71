"""Run queries over HTTP (FastAPI; OpenAPI at ``/openapi.json``, docs at ``/docs``).

- ``GET /runs`` — runs from the Redis index, newest first; filters: status, capability, case,
  time range (``since_ms``/``until_ms`` on the start time), ``limit``.
- ``GET /runs/{id}`` — one run: status, capability, case, era, cost, timestamps, parked on,
  the audit verdict.
- ``GET /runs/{id}/journal`` — the run's records, read from ``journal`` itself; with
  ``bodies=true`` also each call's body from ``results``, only for a bearer token whose
  principal has the role ``auditor`` (401 without a valid token, 403 without the role).
- ``GET /runs/{id}/verify`` — the chain verified now, from the topics (the same fold as the
  service and ``runplane journal verify``), next to the service's own audit verdict.

Bad input is a 4xx with a message; a backend that does not answer (Kafka, Redis) is a 503 with
the reason; nothing is a 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, Protocol

from fastapi import FastAPI, Header, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from runplane.auth import PrincipalSource
from runplane.errors import RunplaneError
from runplane.runs import RunHistory
from runplane.service import install_backend_errors
from runplane.wire import AuditRecord, RunStatus, to_dict
from services.journal.auth import body_reader
from services.journal.chain import bodies_of, verify_records
from services.journal.index import RunFilter, RunIndex
from services.journal.summary import RunSummary, summarize

log = logging.getLogger(__name__)

RunId = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f/]+$")]


class RunReader(Protocol):
    """Reads one run straight from Kafka (``runplane.runs``; a fake in tests of the API alone)."""

    def history(self, run_id: str, *, bodies: bool) -> RunHistory: ...
    def audit(self, run_id: str) -> list[AuditRecord]: ...


class CostOut(BaseModel):
    tokens_in: int
    tokens_out: int
    units: float
    tokens: int


class RunOut(BaseModel):
    run_id: str
    status: str | None = Field(description="ADMITTED, RUNNING, AWAITING_HUMAN, PARKED, COMPLETED, FAILED, QUARANTINED")
    capability: str | None
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


class RunList(BaseModel):
    runs: list[RunOut]


class JournalOut(BaseModel):
    run_id: str
    records: list[dict[str, Any]] = Field(description="JournalRecords as Avro-mapped dicts, in topic order")
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
    service_verdict: str | None = Field(None, description="What the journal service's audit stream says")


def _run_out(s: RunSummary) -> RunOut:
    return RunOut.model_validate(s.to_json())


def build_api(
    index: Callable[[], RunIndex | None], reader: RunReader, readers: PrincipalSource, *, title: str = "runplane journal"
) -> FastAPI:
    """The run-query app; ``index`` returns None when no Redis index is configured."""
    app = FastAPI(title=title, version="1", description=__doc__)

    install_backend_errors(app, redis_holds="run index")

    @app.exception_handler(RunplaneError)
    async def _runplane(_: Request, exc: RunplaneError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    def _index() -> RunIndex:
        idx = index()
        if idx is None:
            raise HTTPException(503, "the run index is disabled on this instance")
        return idx

    @app.get("/runs", response_model=RunList, summary="List runs, newest first")
    def list_runs(
        status: RunStatus | None = None,
        capability: str | None = Query(None, max_length=256),
        case: str | None = Query(None, max_length=256),
        since_ms: int | None = Query(None, ge=0),
        until_ms: int | None = Query(None, ge=0),
        limit: int = Query(100, ge=1, le=1000),
    ) -> RunList:
        if since_ms is not None and until_ms is not None and since_ms > until_ms:
            raise HTTPException(400, "since_ms is after until_ms")
        f = RunFilter(status, capability, case, since_ms, until_ms, limit)
        return RunList(runs=[_run_out(s) for s in _index().list(f)])

    @app.get("/runs/{run_id}", response_model=RunOut, responses={404: {"description": "unknown run"}})
    def get_run(run_id: RunId) -> RunOut:
        summary = _index().get(run_id)
        if summary is None:
            # Not indexed (yet): the audit stream is the truth the index is folded from.
            audits = reader.audit(run_id)
            if not audits:
                raise HTTPException(404, f"no run {run_id!r}")
            summary = summarize(run_id, audits)
        return _run_out(summary)

    @app.get("/runs/{run_id}/journal", response_model=JournalOut, responses={401: {}, 403: {}, 404: {}})
    def get_journal(
        run_id: RunId,
        bodies: bool = Query(False, description="include each call's body (role auditor)"),
        authorization: str | None = Header(None),
    ) -> JournalOut:
        if bodies:
            body_reader(readers, authorization)  # 401 / 403 unless an auditor's token
        history = reader.history(run_id, bodies=bodies)
        if not history.records:
            raise HTTPException(404, f"no journal records for run {run_id!r}")
        out = JournalOut(run_id=run_id, records=[_jsonable(to_dict(r)) for r in history.records], bodies=None)
        if bodies:
            out.bodies = {
                f"{era}/{call}": None if e is None else _jsonable(to_dict(e))
                for (era, call), e in sorted(history.bodies.items())
            }
        return out

    @app.get("/runs/{run_id}/verify", response_model=VerifyOut, responses={404: {}})
    def verify(run_id: RunId) -> VerifyOut:
        history = reader.history(run_id, bodies=True)
        if not history.records:
            raise HTTPException(404, f"no journal records for run {run_id!r}")
        report = verify_records(run_id, history.records, bodies_of(history.bodies))
        idx = index()
        summary = idx.get(run_id) if idx is not None else None
        return VerifyOut(
            run_id=run_id,
            verified=report.verified,
            records=report.records,
            broken_at_seq=report.broken_at_seq,
            reason=report.reason,
            body_missing=list(report.body_missing),
            service_verdict=None if summary is None else str(summary.verdict),
        )

    return app


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    # bytes and enums out of to_dict become JSON-safe text
    result: dict[str, Any] = json.loads(json.dumps(d, default=lambda v: v.hex() if isinstance(v, bytes) else str(v)))
    return result
