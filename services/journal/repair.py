"""Repair over HTTP: resume, fork and erase a run — operators only (``runplane.core.repair``).

- ``POST /runs/{id}/resume`` ``{"reason"}`` — a QUARANTINED or FAILED run replays again
  against the code deployed now;
- ``POST /runs/{id}/fork`` ``{"from_seq", "reason"}`` — a new run starting with the old
  chain's records ``0..from_seq-1``, linked to the old chain's head; the answer names it;
- ``POST /runs/{id}/erase`` ``{"reason"}`` — an ended run's bodies are tombstoned.

Each needs a bearer token whose principal has the role ``operator`` (401 without a token,
403 without the role) and sees the run (its tenant; 404 otherwise, as for an unknown id). The
operator's name comes from the token, never from the body, and goes into the order: the
executor journals it (RUN_RESUMED ``by``), so it reaches ``audit`` with the record. The
answer is 202: the order is on the run's inbox, and the executor owning the run applies it or
dead-letters it with the reason (the state checked here — 409 — may change before it
arrives). A fork is written before the answer: 409 when the run cannot be forked at that seq.
"""

from __future__ import annotations

import logging
from typing import Protocol

from fastapi import FastAPI, Header, HTTPException
from pydantic import BaseModel, Field

from runplane.core import repair as core
from runplane.serving.auth import Principal, PrincipalSource, require_principal
from runplane.wire import SessionSnapshot

log = logging.getLogger(__name__)

OPERATOR = "operator"

__all__ = ["OPERATOR", "Repairer", "install_repair_routes"]


class Repairer(Protocol):
    """The Kafka side (``runplane.runs.repair``; a fake in tests of the API alone)."""

    def snapshot(self, run_id: str) -> SessionSnapshot | None: ...
    def order(self, run_id: str, order: core.RepairOrder) -> None: ...
    def fork(self, run_id: str, from_seq: int, order: core.RepairOrder) -> str: ...


class RepairIn(BaseModel):
    reason: str = Field("", max_length=core.MAX_REASON)


class ForkIn(RepairIn):
    from_seq: int = Field(..., ge=1)


class RepairOut(BaseModel):
    run_id: str
    repair: str
    by: str
    fork_id: str | None = None


class Known(Protocol):
    def known(self, run_id: str, who: Principal) -> object: ...


def install_repair_routes(
    app: FastAPI, runs: Known, readers: PrincipalSource, repairer: Repairer | None
) -> None:
    """The three repair routes; 503 on an instance without a repairer."""

    def operator(run_id: str, authorization: str | None) -> Principal:
        who = require_principal(readers, authorization, role=OPERATOR, purpose="repair runs")
        runs.known(run_id, who)  # 404 for another tenant's run, as for an unknown one
        return who

    def backend() -> Repairer:
        if repairer is None:
            raise HTTPException(503, "repair is not enabled on this instance")
        return repairer

    def ordered(run_id: str, kind: core.RepairKind, body: RepairIn, who: Principal) -> RepairOut:
        rep = backend()
        why = core.refusal(kind, rep.snapshot(run_id))
        if why is not None:
            raise HTTPException(409, f"cannot {kind} run {run_id}: {why}")
        rep.order(run_id, core.RepairOrder(kind, who.name, body.reason))
        log.info("repair ordered", extra={"run": run_id, "repair": str(kind), "by": who.name})
        return RepairOut(run_id=run_id, repair=str(kind), by=who.name)

    @app.post("/runs/{run_id}/resume", status_code=202, response_model=RepairOut)
    def resume(run_id: str, body: RepairIn, authorization: str | None = Header(None)) -> RepairOut:
        return ordered(run_id, core.RepairKind.RESUME, body, operator(run_id, authorization))

    @app.post("/runs/{run_id}/erase", status_code=202, response_model=RepairOut)
    def erase(run_id: str, body: RepairIn, authorization: str | None = Header(None)) -> RepairOut:
        return ordered(run_id, core.RepairKind.ERASE, body, operator(run_id, authorization))

    @app.post("/runs/{run_id}/fork", status_code=202, response_model=RepairOut)
    def fork(run_id: str, body: ForkIn, authorization: str | None = Header(None)) -> RepairOut:
        who = operator(run_id, authorization)
        order = core.RepairOrder(core.RepairKind.FORK, who.name, body.reason)
        try:
            fork_id = backend().fork(run_id, body.from_seq, order)
        except core.RepairRefused as exc:
            raise HTTPException(409, str(exc)) from exc
        log.info("run forked", extra={"run": run_id, "fork": fork_id, "by": who.name})
        return RepairOut(run_id=run_id, repair="fork", by=who.name, fork_id=fork_id)
