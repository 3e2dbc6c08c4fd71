"""Who wrote a journal record: an Ed25519 signature by the chain's writers, in a Kafka header.

The hash chain is keyless — anyone who may write ``journal`` can append a well-chained record
to a run that has not ended. A signature closes that: the chain's writers (admission for seq
0, the executor, the cases service for sealed sweep runs) hold a private key; every reader
(the journal service, ``runplane journal verify``, the journal API) holds only the public
keyring, so a reader cannot forge either.

- **What is signed**: the record's message value exactly as produced (its wire bytes), with
  a domain separator: ``Ed25519(b"runplane.journal.v1\\0" || value)``. The value already
  names the session, seq, prev_hash and hash, so a signed record cannot be moved to another
  run or position. Bytes, not the decoded record, so a reader checks the signature before
  trusting anything the record says.
- **Where**: the Kafka header ``runplane-sig`` = ``<key-id>:<base64 signature>``. A header,
  so the record's bytes, its hash and every golden journal are unchanged; a deployment with
  no keys configured writes and reads exactly what it did before.
- **When it is checked**: once a keyring is configured (``RUNPLANE_JOURNAL_PUBLIC_KEYS``), a
  record without a valid signature by a key of the keyring is a break (``bad_signature``),
  found after position, link and hash (an edited record is still ``bad_hash``).
- **Rotation**: add the new public key to every reader's keyring, then give the writers the
  new private key (``RUNPLANE_JOURNAL_SIGNING_KEY``); keep retired public keys in the keyring
  as long as records signed with them are kept. A key that leaked is removed from the
  keyring: the records it signed then read as ``bad_signature`` — re-verify and re-sign what
  you still trust from an offline copy before removing it.

Key text: ``<key-id>:<base64 of the raw 32-byte key>`` (private: the seed; public: the public
key). ``runplane journal keygen`` prints a fresh pair. Pure: keys in, bytes out, no I/O.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from runplane.errors import ConfigError
from runplane.signing.admission import SigningKey

__all__ = [
    "HEADER",
    "PUBLIC_KEYS_ENV",
    "SIGNING_KEY_ENV",
    "Keyring",
    "Signer",
    "header_of",
    "journal_headers",
    "unsigned",
]

HEADER = "runplane-sig"
SIGNING_KEY_ENV = "RUNPLANE_JOURNAL_SIGNING_KEY"
PUBLIC_KEYS_ENV = "RUNPLANE_JOURNAL_PUBLIC_KEYS"
_DOMAIN = b"runplane.journal.v1\0"


def _split(text: str, what: str) -> tuple[str, bytes]:
    key_id, sep, b64 = text.strip().partition(":")
    if not sep or not key_id or any(c in key_id for c in ":, \t"):
        raise ConfigError(f"{what} must be <key-id>:<base64 key>, got {text[:20]!r}…")
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigError(f"{what} {key_id!r}: the key is not base64") from exc
    if len(raw) != 32:
        raise ConfigError(f"{what} {key_id!r}: an Ed25519 key is 32 bytes, got {len(raw)}")
    return key_id, raw


@dataclass(frozen=True)
class Signer:
    """A chain writer's private key; :meth:`header` signs one journal message value.

    The key is an admission-style :class:`runplane.signing.admission.SigningKey` (same text form,
    ``<key-id>:<base64 seed>``, same ``repr`` that never shows it); only what is signed and
    where it travels differ (one header, over the message value)."""

    key: SigningKey

    @property
    def key_id(self) -> str:
        return self.key.key_id

    @classmethod
    def parse(cls, text: str) -> Signer:
        return cls(SigningKey.from_text(text))

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Signer | None:
        """The signer ``RUNPLANE_JOURNAL_SIGNING_KEY`` names, None when it is unset."""
        text = env.get(SIGNING_KEY_ENV, "").strip()
        return cls.parse(text) if text else None

    def header(self, value: bytes) -> tuple[str, bytes]:
        """The ``(name, value)`` Kafka header that signs the message ``value``."""
        sig = base64.b64encode(self.key.private.sign(_DOMAIN + value)).decode("ascii")
        return HEADER, f"{self.key_id}:{sig}".encode("ascii")


@dataclass(frozen=True)
class Keyring:
    """The public keys a reader accepts signatures from, by key id."""

    keys: Mapping[str, Ed25519PublicKey]

    @classmethod
    def parse(cls, text: str) -> Keyring:
        keys: dict[str, Ed25519PublicKey] = {}
        for item in (i for i in text.split(",") if i.strip()):
            key_id, raw = _split(item, PUBLIC_KEYS_ENV)
            if key_id in keys:
                raise ConfigError(f"{PUBLIC_KEYS_ENV}: key id {key_id!r} appears twice")
            keys[key_id] = Ed25519PublicKey.from_public_bytes(raw)
        if not keys:
            raise ConfigError(f"{PUBLIC_KEYS_ENV} names no key")
        return cls(keys)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Keyring | None:
        """The keyring ``RUNPLANE_JOURNAL_PUBLIC_KEYS`` names; None (signatures are not
        checked) when it is unset."""
        text = env.get(PUBLIC_KEYS_ENV, "").strip()
        return cls.parse(text) if text else None

    def problem(self, value: bytes, header: bytes | None) -> str | None:
        """Why the message ``value`` is not signed by a key of this keyring (None: it is)."""
        if header is None:
            return "no runplane-sig header"
        try:
            key_id, _, b64 = header.decode("ascii").partition(":")
            sig = base64.b64decode(b64, validate=True)
        except (UnicodeDecodeError, binascii.Error, ValueError):
            return "runplane-sig header is malformed"
        key = self.keys.get(key_id)
        if key is None:
            return f"signed by key {key_id[:40]!r}, not in the keyring"
        try:
            key.verify(sig, _DOMAIN + value)
        except InvalidSignature:
            return f"signature by key {key_id!r} does not match the record"
        return None


def header_of(
    headers: Mapping[str, str | bytes | None] | Sequence[tuple[str, str | bytes | None]] | None,
) -> bytes | None:
    """The ``runplane-sig`` header among a message's headers (None when absent)."""
    items = headers.items() if isinstance(headers, Mapping) else (headers or ())
    for name, value in items:
        if name == HEADER:
            return value.encode("ascii", "replace") if isinstance(value, str) else value
    return None


def journal_headers(
    signer: Signer | None, journal_topic: str
) -> Callable[[str, bytes | None], list[tuple[str, bytes]] | None] | None:
    """What a chain writer's transactional producer adds to each record: the signature header
    on ``journal_topic`` (the full topic name), nothing elsewhere; None without a signer."""
    if signer is None:
        return None

    def headers(topic: str, value: bytes | None) -> list[tuple[str, bytes]] | None:
        if topic != journal_topic or value is None:
            return None
        return [signer.header(value)]

    return headers


def unsigned(
    keyring: Keyring | None, wire: Sequence[tuple[bytes, bytes | None]]
) -> tuple[str | None, ...] | None:
    """Per message (value, signature header): why it is not signed (None: it is). None for
    all when no keyring is configured: signatures are then not part of the verdict."""
    if keyring is None:
        return None
    return tuple(keyring.problem(value, header) for value, header in wire)
