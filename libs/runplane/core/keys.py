"""Names two services must agree on, so neither imports the other. Pure.

**Reserved correlation keys.** Every correlation key under ``runplane.`` is reserved for the
platform, so no business key collides with one. ``runplane.case`` (``CASE_KEY``) names a case
id outright: admission honours it (for a case of the request's tenant) and the cases service
puts it on a breach's follow-up request. ``runplane.tenant`` (``TENANT_KEY``) is where a case
records its tenant.

**Case ids.** Business keys resolve to a case id by a hash (:func:`case_id_for`): admission
mints it, and a reader given the keys (``runplane runs list --case order=101``) finds the same
case without asking anyone.

**A sweeper decision's deterministic names.** Everything the sweeper sends is named from the
obligation it is about — (case, obligation name, due instant) — never from the instance, the
tick or the wall clock. So two sweepers, two ticks or a restarted sweeper that decide the same
thing send byte-identical commands: the cases service answers the repeats as duplicates, the
sweep run has one session id, and admission sees one admission key for the follow-up run
(which the cases service writes).

The due instant is part of the name because an obligation's name can be registered again
for a new cycle once the old one is discharged; each cycle is its own breach.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Final

from runplane.core.canonical import canonical_bytes

__all__ = [
    "CASE_ID",
    "CASE_KEY",
    "CHILD_PREFIX",
    "CLAIM_PREFIX",
    "RESERVED_PREFIX",
    "TENANT_KEY",
    "breach_request_id",
    "carried_child_key",
    "case_belongs_to",
    "case_id_for",
    "child_key",
    "child_root",
    "claim_key",
    "followup_admission_key",
    "obligation_digest",
    "parent_of",
    "sweep_run_id",
    "tenant_tag",
    "warn_request_id",
]

RESERVED_PREFIX: Final = "runplane."
CASE_KEY: Final = "runplane.case"
TENANT_KEY: Final = "runplane.tenant"

# Domain separation: these digests can never collide with any other hash runplane computes.
# v2: the id starts with the tenant tag (v1 ids were 24 hex of H(tenant, keys)).
_CASE_ID_DOMAIN = b"runplane/admission/case-id/v2\x00"
_TENANT_TAG_DOMAIN = b"runplane/admission/tenant-tag/v1\x00"
CASE_ID: Final = re.compile(r"c-[0-9a-f]{24}")


def tenant_tag(tenant: str) -> str:
    """8 hex of a domain-separated SHA-256 of the tenant: the first part of its case ids."""
    return hashlib.sha256(_TENANT_TAG_DOMAIN + tenant.encode("utf-8", "surrogatepass")).hexdigest()[
        :8
    ]


def case_id_for(tenant: str, correlation: Mapping[str, str]) -> str | None:
    """``c-`` + tenant tag (8 hex) + 16 hex of H(tenant, sorted keys); None without keys.

    The same business keys always resolve to the same case — across runs, instances and
    restarts — and the tenant is part of it, so two tenants' "dispute D-17" are two cases, and
    the id itself says which tenant it belongs to (:func:`case_belongs_to`).
    """
    if CASE_KEY in correlation:
        return correlation[CASE_KEY]  # checked by correlation_problem before admission
    if not correlation:
        return None
    body = canonical_bytes({"tenant": tenant, "keys": dict(sorted(correlation.items()))})
    return "c-" + tenant_tag(tenant) + hashlib.sha256(_CASE_ID_DOMAIN + body).hexdigest()[:16]


def case_belongs_to(case_id: str, tenant: str) -> bool:
    """Whether ``case_id`` (as :func:`case_id_for` mints them) carries ``tenant``'s tag."""
    return CASE_ID.fullmatch(case_id) is not None and case_id[2:10] == tenant_tag(tenant)


