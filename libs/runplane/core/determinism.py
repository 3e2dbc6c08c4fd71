"""Determinism tiers 1 (randomness) and 2 (the logical clock) — pure derivations.

Tier 1. Randomness is *derived*, never drawn: ``session_seed`` is a domain-separated SHA-256
of the session id, so it survives an eviction or a restart without any durable write, and a
draw is derived from (session_seed, call_seq), so the position of the draw is the cursor —
no PRNG state has to survive. The era is deliberately not an input: a checkpointed run
re-executing after a restore draws the same values at the same positions, so its re-executed
tool calls carry the same requests and are recognised in the side-effect log. The seed travels as hex text because a 64-bit integer above
2**53 silently rounds in a double-backed JSON parser.

Tier 2. The clock is logical (see ``StepCtx.now``): the value of ``now()`` is the stamp of
the journal entry of the step the agent is in, so these functions only derive; nothing here
reads the wall clock.

Tier 3 (``observe``) lives in the engine: it is a journaled effect.
"""

from __future__ import annotations

import hashlib

__all__ = ["derive_randint", "derive_random", "session_seed"]

_SEED_DOMAIN = b"runplane/session-seed/v1\x00"
_DRAW_DOMAIN = b"runplane/random/v1\x00"


def session_seed(session_id: str) -> str:
    """The session's random seed: hex SHA-256("runplane/session-seed/v1" NUL session_id)."""
    return hashlib.sha256(_SEED_DOMAIN + session_id.encode("utf-8")).hexdigest()


def _draw(seed_hex: str, call_seq: int) -> bytes:
    material = _DRAW_DOMAIN + bytes.fromhex(seed_hex) + call_seq.to_bytes(8, "big")
    return hashlib.sha256(material).digest()


def derive_random(seed_hex: str, call_seq: int) -> float:
    """A float in [0, 1) derived from the seed and the draw's position (53 random bits)."""
    bits = int.from_bytes(_draw(seed_hex, call_seq)[:8], "big") >> 11
    return bits / float(1 << 53)


def derive_randint(seed_hex: str, call_seq: int, low: int, high: int) -> int:
    """An integer in [low, high] derived from the seed and the draw's position.

    The reduction is modulo a 256-bit number, so the bias is below 2**-190 for any range an
    agent could use.
    """
    if high < low:
        raise ValueError(f"randint: empty range [{low}, {high}]")
    span = high - low + 1
    return low + int.from_bytes(_draw(seed_hex, call_seq), "big") % span
