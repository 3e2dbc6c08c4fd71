"""A refused, signed request cannot be replayed into a run (issue 31, item 2).

Its signature is remembered for the window, so the same bytes produced again after the key
was registered are refused again; past the window, the broker's timestamp refuses them.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from runplane.kafka.handler import Incoming, State
from runplane.signing.admission import Emitter, EmitterKey, Emitters, Headers, SigningKey
from runplane.wire import AdmissionOutcome, AdmissionReply, AdmissionRequest, StartRun, encode
from services.admission.decide import CapabilitySpec
from services.admission.handler import AdmissionHandler
from services.admission.identity import REPLAYED, Authentication, RefusedSignatures

CAPS = {"free": CapabilitySpec(None)}
NOW = 1_700_000_000_000
WINDOW = 60_000
KEY = SigningKey.generate("acme-gw-1")
REQUEST = AdmissionRequest(
    admission_key="pay-1",
    capability="free",
    input_json="{}",
    tenant="acme",
    initiator="ivan",
    requested_ms=NOW,
)


def registry(*keys: SigningKey) -> Emitters:
    entry = Emitter(
        "acme-gw",
        "acme",
        tuple(EmitterKey(k.key_id, k.private.public_key().public_bytes_raw()) for k in keys),
    )
    return Emitters((entry,))


def record(signed_ms: int, at_ms: int, offset: int) -> Incoming:
    """The request signed at ``signed_ms``, as the broker stamps it at ``at_ms``."""
    value = encode(REQUEST)
    headers: Headers = KEY.headers(b"pay-1", value, signed_ms)
    return Incoming(
        "admission", 0, offset, "pay-1", REQUEST, at_ms, headers=tuple(headers), raw_value=value
    )


def handle(auth: Authentication, msg: Incoming) -> tuple[AdmissionReply, bool]:
    emits = AdmissionHandler(CAPS, auth=auth).handle(State({"claims": "x"}), msg, msg.timestamp_ms)
    [reply] = [e.value for e in emits if isinstance(e.value, AdmissionReply)]
    return reply, any(isinstance(e.value, StartRun) for e in emits)


def test_a_refused_request_replayed_after_its_key_is_registered_is_refused_again() -> None:
    before = Authentication(registry(), allow_unsigned=False, window_ms=WINDOW)
    first, started = handle(before, record(NOW, NOW, 1))
    assert first.outcome is AdmissionOutcome.REFUSED and not started
    assert "unknown key id" in (first.reason or "")
    # The key is registered; the memory is the instance's (carried across the registry change).
    after = dataclasses.replace(before, emitters=registry(KEY))
    # The same bytes, with their original signing time, within the window: refused again.
    replay, started = handle(after, record(NOW, NOW + 5_000, 2))
    assert replay.outcome is AdmissionOutcome.REFUSED and not started
    assert REPLAYED in (replay.reason or "")
    # Past the window the broker's timestamp refuses them, remembered or not.
    late, started = handle(after, record(NOW, NOW + WINDOW + 1, 3))
    assert late.outcome is AdmissionOutcome.REFUSED and not started
    assert "window" in (late.reason or "")
    # What the key signs now is admitted: the refusal is of those bytes, not of the key.
    fresh, started = handle(after, record(NOW + 6_000, NOW + 6_000, 4))
    assert fresh.outcome is AdmissionOutcome.ADMITTED and started


def test_without_the_memory_the_replay_would_have_been_admitted() -> None:
    # The control: the same replay before an instance that never saw the refusal runs.
    fresh = Authentication(registry(KEY), allow_unsigned=False, window_ms=WINDOW)
    reply, started = handle(fresh, record(NOW, NOW + 5_000, 2))
    assert reply.outcome is AdmissionOutcome.ADMITTED and started


def test_an_admitted_request_is_not_remembered_as_refused() -> None:
    auth = Authentication(registry(KEY), allow_unsigned=False, window_ms=WINDOW)
    reply, _ = handle(auth, record(NOW, NOW, 1))
    assert reply.outcome is AdmissionOutcome.ADMITTED and len(auth.refusals) == 0


@given(
    st.lists(st.tuples(st.binary(min_size=1, max_size=4), st.integers(0, 10**6)), max_size=40),
    st.integers(1, 8),
)
def test_the_memory_is_bounded_and_forgets_only_past_the_window(
    entries: list[tuple[bytes, int]], limit: int
) -> None:
    memory = RefusedSignatures(limit=limit)
    for sig, at in entries:
        memory.remember(sig, at)
    assert len(memory) <= limit
    latest = {sig: at for sig, at in entries}
    kept = list(dict.fromkeys(sig for sig, _ in reversed(entries)))[:limit]
    for sig in kept:  # the newest distinct signatures are all remembered within their window
        assert memory.refused(sig, latest[sig] + 1_000, 1_000)
        assert not memory.refused(sig, latest[sig] + 1_001, 1_000)
