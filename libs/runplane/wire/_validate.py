"""Invariants the Avro schemas cannot state, checked whenever a record is built or decoded.

``VALIDATORS`` maps an Avro full name to a hook that raises ``WireError`` (the generated
``__post_init__`` calls it). The rules on admission keys and tenants are also exported as
plain functions returning a reason (or ``None``), so admission can turn a bad emitter input
into a refusal reason instead of an exception.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from runplane.errors import WireError

MAX_ADMISSION_KEY_BYTES = 256
ZERO_HASH = "0" * 64

_HEX64 = re.compile(r"[0-9a-f]{64}")
# A tenant names a namespace inside keys and topic-derived paths, so it may not contain the
# separators those use.
_TENANT_SEPARATORS = frozenset("/:.")


def is_hex64(value: str) -> bool:
    """True for a lowercase hex SHA-256 digest (64 characters)."""
    return _HEX64.fullmatch(value) is not None


def admission_key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid admission key, or ``None`` when it is."""
    if not key:
        return "admission_key must not be empty"
    size = len(key.encode("utf-8", "surrogatepass"))
    if size > MAX_ADMISSION_KEY_BYTES:
        return f"admission_key is {size} bytes; at most {MAX_ADMISSION_KEY_BYTES} allowed"
    return None


def tenant_problem(tenant: str) -> str | None:
    """Why ``tenant`` is not a valid tenant name, or ``None`` when it is."""
    if not tenant:
        return "tenant must not be empty"
    for ch in tenant:
        if ch in _TENANT_SEPARATORS:
            return f"tenant must not contain {ch!r}"
        if ch.isspace():
            return "tenant must not contain whitespace"
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            return f"tenant must not contain control character U+{ord(ch):04X}"
    return None


class TenantId(str):
    """A tenant's name, valid by construction (``tenant_problem`` is the rule): a value of
    this type names a tenant that may appear in keys and paths. Every wire record carrying a
    tenant builds and decodes its ``tenant`` through here (``VALIDATORS``), so a record from
    the wire holds a ``TenantId`` or was refused as a ``WireError``."""

    __slots__ = ()

    def __new__(cls, value: str) -> TenantId:
        if value.__class__ is cls:
            return value
        if not isinstance(value, str):
            raise WireError(f"tenant must be a string, got {type(value).__name__}")
        problem = tenant_problem(value)
        if problem is not None:
            raise WireError(problem)
        return super().__new__(cls, value)


def _require(ok: bool, record: Any, message: str) -> None:
    if not ok:
        raise WireError(f"{record.avro_name.rsplit('.', 1)[-1]}: {message}")


def _hex(record: Any, name: str, *, optional: bool = False) -> None:
    value = getattr(record, name)
    if optional and value is None:
        return
    _require(is_hex64(value), record, f"{name} must be 64 lowercase hex characters, got {value!r}")


# The hooks below run on every construction and decode (several per executor step), so the
# common, valid case is a few inline comparisons; each failure is reported through the same
# _require/_hex call, hence with the same message, as the rule it checks.
_is_hex = _HEX64.fullmatch


def _tenant(r: Any) -> None:
    """The record's ``tenant`` as a ``TenantId`` (None stays None: optional, older writers)."""
    v = r.tenant
    if v is None or v.__class__ is TenantId:
        return
    try:
        tenant = TenantId(v)
    except WireError as exc:
        _require(False, r, str(exc))
    object.__setattr__(r, "tenant", tenant)


def _admission_request(r: Any) -> None:
    problem = admission_key_problem(r.admission_key)
    _require(problem is None, r, str(problem))
    _tenant(r)


def _journal_record(r: Any) -> None:
    if r.seq < 0 or r.era < 0:
        _require(r.seq >= 0, r, f"seq must be >= 0, got {r.seq}")
        _require(r.era >= 0, r, f"era must be >= 0, got {r.era}")
    witness, digest = r.request_witness, r.body_digest
    if (
        _is_hex(r.prev_hash) is None
        or _is_hex(r.hash) is None
        or (witness is not None and _is_hex(witness) is None)
        or (digest is not None and _is_hex(digest) is None)
    ):
        _hex(r, "prev_hash")
        _hex(r, "hash")
        _hex(r, "request_witness", optional=True)
        _hex(r, "body_digest", optional=True)


def _label(r: Any) -> None:
    p = r.provenance
    # Sorted and unique: each item strictly below the next (trivially true for 0 or 1 items).
    if len(p) > 1 and not all(a < b for a, b in itertools.pairwise(p)):
        _require(False, r, f"provenance must be sorted and unique, got {list(p)!r}")


def _result_entry(r: Any) -> None:
    if r.ok:
        _require(r.error is None, r, "ok result must not carry an error")
    else:
        _require(r.error is not None, r, "failed result must carry an error")
    _require(r.call_seq >= 0, r, f"call_seq must be >= 0, got {r.call_seq}")
    if _is_hex(r.request_witness) is None or _is_hex(r.body_digest) is None:
        _hex(r, "request_witness")
        _hex(r, "body_digest")


def _non_empty(*names: str) -> Callable[[Any], None]:
    def check(r: Any) -> None:
        for name in names:
            _require(getattr(r, name) != "", r, f"{name} must not be empty")

    return check


def _chained(*hooks: Callable[[Any], None]) -> Callable[[Any], None]:
    def check(r: Any) -> None:
        for hook in hooks:
            hook(r)

    return check


def _admission_claim(r: Any) -> None:
    _admission_request(r)  # same key and tenant rules: a claim is keyed by the request's key


def _journal_record_session(r: Any) -> None:
    _journal_record(r)
    if r.session_id == "":
        _require(False, r, "session_id must not be empty")


def _result_entry_session(r: Any) -> None:
    _result_entry(r)
    if r.session_id == "":
        _require(False, r, "session_id must not be empty")


VALIDATORS: dict[str, Callable[[Any], None]] = {
    "runplane.v1.AdmissionRequest": _chained(_admission_request, _non_empty("capability")),
    "runplane.v1.AdmissionClaim": _admission_claim,
    "runplane.v1.JournalRecord": _journal_record_session,
    "runplane.v1.Label": _label,
    "runplane.v1.ResultEntry": _result_entry_session,
    # Every other record that carries a tenant (a test holds the list complete).
    "runplane.v1.StartRun": _tenant,
    "runplane.v1.SessionSnapshot": _tenant,
    "runplane.v1.OpenTask": _tenant,
    "runplane.v1.RegisterDeadline": _tenant,
    "runplane.v1.RunStatusUpdate": _tenant,
    "runplane.v1.AdmissionReply": _tenant,
    "runplane.v1.Schedule": _tenant,
    "runplane.v1.ScheduleFired": _tenant,
    "runplane.v1.QueueEntry": _tenant,
}
