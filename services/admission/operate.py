"""``POST /runs/{run}/signals`` and ``POST /runs/{run}/cancel``: operating a run over HTTP.

For people and systems that do not speak Kafka. The caller authenticates with a bearer token
(the deployment's principals file, ``RUNPLANE_WORKLIST_PRINCIPALS_FILE``, the worklist's);
identity and tenant come from the token, never from the body, and are journaled with the
request (``sent_by`` / ``requested_by``). ``{run}`` is a run id or an admission key.

    POST /runs/order-17/signals   {"name": "payment_received", "payload": {...}, "signal_id": "pay-991"}
    POST /runs/order-17/cancel    {"reason": "customer withdrew", "request_id": "c-1"}

Answers (errors as JSON ``{"detail": why, "refused": code}``, the format of every runplane API;
documented at admission's ``/docs``): 202 ``{"run_id", "name", "signal_id"}`` (sent; the run
accepts one per id, so a retry with the same id is safe), 400 bad body, 401 no/unknown token,
403 cancel without the ``operator`` role, 404 unknown run or another tenant's, 409 run already
ended (with its status), 503 Kafka did not take it in time (retry with the same id). The checks
and the send are ``runplane.runs.operate``'s, the same as the client's and the CLI's.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, Final

from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from runplane.errors import RetryableError
from runplane.runs import operate
from runplane.serving.auth import PrincipalSource, require_principal
from runplane.serving.shell import error_response

__all__ = ["CANCEL_ROLE", "HttpOperate"]

# Who may cancel a run of their tenant: principals with this role.
CANCEL_ROLE: Final = "operator"
MAX_BODY_BYTES: Final = 256 * 1024
_STATUS: Final = {"unknown": 404, "ended": 409, "bad_request": 400}


class HttpOperate:
    """The endpoints; ``target`` is a ``runplane.runs.client.Client`` (one request at a time)."""

    def __init__(self, principals: PrincipalSource, target: operate.Target) -> None:
        self._principals = principals
        self._target = target
        self._lock = threading.Lock()

    def routes(self) -> list[BaseRoute]:
        return [
            APIRoute("/runs/{run}/signals", self.signal, methods=["POST"], summary="Signal a run"),
            APIRoute("/runs/{run}/cancel", self.cancel, methods=["POST"], summary="Cancel a run"),
        ]

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
        try:
            sent = await run_in_threadpool(self._locked, fn)
        except operate.RunRefused as exc:
            status = None if exc.status is None else exc.status.value
            return _error(_STATUS.get(exc.code, 400), exc.code, exc.reason, run_status=status)
        except RetryableError as exc:
            return error_response(503, str(exc), headers={"Retry-After": "1"})
        content = {"run_id": sent.run_id, "name": sent.name, "signal_id": sent.signal_id}
        return JSONResponse(content, status_code=202)

    def _locked(self, fn: Callable[[], operate.Sent]) -> operate.Sent:
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
