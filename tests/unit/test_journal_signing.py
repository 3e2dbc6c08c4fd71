"""Writer signatures of journal records: key text, headers, what a keyring accepts."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from runplane.errors import ConfigError
from runplane.signing.journal import HEADER, Keyring, Signer, header_of, journal_headers, unsigned

pytestmark = pytest.mark.unit


def _texts(key_id: str) -> tuple[str, str]:
    key = Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return (
        f"{key_id}:{base64.b64encode(key.private_bytes_raw()).decode()}",
        f"{key_id}:{base64.b64encode(public).decode()}",
    )


def test_a_signature_verifies_only_for_its_bytes_and_a_key_of_the_ring() -> None:
    old_private, old_public = _texts("k1")
    new_private, new_public = _texts("k2")
    ring = Keyring.parse(f"{old_public},{new_public}")  # rotation: both accepted
    for private in (old_private, new_private):
        name, header = Signer.parse(private).header(b"record bytes")
        assert name == HEADER
        assert ring.problem(b"record bytes", header) is None
        assert "does not match" in (ring.problem(b"other bytes", header) or "")
    assert ring.problem(b"record bytes", None) == "no runplane-sig header"
    assert "malformed" in (ring.problem(b"x", b"k1:***") or "")
    stranger, _ = _texts("k3")
    header = Signer.parse(stranger).header(b"x")[1]
    assert "not in the keyring" in (ring.problem(b"x", header) or "")
    # Retired: a keyring without k1 no longer accepts what k1 signed.
    assert Keyring.parse(new_public).problem(b"x", Signer.parse(old_private).header(b"x")[1])


def test_env_and_bad_key_text() -> None:
    private, public = _texts("k1")
    assert Signer.from_env({}) is None and Keyring.from_env({"X": "y"}) is None
    assert Signer.from_env({"RUNPLANE_JOURNAL_SIGNING_KEY": private}) is not None
    assert Keyring.from_env({"RUNPLANE_JOURNAL_PUBLIC_KEYS": public}) is not None
    for bad in ("nokeyid", "k1:not base64!", "k1:" + base64.b64encode(b"short").decode()):
        with pytest.raises(ConfigError):
            Signer.parse(bad)
    with pytest.raises(ConfigError):
        Keyring.parse(f"{public},{public}")


def test_only_the_journal_topic_gets_the_header() -> None:
    private, public = _texts("k1")
    headers = journal_headers(Signer.parse(private), "p.journal")
    assert headers is not None and journal_headers(None, "p.journal") is None
    assert headers("p.results", b"v") is None and headers("p.journal", None) is None
    (name, value), *_ = headers("p.journal", b"v") or []
    assert header_of([(name, value)]) == value and header_of({name: value}) == value
    assert header_of(None) is None
    ring = Keyring.parse(public)
    assert unsigned(None, [(b"v", value)]) is None
    assert unsigned(ring, [(b"v", value), (b"w", value)]) == (
        None,
        unsigned(ring, [(b"w", value)])[0],
    )  # type: ignore[index]