def obligation_digest(
    domain: str, case_id: str, name: str, due_ms: int, *, cycle: int | None = None
) -> str:
    """Domain-separated hex SHA-256 of (case, obligation, due[, cycle]).

    ``cycle`` (e.g. when the obligation was registered) tells apart two cycles of one name
    with the same due instant; None gives exactly the names used before it existed. (Until
    the sweeper passes one, the cases service refuses such a second cycle.)"""
    parts: list[object] = [case_id, name, due_ms]
    if cycle is not None:
        parts.append(cycle)
    body = canonical_bytes(parts)
    return hashlib.sha256(f"runplane.sweeper.{domain}\x00".encode() + body).hexdigest()


def sweep_run_id(case_id: str, name: str, due_ms: int, *, cycle: int | None = None) -> str:
    """The session id of the sealed sweep run that records this breach."""
    return "sweep-" + obligation_digest("run", case_id, name, due_ms, cycle=cycle)[:32]


def followup_admission_key(
    case_id: str, name: str, due_ms: int, *, cycle: int | None = None
) -> str:
    """The admission key of the follow-up run: one breach, at most one follow-up run, ever."""
    return "breach-" + obligation_digest("followup", case_id, name, due_ms, cycle=cycle)[:40]


def warn_request_id(case_id: str, name: str, due_ms: int, *, cycle: int | None = None) -> str:
    return "sweeper/warn/" + obligation_digest("warn", case_id, name, due_ms, cycle=cycle)[:32]


def breach_request_id(case_id: str, name: str, due_ms: int, *, cycle: int | None = None) -> str:
    return "sweeper/breach/" + obligation_digest("breach", case_id, name, due_ms, cycle=cycle)[:32]


# -- a commissioned child's admission key (runplane.core.engine.commission) ------------------
CHILD_PREFIX: Final = "runplane.child/"
_HEX: Final = re.compile("[0-9a-f]{1,64}")
_NEXT: Final = "/next"


def child_key(session_id: str, era: int, call_seq: int) -> str:
    """The admission key of the child a run commissions at (era, call_seq): a function of the
    parent's position only, so a replayed parent asks admission for the same child again."""
    return f"{CHILD_PREFIX}{session_id}/{era}/{call_seq}"


def carried_child_key(session_id: str, witness: str, occurrence: int) -> str:
    """The admission key of the child a *checkpointed* run commissions: a function of the
    request's witness and of how many commissions with that witness its era issued before —
    not of the position, which a restore re-executes from its checkpoint at a new era and
    slot — so the commission a restored era issues again names the same child."""
    return f"{CHILD_PREFIX}{session_id}/w{witness[:32]}/{occurrence}"


def child_root(admission_key: str) -> str:
    """The key a child was commissioned under, for any of its continue-as-new successors
    (whose keys append ``/next`` per generation: ``engine/successor.py``); other keys as
    they are."""
    while admission_key.endswith(_NEXT):
        admission_key = admission_key[: -len(_NEXT)]
    return admission_key


def parent_of(admission_key: str) -> tuple[str, str] | None:
    """(parent session, ``era/call_seq`` or ``w<witness>/<occurrence>``) of a child's
    admission key — or of a successor of one — ; None for other keys."""
    if not admission_key.startswith(CHILD_PREFIX):
        return None
    parts = child_root(admission_key)[len(CHILD_PREFIX) :].rsplit("/", 2)
    if len(parts) != 3 or not parts[0] or not parts[2].isdigit():
        return None
    where = parts[1]
    if not (where.isdigit() or (where[:1] == "w" and _HEX.fullmatch(where[1:]))):
        return None
    return parts[0], f"{where}/{parts[2]}"


# Admission's claims are per (tenant, admission key): two tenants' "order-17" are two runs.
# A tenant name holds no "/", so the form reads back unambiguously; the reserved prefix keeps
# these rows apart from the claims written before per-tenant claims, which are keyed by the
# admission key alone (docs/decisions.md, "Claims per tenant").
CLAIM_PREFIX: Final = "runplane.claim/"


def claim_key(tenant: str, admission_key: str) -> str:
    """The ``admission.claims`` row key of ``admission_key`` for ``tenant`` (the row is
    partitioned by the admission key, like the requests and replies of that key)."""
    return f"{CLAIM_PREFIX}{tenant}/{admission_key}"
