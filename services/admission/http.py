"""``POST /admit``: admission over HTTP, for emitters that do not speak Kafka.

The same emitters, keys and rules as on Kafka (``runplane.signing.admission``); only the signed bytes
differ. The emitter signs its JSON body — ``{"admission_key", "capability", "input",
"correlation_keys", "tenant", "initiator"}`` — with the three headers ``Runplane-Key-Id``,
``Runplane-Signed-Ms`` and ``Runplane-Signature`` (base64 here), over
``message(key id, signed ms, admission key, body)``::

    sig = key.sign(runplane.signing.admission.message(key_id, now_ms, b"order-17", body))

The endpoint checks the signature and the emitter's tenant and initiator *before* anything
reaches Kafka (401 / 403 with the reason: the network cannot fill the admission topic), then
produces the AdmissionRequest with the emitter's own signature and body in its headers
(``SIGNED_JSON_HEADER``) and answers with admission's reply (200 admitted or duplicate, 422
refused, 503 no answer in time: retrying with the same key is safe). It adds no trust of its
own: admission checks the forwarded signature again and that the record says what the signed
JSON says, so a request is admitted exactly as if the emitter had produced it.

A refused request's signature stays refused for the window (``identity.RefusedSignatures``,
shared with the processor): the same signed bytes sent again are refused, 401.

An unsigned request (none of the three headers) is treated as the Kafka path treats one: refused
``unauthenticated``, unless admission runs in dev mode (``RUNPLANE_ADMISSION_ALLOW_UNSIGNED``),
where it is forwarded unsigned and its tenant and initiator are the body's — as an unsigned
record produced to the topic would be. (It is forwarded with no signature at all, never signed
with a key of admission's own.)

Errors are JSON, the one format of every runplane API: ``{"detail": <why>}``, and here also
``"refused": <code>`` (``runplane.serving.shell.error_response``). The endpoint is documented
at ``/docs`` with the rest of admission's HTTP API. One request is forwarded at a time per
admission instance (one Kafka client, not thread-safe): this is an entry for systems that emit
a few requests, not a bulk path.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
from typing import Protocol

from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from runplane.errors import RetryableError, WireError
from runplane.serving.shell import error_response
from runplane.signing.admission import (
    KEY_ID_HEADER,
    SIGNATURE_HEADER,
    SIGNED_JSON_HEADER,
    SIGNED_MS_HEADER,
    Headers,
    Unsigned,
    Verification,
    Verified,
    verify,
)
from runplane.wire import AdmissionOutcome, AdmissionReply, AdmissionRequest, to_dict
from services.admission.identity import (
    REPLAYED,
    Authentication,
    identity_problem,
    request_from_json,
)

__all__ = ["HttpAdmission"]

MAX_BODY_BYTES = 1024 * 1024


class Sender(Protocol):
    def send(
        self,
        request: AdmissionRequest,
        *,
        timeout: float = 30.0,
        signed: tuple[Headers, int] | None = None,
    ) -> AdmissionReply: ...


def _refused(status: int, code: str, reason: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Runplane-Signature"} if status == 401 else None
    return error_response(status, reason, refused=code, headers=headers)


def _signature_headers(request: Request) -> Headers | str | None:
    """The Kafka form of the request's signature headers, None when it has none at all (an
    unsigned request), or why they do not make a signature."""
    key_id = request.headers.get(KEY_ID_HEADER)
    signed_ms = request.headers.get(SIGNED_MS_HEADER)
    signature = request.headers.get(SIGNATURE_HEADER)
    if key_id is None and signed_ms is None and signature is None:
        return None
    if key_id is None or signed_ms is None or signature is None:
        return "unsigned request: sign the body (Runplane-Key-Id, -Signed-Ms, -Signature)"
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return "Runplane-Signature is not base64"
    return [
        (KEY_ID_HEADER, key_id.encode()),
        (SIGNED_MS_HEADER, signed_ms.encode()),
        (SIGNATURE_HEADER, raw),
    ]


_ADMIT_OPENAPI: dict[str, object] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["admission_key", "capability", "input", "tenant", "initiator"],
                    "properties": {
                        "admission_key": {"type": "string", "description": "idempotency key"},
                        "capability": {"type": "string"},
                        "input": {"description": "any JSON: the capability's input"},
                        "correlation_keys": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        },
                        "tenant": {"type": "string"},
                        "initiator": {"type": "string"},
                    },
                }
            }
        },
    },
    "parameters": [
        {"name": h, "in": "header", "required": False, "schema": {"type": "string"}}
        for h in (KEY_ID_HEADER, SIGNED_MS_HEADER, SIGNATURE_HEADER)
    ],
}
_ERROR = {"content": {"application/json": {"example": {"detail": "why", "refused": "code"}}}}
_ADMIT_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {"description": "admitted, or a duplicate of an admitted key (admission's reply)"},
    400: {"description": "the body is not a request", **_ERROR},
    401: {"description": "unsigned (outside dev mode), a bad signature or a replay", **_ERROR},
    403: {"description": "the emitter may not speak for this tenant or initiator", **_ERROR},
    413: {"description": "the body is too large", **_ERROR},
    422: {"description": "refused by admission (its reply says why)"},
    503: {"description": "no answer in time: retry with the same key", **_ERROR},
}


class HttpAdmission:
    """The endpoint; ``sender`` is a :class:`runplane.runs.client.Client` (one request at a time)."""

    def __init__(self, auth: Authentication, sender: Sender, *, timeout: float = 30.0) -> None:
        self._auth = auth
        self._sender = sender
        self._timeout = timeout
        self._lock = threading.Lock()

    def routes(self) -> list[BaseRoute]:
        return [
            APIRoute(
                "/admit",
                self.admit,
                methods=["POST"],
                summary="Ask for a run (signed by an emitter; unsigned in dev mode)",
                description=__doc__,
                openapi_extra=_ADMIT_OPENAPI,
                responses=_ADMIT_RESPONSES,
            )
        ]

    async def admit(self, request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return _refused(413, "invalid_input", f"the body is larger than {MAX_BODY_BYTES} bytes")
        headers = _signature_headers(request)
        if isinstance(headers, str):
            return _refused(401, "unauthenticated", headers)
        now_ms = time.time_ns() // 1_000_000
        try:
            req = request_from_json(body, now_ms)
        except (ValueError, WireError) as exc:
            return _refused(400, "bad_request", str(exc))
        verification: Verification = Unsigned()
        if headers is not None:
            if self._auth.replayed(headers, now_ms):
                return _refused(401, "unauthenticated", REPLAYED)
            verification = verify(
                self._auth.registry(),
                req.admission_key.encode("utf-8"),
                body,
                headers,
                now_ms,
                window_ms=self._auth.window_ms,
            )
        problem = identity_problem(req, verification, allow_unsigned=self._auth.allow_unsigned)
        if problem is not None:
            if headers is not None:
                # Refused here, refused if the same signed bytes come again within the window.
                self._auth.remember_refusal(req.admission_key, headers, problem[0].value, now_ms)
            status = 403 if isinstance(verification, Verified) else 401
            return _refused(status, problem[0].value, problem[1])
        # Dev mode's unsigned request goes on with no headers (never signed with our own key).
        forwarded = [] if headers is None else [*headers, (SIGNED_JSON_HEADER, body)]
        try:
            reply = await run_in_threadpool(self._send, req, (forwarded, now_ms))
        except RetryableError as exc:
            return error_response(503, str(exc), headers={"Retry-After": "1"})
        refused = reply.outcome is AdmissionOutcome.REFUSED
        content = json.loads(json.dumps(to_dict(reply), default=str))
        return JSONResponse(content, status_code=422 if refused else 200)

    def _send(self, req: AdmissionRequest, signed: tuple[Headers, int]) -> AdmissionReply:
        with self._lock:
            return self._sender.send(req, timeout=self._timeout, signed=signed)
