"""A refused, signed request cannot be replayed into a run (issue 31, item 2).

Its signature is remembered for the window — a row of the claims table, so a restart keeps it
— and the same bytes produced again after the key was registered are refused again; past the
window, the broker's timestamp refuses them, and the tick drops the row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from runplane.kafka.handler import Emit, Incoming, State
from runplane.signing.admission import Emitter, EmitterKey, Emitters, Headers, SigningKey
from runplane.wire import (
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    RefusedSignature,
    StartRun,
    encode,
)
from services.admission.decide import CapabilitySpec
from services.admission.handler import AdmissionHandler
from services.admission.identity import (
    REPLAYED,
    Authentication,
    RefusedSignatures,
    still_refused,
)

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


class Admission:
    """One partition's handler over a claims table that keeps what it commits, as on the
    broker; ``restart`` is a new instance restoring that table (nothing else survives)."""

    def __init__(self, auth: Authentication) -> None:
        self.auth = auth
        self.handler = AdmissionHandler(CAPS, auth=auth)
        self.state = State(self.handler.tables)

    def _commit(self, emits: Sequence[Emit]) -> None:
        for e in emits:
            if e.topic == "admission.claims":
                self.state._stage("claims", 0, e.key, e.value)
        self.state._commit()

    def handle(self, msg: Incoming) -> tuple[AdmissionReply, bool]:
        emits = self.handler.handle(self.state, msg, msg.timestamp_ms)
        self._commit(emits)
        [reply] = [e.value for e in emits if isinstance(e.value, AdmissionReply)]
        return reply, any(isinstance(e.value, StartRun) for e in emits)

    def tick(self, now_ms: int) -> Sequence[Emit]:
        emits = self.handler.tick(self.state, now_ms)
        self._commit(emits)
        return emits

    def restart(self, auth: Authentication) -> Admission:
        fresh = Admission(auth)
        rows = {k: v for k, v in self.state.items("claims")}
        fresh.state._load("claims", 0, rows)
        fresh.handler.on_assign([0])
        return fresh

    def refused_rows(self) -> list[RefusedSignature]:
        return [v for _, v in self.state.items("claims") if isinstance(v, RefusedSignature)]


def _auth(*keys: SigningKey) -> Authentication:
    return Authentication(registry(*keys), allow_unsigned=False, window_ms=WINDOW)


def test_a_refused_request_replayed_after_its_key_is_registered_is_refused_again() -> None:
    a = Admission(_auth())
    first, started = a.handle(record(NOW, NOW, 1))
    assert first.outcome is AdmissionOutcome.REFUSED and not started
    assert "unknown key id" in (first.reason or "")
    [row] = a.refused_rows()
    assert (row.admission_key, row.signed_ms, row.code) == ("pay-1", NOW, "unauthenticated")
    # The key is registered, and admission restarts: the refusal is in the restored table.
    a = a.restart(_auth(KEY))
    # The same bytes, with their original signing time, within the window: refused again.
    replay, started = a.handle(record(NOW, NOW + 5_000, 2))
    assert replay.outcome is AdmissionOutcome.REFUSED and not started
    assert REPLAYED in (replay.reason or "")
    assert len(a.refused_rows()) == 1  # remembered once
    # Past the window the broker's timestamp refuses them, remembered or not.
    late, started = a.handle(record(NOW, NOW + WINDOW + 1, 3))
    assert late.outcome is AdmissionOutcome.REFUSED and not started
    assert "window" in (late.reason or "")
    # What the key signs now is admitted: the refusal is of those bytes, not of the key.
    fresh, started = a.handle(record(NOW + 6_000, NOW + 6_000, 4))
    assert fresh.outcome is AdmissionOutcome.ADMITTED and started


def test_without_the_refusal_the_replay_would_have_been_admitted() -> None:
    # The control: the same record before an admission that never refused it.
    reply, started = Admission(_auth(KEY)).handle(record(NOW, NOW + 5_000, 2))
    assert reply.outcome is AdmissionOutcome.ADMITTED and started


def test_an_admitted_or_unsigned_request_leaves_no_refused_signature() -> None:
    a = Admission(_auth(KEY))
    reply, _ = a.handle(record(NOW, NOW, 1))
    assert reply.outcome is AdmissionOutcome.ADMITTED and a.refused_rows() == []
    unsigned = Incoming(
        "admission", 0, 2, "pay-9", dataclasses.replace(REQUEST, admission_key="pay-9"), NOW
    )
    reply, _ = a.handle(unsigned)
    assert reply.outcome is AdmissionOutcome.REFUSED and a.refused_rows() == []


def test_the_tick_tombstones_a_refused_signature_once_its_window_has_passed_twice() -> None:
    a = Admission(_auth())
    a.handle(record(NOW, NOW, 1))
    assert a.tick(NOW + 2 * WINDOW) == [] and len(a.refused_rows()) == 1
    # After a restart the tick finds the row in the restored table, and only then drops it.
    a = a.restart(_auth())
    [tombstone] = a.tick(NOW + 2 * WINDOW + 1)
    assert tombstone.value is None and tombstone.partition_key == "pay-1"
    assert a.refused_rows() == []


def test_a_signature_refused_over_http_is_refused_on_kafka_too() -> None:
    auth = _auth()
    msg = record(NOW, NOW, 1)
    auth.remember_refusal("pay-1", msg.headers, "unauthenticated", NOW)
    reply, started = Admission(dataclasses.replace(auth, emitters=registry(KEY))).handle(
        record(NOW, NOW + 1_000, 2)
    )
    assert reply.outcome is AdmissionOutcome.REFUSED and REPLAYED in (reply.reason or "")
    assert not started


@given(
    st.lists(st.tuples(st.text(min_size=1, max_size=3), st.integers(0, 10**6)), max_size=40),
    st.integers(1, 8),
)
def test_the_http_memory_is_bounded_and_keeps_the_newest(
    entries: list[tuple[str, int]], limit: int
) -> None:
    memory = RefusedSignatures(limit=limit)
    for row, at in entries:
        refused = RefusedSignature(
            admission_key="k", signature_sha256="00", signed_ms=at, refused_ms=at, code="x"
        )
        memory.remember(row, refused)
    assert len(memory) <= limit
    latest = {row: at for row, at in entries}
    kept = list(dict.fromkeys(row for row, _ in reversed(entries)))[:limit]
    for row in kept:  # the newest distinct rows are all remembered, each with its last time
        got = memory.get(row)
        assert got is not None and got.signed_ms == latest[row]
        assert still_refused(got, latest[row] + 1_000, 1_000)
        assert not still_refused(got, latest[row] + 1_001, 1_000)
