"""``POST /runs/{run}/signals|updates|cancel``, ``GET /runs/{run}/queries/{name}``: operating a
run over HTTP.

For people and systems that do not speak Kafka. The caller authenticates with a bearer token
(the deployment's principals file, ``RUNPLANE_WORKLIST_PRINCIPALS_FILE``, the worklist's);
identity and tenant come from the token, never from the body, and are journaled with the
request (``sent_by`` / ``requested_by``). ``{run}`` is a run id or an admission key.

    POST /runs/order-17/signals   {"name": "payment_received", "payload": {...}, "signal_id": "pay-991"}
    POST /runs/order-17/cancel    {"reason": "customer withdrew", "request_id": "c-1"}
    POST /runs/cart-9/updates     {"name": "add_item", "payload": {...}, "update_id": "add-1"}
    GET  /runs/cart-9/queries/items?args={...}

Answers (errors as JSON ``{"detail": why, "refused": code}``, the format of every runplane API;
documented at admission's ``/docs``): 202 ``{"run_id", "name", "signal_id"}`` (sent; the run
accepts one per id, so a retry with the same id is safe), 400 bad body, 401 no/unknown token,
403 cancel without the ``operator`` role, 404 unknown run or another tenant's, 409 run already
ended (with its status), 503 Kafka did not take it in time (retry with the same id). The checks
and the send are ``runplane.runs.operate``'s, the same as the client's and the CLI's.

An update waits for the run's answer (``runs.updates``): 200 ``{"run_id", "name", "update_id",
"answer"}``, 422 refused by the run — its validator's reason, ``refused`` one of
``operate.REFUSALS``; nothing was journaled — and 504 when the run did not answer within
``wait_s`` (body, default 10, at most 30: the run has not asked for the update yet; ask again
with the same ``update_id``, answered once). A query answers 200 ``{"run_id", "name", "answer"}``
from the run's latest snapshot (journals nothing, wakes nothing; an ended run's too), 422 for
an unknown query or one that raised. Any principal of the run's tenant may update and query
it, as it may signal it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, Final, TypeVar

from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from runplane.core.agents import REGISTRY, AgentRegistry
from runplane.errors import RetryableError
from runplane.runs import operate
from runplane.serving.auth import PrincipalSource, require_principal
from runplane.serving.shell import error_response

__all__ = ["CANCEL_ROLE", "HttpOperate"]

T = TypeVar("T")

# Who may cancel a run of their tenant: principals with this role.
CANCEL_ROLE: Final = "operator"
MAX_BODY_BYTES: Final = 256 * 1024
# How long an update waits for the run's answer: by default, and at most (one request holds
# admission's one Kafka client while it waits).
UPDATE_WAIT_S: Final = 10.0
MAX_UPDATE_WAIT_S: Final = 30.0
_STATUS: Final = {
    "unknown": 404,
    "ended": 409,
    "bad_request": 400,
    **{code: 422 for code in operate.REFUSALS},
}


class HttpOperate:
    """The endpoints; ``target`` is a ``runplane.runs.client.Client`` (one request at a time);
    ``agents``: the registry whose queries answer (default ``REGISTRY``, as admission fills
    it from ``RUNPLANE_AGENT_MODULES``)."""

    def __init__(
        self,
        principals: PrincipalSource,
        target: operate.Asker,
        agents: AgentRegistry | None = None,
    ) -> None:
        self._principals = principals
        self._target = target
        self._agents = REGISTRY if agents is None else agents
        self._lock = threading.Lock()

    def routes(self) -> list[BaseRoute]:
        return [
            APIRoute("/runs/{run}/signals", self.signal, methods=["POST"], summary="Signal a run"),
            APIRoute("/runs/{run}/updates", self.update, methods=["POST"], summary="Update a run"),
            APIRoute(
                "/runs/{run}/queries/{name}", self.query, methods=["GET"], summary="Query a run"
            ),
            APIRoute("/runs/{run}/cancel", self.cancel, methods=["POST"], summary="Cancel a run"),
        ]

    async def update(self, request: Request) -> Response:
        who = require_principal(
            self._principals, request.headers.get("authorization"), purpose="update a run"
        )
        body = await _body(request)
        name = body.get("name")
        if not isinstance(name, str):
            return _error(400, "bad_request", "the body names the update: {'name': ...}")
        update_id = _optional_text(body, "update_id")
        wait_s = body.get("wait_s", UPDATE_WAIT_S)
        if not isinstance(wait_s, int | float) or isinstance(wait_s, bool) or wait_s <= 0:
            return _error(400, "bad_request", "wait_s is a positive number of seconds")
        wait = min(float(wait_s), MAX_UPDATE_WAIT_S)
        answered = await self._call(
            lambda: operate.update(
                self._target,
                request.path_params["run"],
                name,
                body.get("payload"),
                sent_by=who.name,
                update_id=update_id,
                tenant=who.tenant,
                timeout=wait,
            ),
            timeout_status=504,
        )
        if isinstance(answered, Response):
            return answered
        content = {
            "run_id": answered.run_id,
            "name": answered.name,
            "update_id": answered.update_id,
            "answer": answered.answer,
        }
        return JSONResponse(content, status_code=200)

    async def query(self, request: Request) -> Response:
        who = require_principal(
            self._principals, request.headers.get("authorization"), purpose="query a run"
        )
        raw = request.query_params.get("args")
        try:
            args = None if raw is None else json.loads(raw)
        except ValueError as exc:
            return _error(400, "bad_request", f"args is not JSON: {exc}")
        run, name = request.path_params["run"], request.path_params["name"]
        answer = await self._call(
            lambda: operate.query(self._target, self._agents, run, name, args, tenant=who.tenant)
        )
        if isinstance(answer, Response):
            return answer
        return JSONResponse({"run_id": run, "name": name, "answer": answer}, status_code=200)

    async def signal(self, request: Request) -> Response:
        who = require_principal(
            self._principals, request.headers.get("authorization"), purpose="signal a run"
        )
        body = await _body(request)
        name = body.get("name")
        if not isinstance(name, str):
            return _error(400, "bad_request", "the body names the signal: {'name': ...}")
        signal_id = _optional_text(body, "signal_id")
        return await self._send(
            lambda: operate.signal(
                self._target,
                request.path_params["run"],
                name,
                body.get("payload"),
                sent_by=who.name,
                signal_id=signal_id,
                tenant=who.tenant,
            )
        )

    async def cancel(self, request: Request) -> Response:
        who = require_principal(
            self._principals,
            request.headers.get("authorization"),
            role=CANCEL_ROLE,
            purpose="cancel a run",
        )
        body = await _body(request)
        reason = _optional_text(body, "reason") or ""
        request_id = _optional_text(body, "request_id")
        return await self._send(
            lambda: operate.cancel(
                self._target,
                request.path_params["run"],
                reason=reason,
                sent_by=who.name,
                request_id=request_id,
                tenant=who.tenant,
            )
        )

    async def _send(self, fn: Callable[[], operate.Sent]) -> Response:
        sent = await self._call(fn)
        if isinstance(sent, Response):
            return sent
        content = {"run_id": sent.run_id, "name": sent.name, "signal_id": sent.signal_id}
        return JSONResponse(content, status_code=202)

    async def _call(self, fn: Callable[[], T], *, timeout_status: int = 503) -> T | Response:
        """``fn``'s value, or the error answer of its refusal (``RetryableError``: Kafka did
        not take it in time, 503 — or, for an update, the run did not answer, 504)."""
        try:
            return await run_in_threadpool(self._locked, fn)
        except operate.RunRefused as exc:
            status = None if exc.status is None else exc.status.value
            return _error(_STATUS.get(exc.code, 400), exc.code, exc.reason, run_status=status)
        except RetryableError as exc:
            return error_response(timeout_status, str(exc), headers={"Retry-After": "1"})

    def _locked(self, fn: Callable[[], T]) -> T:
        with self._lock:  # one Kafka client, not thread-safe
            return fn()


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise HTTPException(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(raw or b"{}")
    except ValueError as exc:
        raise HTTPException(400, f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise HTTPException(400, "the body is a JSON object")
    return data


def _optional_text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise HTTPException(400, f"{key} must be a non-empty string")
    return value


def _error(status: int, code: str, reason: str, **extra: Any) -> JSONResponse:
    return error_response(status, reason, refused=code, **extra)
