"""Operating a run from outside: send it a signal or an update, query it, or cancel it.

    with Client(settings) as client:
        client.signal("order-17", "payment_received", {"amount": 120}, signal_id="pay-991")
        client.update("cart-9", "add_item", {"sku": "A"}, update_id="add-1")   # -> the answer
        client.query("cart-9", "items")          # -> from its last checkpoint, journals nothing
        client.cancel("r-5f1c…", reason="customer withdrew")

A run is named by its run id or by the admission key it was admitted under (resolved through
the ``admission.claims`` table, whose rows are per tenant: ``runplane.core.keys.claim_key``). Before anything is sent, the run's latest snapshot is read:
an unknown run, a run of another tenant (indistinguishable from unknown, as in the journal
API) or a run that already ended is refused with ``RunRefused`` and a reason — nothing is
produced. The request then goes to the run's inbox as a ``Signal`` (a cancel is the reserved
signal ``runplane.cancel``) carrying the sender's identity and a ``signal_id``: the run
accepts one signal per id, so a retry after a timeout is always safe — pass your own id to
make your retries idempotent (one is minted otherwise).

An **update** (``runplane.core.updates``) goes the same way, as the reserved signal
``runplane.update/<name>`` whose ``signal_id`` is the update id, and its caller then waits for
the run's ``UpdateAnswer`` on ``runs.updates`` (key: the update id): the answer, or —
``RunRefused`` with the validator's reason — a refusal that left no record in the run's
journal. No answer in time (the run is busy elsewhere and has not asked for the update yet)
is a ``RetryableError``: ask again with the same update id, which is answered once, with the
first answer. A **query** reads the run's latest snapshot and answers with the agent's declared
query function over its last checkpoint's state: it sends nothing to the run.

Identity: the HTTP endpoints on admission (``services/admission/operate.py``) take the sender
and its tenant from the bearer token; :func:`over_http` is their client (``runplane signal``
and ``runplane runs cancel`` use it by default). On Kafka (:func:`signal`, :func:`cancel`,
``Client.signal``) the sender is the principal the caller names (``sent_by``, default
``RUNPLANE_INITIATOR``) and only the topic's ACLs authenticate it: the CLI takes that path in
dev mode only. Either way it is journaled with the signal (``sent_by``) or the cancel
(``requested_by``). A signal's payload is labelled untrusted at the source.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, Protocol
from urllib.parse import quote

import httpx

from runplane.core.agents import AgentRegistry, UnknownCapability
from runplane.core.canonical import canonical_json
from runplane.core.keys import claim_key
from runplane.core.limits import DEFAULT_LIMITS
from runplane.core.updates import QueryFailed, answer_query, wire_name
from runplane.errors import RetryableError, TerminalError
from runplane.wire import AdmissionClaim, RunStatus, SessionSnapshot, Signal, UpdateAnswer

__all__ = [
    "CANCEL_SIGNAL",
    "REFUSALS",
    "Answered",
    "Asker",
    "RunRefused",
    "Sent",
    "Target",
    "cancel",
    "over_http",
    "query",
    "query_over_http",
    "resolve",
    "signal",
    "update",
    "update_over_http",
]

CANCEL_SIGNAL: Final = "runplane.cancel"  # == runplane.core.engine.cancel.CANCEL_SIGNAL
_ENDED: Final = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED})


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# The codes of an update the run refused (``UpdateAnswer.refused``) and of a query that could
# not be answered (``core.updates.QueryFailed``): the request was well formed, the run said no.
REFUSALS: Final = frozenset(
    {"invalid", "unknown_update", "too_large", "signals_full", "unknown_query", "query_failed"}
)


class RunRefused(TerminalError):
    """The run cannot take this request. ``code``: ``unknown`` (no such run, or another
    tenant's), ``ended`` (it already ended; ``status`` says how) or ``bad_request``; for an
    update or a query also one of ``REFUSALS`` (the run's validator's reason); over HTTP
    also ``unauthenticated`` (no or unknown token) and ``forbidden`` (a role missing)."""

    def __init__(self, code: str, reason: str, status: RunStatus | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class Sent:
    """What was sent: to which run, under which signal id."""

    run_id: str
    name: str
    signal_id: str


@dataclass(frozen=True)
class Answered:
    """A run's answer to an update: which run, which update, and the answer (JSON)."""

    run_id: str
    name: str
    update_id: str
    answer: Any


class Target(Protocol):
    """What sending needs of a client (``runplane.runs.client.Client`` is one)."""

    def latest(self, topic: str, key: str, *, partition_key: str | None = None) -> Any | None: ...
    def to_inbox(self, record: Signal) -> None: ...


class Asker(Target, Protocol):
    """What an update needs besides: send the update and wait for the run's answer to it."""

    def ask(self, record: Signal, *, timeout: float) -> UpdateAnswer: ...


def _claimed(target: Target, key: str, tenant: str | None) -> AdmissionClaim | None:
    """The claim of admission key ``key`` for ``tenant``: its per-tenant row, else a row
    written before per-tenant claims (keyed by the key alone) of that tenant. Without a
    tenant only such an older row names a run: a key alone is ambiguous across tenants."""
    if tenant is not None:
        mine = target.latest("admission.claims", claim_key(tenant, key), partition_key=key)
        if isinstance(mine, AdmissionClaim):
            return mine
    older = target.latest("admission.claims", key)
    if isinstance(older, AdmissionClaim) and tenant in (None, older.tenant):
        return older
    return None


def lookup(target: Target, run_or_key: str, tenant: str | None = None) -> SessionSnapshot | None:
    """The run's latest snapshot by run id or, failing that, by the admission key ``tenant``
    admitted it under (``admission.claims``, ``_claimed``); None when neither names a run.
    Every command that takes a run resolves it here."""
    snap = target.latest("sessions", run_or_key)
    if not isinstance(snap, SessionSnapshot):
        claim = _claimed(target, run_or_key, tenant)
        if claim is not None:
            snap = target.latest("sessions", claim.run_id)
    return snap if isinstance(snap, SessionSnapshot) else None


def resolve(target: Target, run_or_key: str, tenant: str | None) -> SessionSnapshot:
    """The run's latest snapshot, by run id or admission key; refused if unknown to ``tenant``
    (None: any tenant — a caller already trusted for all of them) or ended."""
    snap = lookup(target, run_or_key, tenant)
    if not isinstance(snap, SessionSnapshot) or (tenant is not None and snap.tenant != tenant):
        raise RunRefused("unknown", f"no run {run_or_key!r} (not started yet, or not yours)")
    if snap.status in _ENDED:
        raise RunRefused(
            "ended", f"run {snap.session_id} already ended ({snap.status.value})", snap.status
        )
    return snap


def signal(
    target: Target,
    run_or_key: str,
    name: str,
    payload: Any,
    *,
    sent_by: str,
    signal_id: str | None = None,
    tenant: str | None = None,
    now_ms: Callable[[], int] | None = None,
) -> Sent:
    """Send the signal ``name`` to a live run (see the module docstring). Names under
    ``runplane.`` are the platform's (``cancel`` sends one): refused here."""
    if not name.strip() or name.startswith("runplane."):
        raise RunRefused("bad_request", f"signal name {name!r} is empty or reserved")
    return _send(target, run_or_key, name, payload, sent_by, signal_id, tenant, now_ms or _now_ms)


def _send(
    target: Target,
    run_or_key: str,
    name: str,
    payload: Any,
    sent_by: str,
    signal_id: str | None,
    tenant: str | None,
    now_ms: Callable[[], int],
) -> Sent:
    record = _signal_for(target, run_or_key, name, payload, sent_by, tenant, now_ms)
    record = replace(record, signal_id=signal_id or f"sig-{uuid.uuid4().hex}")
    target.to_inbox(record)
    return Sent(record.session_id, name, str(record.signal_id))


def _signal_for(
    target: Target,
    run_or_key: str,
    name: str,
    payload: Any,
    sent_by: str,
    tenant: str | None,
    now_ms: Callable[[], int],
) -> Signal:
    """The Signal for a live run of ``tenant`` (checked), its id still to be given."""
    if not sent_by.strip():
        raise RunRefused("bad_request", "a signal names its sender")
    try:
        payload_json = canonical_json(payload)
    except (TypeError, ValueError) as exc:
        raise RunRefused("bad_request", f"the payload is not JSON: {exc}") from None
    if len(payload_json.encode("utf-8")) > DEFAULT_LIMITS.max_signal_bytes:
        # The run would refuse it (dead-lettered, unseen by the sender): say so now.
        raise RunRefused(
            "bad_request", f"the payload is over {DEFAULT_LIMITS.max_signal_bytes} bytes"
        )
    snap = resolve(target, run_or_key, tenant)
    return Signal(
        session_id=snap.session_id,
        name=name,
        payload_json=payload_json,
        sent_ms=now_ms(),
        signal_id=None,
        sent_by=sent_by,
    )


def update(
    target: Asker,
    run_or_key: str,
    name: str,
    payload: Any,
    *,
    sent_by: str,
    update_id: str | None = None,
    tenant: str | None = None,
    timeout: float = 30.0,
) -> Answered:
    """Send the update ``name`` to a live run and wait for its answer (module docstring):
    ``RunRefused`` (a code of ``REFUSALS``, the run's reason) when the run refused it,
    ``RetryableError`` when no answer came within ``timeout`` seconds."""
    if not name.strip() or "/" in name or name.startswith("runplane."):
        raise RunRefused("bad_request", f"update name {name!r} is empty, has a '/' or is reserved")
    record = _signal_for(target, run_or_key, wire_name(name), payload, sent_by, tenant, _now_ms)
    record = replace(record, signal_id=update_id or f"upd-{uuid.uuid4().hex}")
    answer = target.ask(record, timeout=timeout)
    if answer.refused is not None:
        raise RunRefused(answer.refused, answer.reason or f"update {name!r} refused")
    value = None if answer.answer_json is None else json.loads(answer.answer_json)
    return Answered(record.session_id, name, answer.update_id, value)


def query(
    target: Target,
    registry: AgentRegistry,
    run_or_key: str,
    name: str,
    args: Any = None,
    *,
    tenant: str | None = None,
) -> Any:
    """The answer of the run's declared query ``name`` over the state of its last checkpoint
    (None before one) — of an ended run too; sends nothing to it, journals nothing.
    ``registry``: the agents (the version that serves the run answers). ``RunRefused``:
    ``unknown`` run, or ``unknown_query`` / ``query_failed``."""
    snap = lookup(target, run_or_key, tenant)
    if snap is None or (tenant is not None and snap.tenant != tenant):
        raise RunRefused("unknown", f"no run {run_or_key!r} (not started yet, or not yours)")
    try:
        spec = registry.spec_for(snap.capability, snap.agent_version)
    except (UnknownCapability, TerminalError) as exc:
        raise RunRefused("unknown_query", f"run {snap.session_id}: {exc}") from None
    state = None if snap.checkpoint_json is None else json.loads(snap.checkpoint_json)
    try:
        return answer_query(spec.queries.get(name), name, state, args)
    except QueryFailed as exc:
        raise RunRefused(exc.code, exc.reason) from None


def cancel(
    target: Target,
    run_or_key: str,
    *,
    reason: str,
    sent_by: str,
    request_id: str | None = None,
    tenant: str | None = None,
) -> Sent:
    """Ask a live run to cancel (``runplane.core.engine.cancel`` says what follows)."""
    return _send(
        target, run_or_key, CANCEL_SIGNAL, {"reason": reason}, sent_by, request_id, tenant, _now_ms
    )


# What admission's operator endpoints answer, by status, when they answer with ``detail``
# only (the token checks and a bad body) rather than their own ``refused`` code.
_HTTP_CODES: Final = {400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "unknown"}


def over_http(
    url: str,
    token: str,
    run_or_key: str,
    action: Literal["signals", "cancel"],
    body: Mapping[str, Any],
    *,
    timeout: float = 30.0,
    transport: httpx.BaseTransport | None = None,
) -> Sent:
    """POST ``body`` to ``{url}/runs/{run}/{action}`` on admission with ``token``: the sender
    and the tenant are the token's principal (the body names neither). ``RunRefused`` with
    the endpoint's code and reason when refused; ``RetryableError`` when admission cannot be
    reached or Kafka did not take it in time (retry with the same id)."""
    path = f"/runs/{quote(run_or_key, safe='')}/{action}"
    answer = _http(url, token, "POST", path, body, expect=202, timeout=timeout, transport=transport)
    return Sent(str(answer["run_id"]), str(answer["name"]), str(answer["signal_id"]))


def update_over_http(
    url: str,
    token: str,
    run_or_key: str,
    body: Mapping[str, Any],
    *,
    timeout: float = 30.0,
    transport: httpx.BaseTransport | None = None,
) -> Answered:
    """POST an update (``{"name", "payload", "update_id"}``) to ``{url}/runs/{run}/updates``
    and return the run's answer; refused and unreachable as ``over_http`` says, and
    ``RetryableError`` when the run did not answer in time (ask again with the same id)."""
    path = f"/runs/{quote(run_or_key, safe='')}/updates"
    # The endpoint waits for the run up to its own timeout: give it a little longer.
    answer = _http(
        url, token, "POST", path, body, expect=200, timeout=timeout + 5.0, transport=transport
    )
    return Answered(
        str(answer["run_id"]), str(answer["name"]), str(answer["update_id"]), answer["answer"]
    )


def query_over_http(
    url: str,
    token: str,
    run_or_key: str,
    name: str,
    args: Any = None,
    *,
    timeout: float = 30.0,
    transport: httpx.BaseTransport | None = None,
) -> Any:
    """GET ``{url}/runs/{run}/queries/{name}`` (``args`` as JSON in ``?args=``) → the answer."""
    path = f"/runs/{quote(run_or_key, safe='')}/queries/{quote(name, safe='')}"
    params = None if args is None else {"args": canonical_json(args)}
    answer = _http(
        url,
        token,
        "GET",
        path,
        None,
        expect=200,
        timeout=timeout,
        transport=transport,
        params=params,
    )
    return answer["answer"]


def _http(
    url: str,
    token: str,
    method: str,
    path: str,
    body: Mapping[str, Any] | None,
    *,
    expect: int,
    timeout: float,
    transport: httpx.BaseTransport | None,
    params: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One request to admission's run operations: its JSON answer on ``expect``, else the
    refusal as ``RunRefused`` (``RetryableError`` for 503/504 and an unreachable admission)."""
    try:
        with httpx.Client(base_url=url, timeout=timeout, transport=transport) as http:
            r = http.request(
                method,
                path,
                json=None if body is None else dict(body),
                params=params,
                headers={"Authorization": f"Bearer {token}"},
            )
    except httpx.HTTPError as exc:
        raise RetryableError(f"cannot reach admission at {url}: {exc}", retry_after=1.0) from exc
    try:
        answer = r.json()
    except ValueError:
        answer = {}
    if not isinstance(answer, dict):
        answer = {}
    if r.status_code == expect:
        return answer
    reason = str(answer.get("reason") or answer.get("detail") or r.text or r.reason_phrase)
    if r.status_code in (503, 504):
        raise RetryableError(f"admission: {reason}", retry_after=1.0)
    code = str(answer.get("refused") or _HTTP_CODES.get(r.status_code, "bad_request"))
    raw = answer.get("run_status")
    status = RunStatus(raw) if isinstance(raw, str) and raw in RunStatus.__members__ else None
    raise RunRefused(code, f"{r.status_code}: {reason}", status)
