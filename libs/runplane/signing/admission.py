"""Signed admission: who emitted a request, from an Ed25519 signature, never from its body.

An emitter (a system that asks for runs) holds one or more Ed25519 private keys; admission
holds the emitters registry — each emitter's name, the tenant it speaks for, the initiators
it may name, and its public keys by key id::

    emitters:
      - name: billing-gateway
        tenant: acme
        initiators: [ivan, olga]      # optional: omitted = any initiator of its tenant
        keys:
          - id: billing-gateway-2026-11
            public_key: 3q2+7w…       # base64 of the 32 raw bytes (runplane emitters new-key)
          - id: billing-gateway-2026-05
            public_key: …
            revoked: true             # refused from now on, kept to say why

The cases service starts follow-up runs for the tenant of each breached case: register its key
with ``any_tenant: true`` (and ``initiators: [runplane-sweeper]``) instead of a tenant.

Several keys of one emitter may be active at once: rotation is "register the new key, switch
the emitter over, revoke the old one". Key ids are unique across the registry. Admission
re-reads the file when it changes (:func:`watch_emitters`): a revocation needs no restart.

**Where the signature lives.** In Kafka record *headers*, over the exact key and value bytes
of the record, so the AdmissionRequest's wire bytes (and every journal built from it) are the
same signed or not::

    runplane-key-id     the key id (UTF-8)
    runplane-signed-ms  when it was signed, decimal milliseconds (ASCII)
    runplane-signature  64 bytes: Ed25519 over message(key id, signed ms, record key, value)

:func:`message` length-prefixes every part under a domain tag, so no two different records
sign the same bytes. **Replay**: the nonce is the admission key — a replayed record is the
same key, answered DUPLICATE, never a second run; ``runplane-signed-ms`` must also lie within
``window_ms`` of the record's timestamp, so a captured request whose key was refused (say, a
capability not yet deployed) cannot be replayed days later.

:func:`verify` is pure (values in, a closed union out); admission decides with its result.
"""

from __future__ import annotations

import base64
import binascii
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from runplane.errors import ConfigError
from runplane.serving.watched import WatchedFile, listed, load_yaml_secret
from runplane.wire import tenant_problem

__all__ = [
    "EMITTER_KEY_ENV",
    "EMITTER_KEY_FILE_ENV",
    "KEY_ID_HEADER",
    "SIGNATURE_HEADER",
    "SIGNED_JSON_HEADER",
    "SIGNED_MS_HEADER",
    "BadSignature",
    "Emitter",
    "EmitterKey",
    "Emitters",
    "Headers",
    "SigningKey",
    "Unsigned",
    "Verification",
    "Verified",
    "header",
    "message",
    "verify",
    "watch_emitters",
]

KEY_ID_HEADER = "runplane-key-id"
SIGNED_MS_HEADER = "runplane-signed-ms"
SIGNATURE_HEADER = "runplane-signature"
# A request that came over HTTP (services/admission/http.py) is signed over its JSON body, not
# the Avro record: the body rides along in this header, and admission checks the record says
# exactly what the signed JSON says.
SIGNED_JSON_HEADER = "runplane-signed-json"
EMITTER_KEY_FILE_ENV = "RUNPLANE_EMITTER_KEY_FILE"
EMITTER_KEY_ENV = "RUNPLANE_EMITTER_KEY"  # "<key id>:<base64 private key>" (a Secret's value)
_DOMAIN = b"runplane/admission-signature/v1\x00"
EMITTERS_FILE_NAMES = ("emitters.yaml", "emitters.yml")
_MAX_ID = 128
DEFAULT_WINDOW_MS = 5 * 60 * 1000


def message(key_id: str, signed_ms: int, record_key: bytes, value: bytes) -> bytes:
    """The bytes an admission signature covers: domain tag, then each part length-prefixed."""
    parts = (key_id.encode("utf-8"), str(signed_ms).encode("ascii"), record_key, value)
    return _DOMAIN + b"".join(struct.pack(">Q", len(p)) + p for p in parts)


def _id_problem(value: object, what: str) -> str | None:
    if not isinstance(value, str) or not value:
        return f"{what} is required"
    if len(value) > _MAX_ID or any(not c.isprintable() or c.isspace() for c in value):
        return f"{what} must be printable, without whitespace, at most {_MAX_ID} characters"
    return None


