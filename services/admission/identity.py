"""Who may ask for this run: the emitter a signature names, checked against the request (pure).

Tenant and initiator are fields of the AdmissionRequest (its wire bytes do not change), but
they are believed only as far as the signing emitter may speak for them: an emitter is
registered for one tenant and, optionally, a list of initiators (``runplane.signing.admission``). So:

- a **bad signature** (unknown or revoked key, does not verify, outside the replay window,
  incomplete headers) is refused ``unauthenticated``;
- an **unsigned** request is refused ``unauthenticated`` unless admission runs in dev mode
  (``RUNPLANE_ADMISSION_ALLOW_UNSIGNED=true``; off in the chart);
- a signed request naming **another tenant** than its emitter's is refused ``forged_tenant``,
  and one naming an initiator the emitter may not name ``forbidden_initiator``.

These refusals are answered (a REFUSED reply, as every refusal) *and* dead-lettered with the
reason (:data:`DEAD_LETTERED`): an operator looks for forgery attempts in the dead-letter
topic, not in replies only the emitter reads.

The check runs before the duplicate lookup, so a request that is not authenticated learns
nothing about an existing run of its key.

Replays: the window compares the signature's time with the record's timestamp, which the
``admission`` topic has the broker stamp on append (``message.timestamp.type=LogAppendTime``,
``runplane.kafka.topics``), so a producer cannot give a replay its original time. Within the
window, a refused request's signature is remembered: the same signed bytes produced again —
after their key was registered, say — are refused again. The processor remembers it as a
RefusedSignature row of its claims table, committed with the refusal, so a restart or a new
owner of the partition restores it (and the handler's tick tombstones it once the window has
passed); ``POST /admit``, which refuses before anything reaches Kafka, in the instance's
memory (:class:`RefusedSignatures`).
"""

from __future__ import annotations

import enum
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from runplane.errors import WireError
from runplane.kafka.handler import Incoming
from runplane.serving.watched import WatchedFile
from runplane.signing.admission import (
    DEFAULT_WINDOW_MS,
    SIGNATURE_HEADER,
    SIGNED_JSON_HEADER,
    SIGNED_MS_HEADER,
    BadSignature,
    Emitters,
    Headers,
    Unsigned,
    Verification,
    Verified,
    header,
    verify,
)
from runplane.wire import AdmissionRequest, Record, RefusedSignature


class AuthRefusal(enum.StrEnum):
    """The refusal codes of this module (members of admission's Refusal by value)."""

    UNAUTHENTICATED = "unauthenticated"
    FORGED_TENANT = "forged_tenant"
    FORBIDDEN_INITIATOR = "forbidden_initiator"


DEAD_LETTERED = frozenset(AuthRefusal)


def identity_problem(
    req: AdmissionRequest, verification: Verification, *, allow_unsigned: bool
) -> tuple[AuthRefusal, str] | None:
    """Why this request's emitter may not ask for it, or None."""
    match verification:
        case BadSignature(reason):
            return AuthRefusal.UNAUTHENTICATED, f"bad signature: {reason}"
        case Unsigned():
            if allow_unsigned:
                return None
            return (
                AuthRefusal.UNAUTHENTICATED,
                "unsigned request: admission requires a signature (sign with an emitter key, "
                "e.g. RUNPLANE_EMITTER_KEY_FILE for runplane emit and runplane.runs.client)",
            )
        case Verified(emitter, key_id):
            if not emitter.speaks_for(req.tenant):
                return (
                    AuthRefusal.FORGED_TENANT,
                    f"emitter {emitter.name} (key {key_id}) speaks for tenant "
                    f"{emitter.tenant!r}, not {req.tenant!r}",
                )
            if not emitter.may_name(req.initiator):
                return (
                    AuthRefusal.FORBIDDEN_INITIATOR,
                    f"emitter {emitter.name} may not start runs for initiator {req.initiator!r}",
                )
            return None
    raise AssertionError(verification)


REFUSED_PREFIX: Final = "runplane.refused/"
Lookup = Callable[[str], Record | None]


def refused_row(signature: bytes) -> str:
    """The claims-table row of a refused signature (hex SHA-256: the row key stays short)."""
    return REFUSED_PREFIX + hashlib.sha256(signature).hexdigest()


def refusal_of(
    key: str, headers: Headers, code: str, now_ms: int
) -> tuple[str, RefusedSignature] | None:
    """(row key, row) remembering a refused request's signature, or None when it is unsigned.

    The window runs from the signing time (``now_ms`` when that header is unreadable), and
    from ``now_ms`` for a signature dated in the future: it stays refused until then."""
    signature = header(headers, SIGNATURE_HEADER)
    if not signature:
        return None
    raw = header(headers, SIGNED_MS_HEADER)
    try:
        signed_ms = int(raw.decode("ascii")) if raw else now_ms
    except (UnicodeDecodeError, ValueError):
        signed_ms = now_ms
    row = refused_row(signature)
    return row, RefusedSignature(
        admission_key=key,
        signature_sha256=row.removeprefix(REFUSED_PREFIX),
        signed_ms=max(signed_ms, now_ms),
        refused_ms=now_ms,
        code=code,
    )


def still_refused(row: Record | None, at_ms: int, window_ms: int) -> bool:
    """Whether ``row`` is a refused signature whose window has not passed at ``at_ms`` (past
    it, the window check refuses the bytes anyway)."""
    return isinstance(row, RefusedSignature) and at_ms - row.signed_ms <= window_ms


