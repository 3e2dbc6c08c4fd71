"""Signed admission, the pure parts: signatures over the exact record bytes, the emitters
registry, and admission's identity check (unsigned, bad, forged tenant, rotation, revocation)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from runplane.errors import ConfigError
from runplane.kafka.handler import Incoming, State
from runplane.signing.admission import (
    SIGNATURE_HEADER,
    SIGNED_JSON_HEADER,
    BadSignature,
    Emitter,
    EmitterKey,
    Emitters,
    Headers,
    SigningKey,
    Unsigned,
    Verified,
    message,
    verify,
    watch_emitters,
)
from runplane.wire import AdmissionOutcome, AdmissionRequest, DeadLetter, RefusedSignature, encode
from services.admission.decide import (
    Admitted,
    CapabilitySpec,
    Position,
    Refusal,
    Refused,
    decide,
)
from services.admission.handler import AdmissionHandler
from services.admission.identity import Authentication, request_from_json

NOW = 1_700_000_000_000
OLD = SigningKey.generate("gw-old")
NEW = SigningKey.generate("gw-new")
OTHER = SigningKey.generate("stranger")


def _key(k: SigningKey, revoked: bool = False) -> EmitterKey:
    return EmitterKey(k.key_id, k.private.public_key().public_bytes_raw(), revoked)


def _registry(*, revoke_old: bool = False) -> Emitters:
    gw = Emitter("billing-gw", "acme", (_key(OLD, revoke_old), _key(NEW)), frozenset({"ivan"}))
    return Emitters((gw,))


def _req(tenant: str = "acme", initiator: str = "ivan", key: str = "k1") -> AdmissionRequest:
    return AdmissionRequest(
        admission_key=key,
        capability="free",
        input_json="{}",
        tenant=tenant,
        initiator=initiator,
        requested_ms=NOW,
    )


def _value(req: AdmissionRequest) -> bytes:
    return encode(req)


def _check(
    signer: SigningKey | None,
    req: AdmissionRequest,
    reg: Emitters | None = None,
    at: int = NOW,
) -> Verified | Unsigned | BadSignature:
    value = _value(req)
    headers = [] if signer is None else signer.headers(b"k1", value, at)
    return verify(reg or _registry(), b"k1", value, headers, NOW)


def test_a_signature_names_its_emitter_and_either_active_key_verifies() -> None:
    for signer in (OLD, NEW):  # rotation: both keys of the emitter are active
        v = _check(signer, _req())
        assert isinstance(v, Verified) and v.emitter.name == "billing-gw"
        assert v.key_id == signer.key_id


def test_no_headers_is_unsigned_and_an_unknown_or_revoked_key_is_bad() -> None:
    assert isinstance(_check(None, _req()), Unsigned)
    unknown = _check(OTHER, _req())
    assert isinstance(unknown, BadSignature) and "unknown key id" in unknown.reason
    revoked = _check(OLD, _req(), _registry(revoke_old=True))
    assert isinstance(revoked, BadSignature) and "revoked" in revoked.reason
    assert isinstance(_check(NEW, _req(), _registry(revoke_old=True)), Verified)


def test_a_signature_outside_the_window_is_a_replay() -> None:
    v = _check(NEW, _req(), at=NOW - 10 * 60 * 1000)
    assert isinstance(v, BadSignature) and "replay" in v.reason


@given(st.binary(min_size=1, max_size=64), st.integers(0, 63))
def test_changing_any_signed_byte_breaks_the_signature(extra: bytes, flip: int) -> None:
    value = _value(_req())
    headers = NEW.headers(b"k1", value, NOW)
    assert isinstance(verify(_registry(), b"k1", value, headers, NOW), Verified)
    assert isinstance(verify(_registry(), b"k1", value + extra, headers, NOW), BadSignature)
    assert isinstance(verify(_registry(), b"k1" + extra, value, headers, NOW), BadSignature)
    signature = dict(headers)[SIGNATURE_HEADER]
    assert isinstance(signature, bytes)
    sig = bytearray(signature)
    sig[flip] ^= 1
    forged = [(k, bytes(sig) if k == SIGNATURE_HEADER else v) for k, v in headers]
    assert isinstance(verify(_registry(), b"k1", value, forged, NOW), BadSignature)


def test_the_signed_message_is_unambiguous() -> None:
    # Length prefixes: moving a byte from the key into the value changes the message.
    assert message("k", 1, b"ab", b"c") != message("k", 1, b"a", b"bc")


def test_repeated_or_partial_headers_are_refused_not_guessed() -> None:
    value = _value(_req())
    headers = NEW.headers(b"k1", value, NOW)
    assert isinstance(verify(_registry(), b"k1", value, headers[:2], NOW), BadSignature)
    twice = [*headers, headers[2]]
    assert isinstance(verify(_registry(), b"k1", value, twice, NOW), BadSignature)


def test_key_text_round_trips_and_never_shows_in_repr() -> None:
    again = SigningKey.from_text(NEW.to_text())
    assert again.public_b64() == NEW.public_b64()
    assert NEW.to_text().split(":")[1] not in repr(NEW)
    with pytest.raises(ConfigError):
        SigningKey.from_text("no-colon")


def test_the_registry_refuses_private_keys_duplicates_and_bad_keys() -> None:
    entry = {"name": "gw", "tenant": "acme", "keys": [{"id": "a", "public_key": NEW.public_b64()}]}
    assert Emitters.from_data({"emitters": [entry]}).key("a") is not None
    with pytest.raises(ConfigError, match="private"):
        Emitters.from_data([{**entry, "keys": [{"id": "a", "private_key": "x"}]}])
    with pytest.raises(ConfigError, match="twice"):
        Emitters.from_data([entry, {**entry, "name": "gw2"}])
    with pytest.raises(ConfigError, match="32 bytes"):
        Emitters.from_data([{**entry, "keys": [{"id": "a", "public_key": "AAAA"}]}])


# --- admission decides with the verification -------------------------------------------------

CAPS = {"free": CapabilitySpec(None)}
POS = Position("admission", 0, 7)


def _decide(req: AdmissionRequest, signer: SigningKey | None, allow: bool = False) -> object:
    return decide(
        None,
        "k1",
        POS,
        req,
        CAPS,
        NOW,
        verification=_check(signer, req),
        allow_unsigned=allow,
    )


def test_admission_admits_a_signed_request_of_its_emitters_tenant() -> None:
    assert isinstance(_decide(_req(), NEW), Admitted)


@pytest.mark.parametrize(
    ("req", "signer", "code", "words"),
    [
        (_req(), None, Refusal.UNAUTHENTICATED, "unsigned"),
        (_req(), OTHER, Refusal.UNAUTHENTICATED, "unknown key id"),
        (_req(tenant="globex"), NEW, Refusal.FORGED_TENANT, "speaks for tenant 'acme'"),
        (_req(initiator="mallory"), NEW, Refusal.FORBIDDEN_INITIATOR, "mallory"),
    ],
)
def test_admission_refuses_with_the_reason(
    req: AdmissionRequest, signer: SigningKey | None, code: Refusal, words: str
) -> None:
    d = _decide(req, signer)
    assert isinstance(d, Refused) and d.code is code
    assert d.reply.outcome is AdmissionOutcome.REFUSED and words in (d.reply.reason or "")


def test_dev_mode_admits_unsigned_but_never_a_bad_signature() -> None:
    assert isinstance(_decide(_req(), None, allow=True), Admitted)
    assert isinstance(_decide(_req(), OTHER, allow=True), Refused)


class _NoClaims(State):
    def __init__(self) -> None:
        pass

    def get(self, table: str, key: str) -> None:
        return None


def _incoming(req: AdmissionRequest, headers: Headers) -> Incoming:
    value = _value(req)
    raw = tuple((k, v.encode() if isinstance(v, str) else v) for k, v in headers)
    return Incoming("admission", 0, 7, "k1", req, NOW, headers=raw, raw_value=value)


def test_the_handler_answers_and_dead_letters_an_identity_refusal() -> None:
    handler = AdmissionHandler(CAPS, auth=Authentication(_registry(), allow_unsigned=False))
    forged = _req(tenant="globex")
    emits = handler.handle(
        _NoClaims(), _incoming(forged, NEW.headers(b"k1", _value(forged), NOW)), NOW
    )
    # The reply, the refused signature remembered for the window, the dead letter.
    assert [e.topic for e in emits] == ["admission.replies", "admission.claims", "deadletter"]
    assert isinstance(emits[1].value, RefusedSignature) and emits[1].partition_key == "k1"
    letter = emits[2].value
    assert isinstance(letter, DeadLetter) and letter.value == _value(forged)
    assert letter.reason.startswith("forged_tenant: ")
    ok = _req()
    emits = handler.handle(_NoClaims(), _incoming(ok, NEW.headers(b"k1", _value(ok), NOW)), NOW)
    assert "deadletter" not in [e.topic for e in emits] and len(emits) == 4


def test_incoming_equality_ignores_the_raw_record() -> None:
    a = _incoming(_req(), [])
    assert a == dataclasses.replace(a, headers=(("x", b"y"),), raw_value=b"")


def test_a_forwarded_json_signature_counts_only_for_the_request_it_describes() -> None:
    body = (
        b'{"admission_key":"k1","capability":"free","input":{},"tenant":"acme","initiator":"ivan"}'
    )
    auth = Authentication(_registry(), allow_unsigned=False)
    headers = (*NEW.headers(b"k1", body, NOW), (SIGNED_JSON_HEADER, body))

    def check(req: AdmissionRequest) -> object:
        raw = tuple((k, v.encode() if isinstance(v, str) else v) for k, v in headers)
        return auth.check(Incoming("admission", 0, 1, "k1", req, NOW, headers=raw, raw_value=b"x"))

    assert isinstance(check(request_from_json(body, NOW)), Verified)
    assert check(_req()) == Verified(_registry().emitters[0], NEW.key_id)  # same fields
    other = check(dataclasses.replace(_req(), input_json='{"x":1}'))
    assert isinstance(other, BadSignature) and "does not say" in other.reason
    with pytest.raises(ValueError, match="missing"):
        request_from_json(b'{"admission_key": "k1"}', NOW)


def test_a_revocation_takes_effect_without_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "emitters.yaml"

    def write(revoked: bool) -> None:
        key = {"id": NEW.key_id, "public_key": NEW.public_b64(), "revoked": revoked}
        path.write_text(yaml.safe_dump([{"name": "gw", "tenant": "acme", "keys": [key]}]))

    write(False)
    auth = Authentication(watch_emitters(path), allow_unsigned=False)
    incoming = _incoming(_req(), NEW.headers(b"k1", _value(_req()), NOW))
    assert isinstance(auth.check(incoming), Verified)
    write(True)
    revoked = auth.check(incoming)
    assert isinstance(revoked, BadSignature) and "revoked" in revoked.reason
    path.write_text("emitters: [{name: broken")  # a typo keeps the last good registry
    assert isinstance(auth.check(incoming), BadSignature)