def _b64(text: object, size: int, what: str) -> bytes:
    try:
        raw = base64.b64decode(str(text), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise ConfigError(f"{what} must be base64 of {size} bytes")
    return raw


# --- the emitter's side ----------------------------------------------------------------------


@dataclass(frozen=True)
class SigningKey:
    """An emitter's private key and its id. ``repr`` never shows the key."""

    key_id: str
    private: Ed25519PrivateKey

    def __post_init__(self) -> None:
        problem = _id_problem(self.key_id, "key id")
        if problem:
            raise ConfigError(problem)

    def __repr__(self) -> str:
        return f"SigningKey({self.key_id!r})"

    @classmethod
    def generate(cls, key_id: str) -> SigningKey:
        return cls(key_id, Ed25519PrivateKey.generate())

    @classmethod
    def from_text(cls, text: str) -> SigningKey:
        """From ``<key id>:<base64 private key>`` (a key file's content, or the env value)."""
        key_id, sep, b64 = text.strip().rpartition(":")
        if not sep:
            raise ConfigError("an emitter key is '<key id>:<base64 private key>'")
        return cls(key_id, Ed25519PrivateKey.from_private_bytes(_b64(b64, 32, "the private key")))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SigningKey | None:
        """``RUNPLANE_EMITTER_KEY`` or the file ``RUNPLANE_EMITTER_KEY_FILE``; None = unsigned."""
        e = os.environ if env is None else env
        if e.get(EMITTER_KEY_ENV):
            return cls.from_text(e[EMITTER_KEY_ENV])
        path = e.get(EMITTER_KEY_FILE_ENV)
        if not path:
            return None
        try:
            return cls.from_text(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read emitter key file {path}: {exc}") from exc

    def to_text(self) -> str:
        raw = self.private.private_bytes_raw()
        return f"{self.key_id}:{base64.b64encode(raw).decode()}"

    def public_b64(self) -> str:
        return base64.b64encode(self.private.public_key().public_bytes_raw()).decode()

    def headers(self, record_key: bytes, value: bytes, signed_ms: int) -> Headers:
        """The Kafka headers that sign this record's key and value."""
        sig = self.private.sign(message(self.key_id, signed_ms, record_key, value))
        return [
            (KEY_ID_HEADER, self.key_id.encode("utf-8")),
            (SIGNED_MS_HEADER, str(signed_ms).encode("ascii")),
            (SIGNATURE_HEADER, sig),
        ]


# --- admission's side ------------------------------------------------------------------------


@dataclass(frozen=True)
class EmitterKey:
    key_id: str
    public_key: bytes  # 32 raw bytes
    revoked: bool = False

    def __post_init__(self) -> None:
        problem = _id_problem(self.key_id, "key id")
        if problem:
            raise ConfigError(problem)
        if len(self.public_key) != 32:
            raise ConfigError(f"key {self.key_id}: an Ed25519 public key is 32 bytes")


@dataclass(frozen=True)
class Emitter:
    """A registered emitter: the tenant it speaks for and the initiators it may name
    (None = any). ``any_tenant`` (``tenant`` then None) is for the platform's own emitter,
    the cases service, whose breach follow-ups run for each case's tenant."""

    name: str
    tenant: str | None
    keys: tuple[EmitterKey, ...]
    initiators: frozenset[str] | None = None
    any_tenant: bool = False

    def __post_init__(self) -> None:
        problem = _id_problem(self.name, "emitter name")
        if not problem and self.any_tenant != (self.tenant is None):
            problem = "give either a tenant or any_tenant: true"
        if not problem and self.tenant is not None:
            problem = tenant_problem(self.tenant)
        if problem:
            raise ConfigError(f"emitter {self.name!r}: {problem}")

    def speaks_for(self, tenant: str) -> bool:
        return self.any_tenant or tenant == self.tenant

    def may_name(self, initiator: str) -> bool:
        return self.initiators is None or initiator in self.initiators


@dataclass(frozen=True)
class Emitters:
    """The emitters registry admission checks signatures against. Empty = nobody signs."""

    emitters: tuple[Emitter, ...] = ()

    def __post_init__(self) -> None:
        ids = [k.key_id for e in self.emitters for k in e.keys]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ConfigError(f"key ids registered twice: {', '.join(dupes)}")
        names = [e.name for e in self.emitters]
        if len(set(names)) != len(names):
            raise ConfigError("an emitter is registered twice")

    def key(self, key_id: str) -> tuple[Emitter, EmitterKey] | None:
        for emitter in self.emitters:
            for k in emitter.keys:
                if k.key_id == key_id:
                    return emitter, k
        return None

    @classmethod
    def from_file(cls, path: Path | None) -> Emitters:
        """From a YAML file, or a directory (a mounted Secret) holding ``emitters.yaml``."""
        if path is None:
            return cls()
        data, target = load_yaml_secret(path, "emitters", EMITTERS_FILE_NAMES)
        return cls.from_data(data, str(target))

    @classmethod
    def from_data(cls, data: Any, where: str = "emitters") -> Emitters:
        items = listed(data, "emitters", where)
        return cls(tuple(_emitter(item, f"{where}[{i}]") for i, item in enumerate(items)))


def watch_emitters(path: Path | None) -> WatchedFile[Emitters]:
    """The registry of ``path``, re-read when the file changes: a new or revoked key takes
    effect on the next record, no restart (``runplane.serving.watched``)."""
    return WatchedFile(
        path, Emitters.from_file, Emitters(), what="emitters", names=EMITTERS_FILE_NAMES
    )


def _emitter(item: Any, where: str) -> Emitter:
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: expected a mapping")
    keys = item.get("keys")
    if not isinstance(keys, Sequence) or isinstance(keys, str | bytes) or not keys:
        raise ConfigError(f"{where}: keys must be a non-empty list")
    if any("private_key" in k for k in keys if isinstance(k, Mapping)):
        raise ConfigError(f"{where}: store public keys only, never a private key")
    inits = item.get("initiators")
    if inits is not None and (
        not isinstance(inits, Sequence) or not all(isinstance(i, str) and i for i in inits)
    ):
        raise ConfigError(f"{where}: initiators must be a list of principal names")
    any_tenant = item.get("any_tenant", False) is True
    tenant = item.get("tenant")
    return Emitter(
        name=str(item.get("name", "")),
        tenant=None if tenant is None and any_tenant else str(tenant or ""),
        keys=tuple(_key(k, f"{where}.keys[{j}]") for j, k in enumerate(keys)),
        initiators=None if inits is None else frozenset(inits),
        any_tenant=any_tenant,
    )


def _key(item: Any, where: str) -> EmitterKey:
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: expected a mapping")
    raw = _b64(item.get("public_key", ""), 32, f"{where}: public_key")
    return EmitterKey(str(item.get("id", "")), raw, bool(item.get("revoked", False)))


@dataclass(frozen=True)
class Verified:
    emitter: Emitter
    key_id: str


@dataclass(frozen=True)
class Unsigned:
    """No signature headers at all (admitted only in dev mode)."""


@dataclass(frozen=True)
class BadSignature:
    reason: str


Verification = Verified | Unsigned | BadSignature
# Kafka record headers as librdkafka takes and gives them (a str value is its UTF-8 bytes).
Headers = Sequence[tuple[str, str | bytes | None]]


def header(headers: Headers, name: str) -> bytes | None:
    """The value of header ``name``; None when absent, b"" when repeated (ambiguous)."""
    return _header(headers, name)


def _header(headers: Headers, name: str) -> bytes | None:
    found = [v.encode() if isinstance(v, str) else v for k, v in headers if k == name]
    # Two values for one header is ambiguous: which one was signed? Treat it as forged.
    return found[0] if len(found) == 1 else (b"" if found else None)


def verify(
    emitters: Emitters,
    record_key: bytes,
    value: bytes,
    headers: Headers,
    record_ms: int,
    *,
    window_ms: int = DEFAULT_WINDOW_MS,
) -> Verification:
    """Who signed this record, or why its signature does not count (pure)."""
    key_id_raw = _header(headers, KEY_ID_HEADER)
    signed_raw = _header(headers, SIGNED_MS_HEADER)
    sig = _header(headers, SIGNATURE_HEADER)
    if key_id_raw is None and signed_raw is None and sig is None:
        return Unsigned()
    if not key_id_raw or not signed_raw or not sig:
        return BadSignature("incomplete or repeated signature headers")
    try:
        key_id = key_id_raw.decode("utf-8")
        signed_ms = int(signed_raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return BadSignature("unreadable key id or signed-ms header")
    found = emitters.key(key_id)
    if found is None:
        return BadSignature(f"unknown key id {key_id[:_MAX_ID]!r}")
    emitter, key = found
    if key.revoked:
        return BadSignature(f"key {key_id} of {emitter.name} is revoked")
    try:
        Ed25519PublicKey.from_public_bytes(key.public_key).verify(
            sig, message(key_id, signed_ms, record_key, value)
        )
    except InvalidSignature:
        return BadSignature(f"signature does not verify with key {key_id}")
    if abs(record_ms - signed_ms) > window_ms:
        return BadSignature(
            f"signed at {signed_ms}, {abs(record_ms - signed_ms)} ms from the record's "
            f"timestamp {record_ms} (window {window_ms} ms): a replay or a skewed clock"
        )
    return Verified(emitter, key_id)
