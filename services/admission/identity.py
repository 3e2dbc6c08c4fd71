"""Who may ask for this run: the emitter a signature names, checked against the request (pure).

Tenant and initiator are fields of the AdmissionRequest (its wire bytes do not change), but
they are believed only as far as the signing emitter may speak for them: an emitter is
registered for one tenant and, optionally, a list of initiators (``runplane.signing``). So:

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
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from runplane.kafka.processor import Incoming
from runplane.signing import (
    DEFAULT_WINDOW_MS,
    BadSignature,
    Emitters,
    Unsigned,
    Verification,
    Verified,
    verify,
)
from runplane.wire import AdmissionRequest


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
                "e.g. RUNPLANE_EMITTER_KEY_FILE for runplane emit and runplane.client)",
            )
        case Verified(emitter, key_id):
            if req.tenant != emitter.tenant:
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


@dataclass(frozen=True)
class Authentication:
    """How admission authenticates emitters: the registry, dev mode, the replay window."""

    emitters: Emitters = field(default_factory=Emitters)
    allow_unsigned: bool = True  # the test Driver's default; services read it from settings
    window_ms: int = DEFAULT_WINDOW_MS

    def check(self, msg: Incoming) -> Verification:
        """What ``msg``'s signature headers say (pure: Ed25519 is arithmetic, not I/O)."""
        value = msg.raw_value if msg.raw_value is not None else b""
        return verify(
            self.emitters,
            msg.key.encode("utf-8"),
            value,
            msg.headers,
            msg.timestamp_ms,
            window_ms=self.window_ms,
        )