class RefusedSignatures:
    """Refused signatures in memory: ``POST /admit``'s, which refuses before Kafka (the
    processor's are rows of its claims table). Bounded (``limit`` rows, the oldest forgotten
    first), so a flood of refused requests cannot grow it without end; a lock, as the HTTP
    endpoint and the processor share it."""

    def __init__(self, limit: int = 100_000) -> None:
        self._limit = limit
        self._rows: OrderedDict[str, RefusedSignature] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, row: str, refused: RefusedSignature) -> None:
        with self._lock:
            self._rows[row] = refused
            self._rows.move_to_end(row)
            while len(self._rows) > self._limit:
                self._rows.popitem(last=False)

    def get(self, row: str) -> RefusedSignature | None:
        with self._lock:
            return self._rows.get(row)

    def __len__(self) -> int:
        return len(self._rows)


REPLAYED = "a replay of a refused request (its signature stays refused for the window)"


@dataclass(frozen=True)
class Authentication:
    """How admission authenticates emitters: the registry, dev mode, the replay window."""

    # A fixed registry (tests) or the watched file (services: re-read when it changes).
    emitters: Emitters | WatchedFile[Emitters] = field(default_factory=Emitters)
    allow_unsigned: bool = True  # the test Driver's default; services read it from settings
    window_ms: int = DEFAULT_WINDOW_MS
    # The one piece of memory: what was refused, so its bytes cannot be admitted later.
    refusals: RefusedSignatures = field(default_factory=RefusedSignatures, compare=False)

    def registry(self) -> Emitters:
        """The registry in force now."""
        e = self.emitters
        return e.current() if isinstance(e, WatchedFile) else e

    def check(self, msg: Incoming, table: Lookup | None = None) -> Verification:
        """What ``msg``'s signature headers say (pure: Ed25519 is arithmetic, not I/O).

        A signature refused before within its window — a row of ``table`` (the claims table)
        or refused by ``POST /admit`` — is refused again. A request forwarded from HTTP is
        signed over its JSON body (``SIGNED_JSON_HEADER``): the signature must verify over
        that body, and the body must say what the record says.
        """
        if self.replayed(msg.headers, msg.timestamp_ms, table):
            return BadSignature(REPLAYED)
        body = header(msg.headers, SIGNED_JSON_HEADER)
        signed = body if body is not None else (msg.raw_value or b"")
        verification = verify(
            self.registry(),
            msg.key.encode("utf-8"),
            signed,
            msg.headers,
            msg.timestamp_ms,
            window_ms=self.window_ms,
        )
        if body is None or not isinstance(verification, Verified):
            return verification
        if not isinstance(msg.value, AdmissionRequest) or json_request_problem(body, msg.value):
            return BadSignature("the signed JSON body does not say what the request says")
        return verification

    def replayed(self, headers: Headers, at_ms: int, table: Lookup | None = None) -> bool:
        """Whether these signature headers are a request's refused within the window."""
        signature = header(headers, SIGNATURE_HEADER)
        if not signature:
            return False
        row = refused_row(signature)
        if table is not None and still_refused(table(row), at_ms, self.window_ms):
            return True
        return still_refused(self.refusals.get(row), at_ms, self.window_ms)

    def remember_refusal(self, key: str, headers: Headers, code: str, now_ms: int) -> None:
        """``POST /admit`` refused a signed request: its signature stays refused in memory."""
        refused = refusal_of(key, headers, code, now_ms)
        if refused is not None:
            self.refusals.remember(*refused)


# --- requests as JSON (the HTTP admission endpoint) ------------------------------------------


def request_from_json(body: bytes, requested_ms: int) -> AdmissionRequest:
    """The AdmissionRequest an HTTP body asks for; ValueError (or WireError) when it is not one.

    The body: ``{"admission_key", "capability", "input": <any JSON>, "correlation_keys":
    {..} (optional), "tenant", "initiator"}``. ``input`` becomes ``input_json`` as compact JSON
    (the Python client's encoding), so the same body always makes the same record.
    """
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError("the body must be a JSON object")
    fields = ("admission_key", "capability", "tenant", "initiator")
    missing = [f for f in (*fields, "input") if f not in data]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    if not all(isinstance(data[f], str) for f in fields):
        raise ValueError(f"{', '.join(fields)} must be strings")
    keys = data.get("correlation_keys") or {}
    if not isinstance(keys, dict) or not all(isinstance(v, str) for v in keys.values()):
        raise ValueError("correlation_keys must map names to strings")
    return AdmissionRequest(
        admission_key=data["admission_key"],
        capability=data["capability"],
        input_json=json.dumps(data["input"], separators=(",", ":"), ensure_ascii=False),
        correlation_keys={str(k): v for k, v in keys.items()},
        tenant=data["tenant"],
        initiator=data["initiator"],
        requested_ms=requested_ms,
    )


def json_request_problem(body: bytes, record: AdmissionRequest) -> str | None:
    """Why ``record`` is not what the JSON ``body`` asks for (its time aside), or None."""
    try:
        asked = request_from_json(body, record.requested_ms)
    except (ValueError, WireError) as exc:
        return f"the signed JSON is not a request: {exc}"
    return None if asked == record else "the record differs from the signed JSON"
