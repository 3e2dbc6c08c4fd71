"""Principals and bearer tokens: who is acting, from the credential, never from a request body.

A deployment lists its principals in a YAML (or JSON) file; tokens are stored as their hex
SHA-256 only, so the file reveals no credential::

    principals:
      - name: ada
        token_sha256: 9f86d081…   # sha256 of the bearer token's UTF-8 bytes
        roles: [finance, auditor]

(a top-level list of principals is accepted too). The path may also be a directory — a
Kubernetes secret mounted as a volume — holding ``principals.yaml`` (or ``.yml``/``.json``).

``Principals.authenticate(token)`` hashes the presented token and compares it against every
entry in constant time, so timing reveals neither which entry matched nor how much of a digest
did. Generic on purpose: the worklist checks roles like ``finance``, the journal service the
role ``auditor``; this module knows no role names.

``token_digest`` is how a deployment produces the stored form::

    python -c 'import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())' TOKEN
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runplane.errors import ConfigError

__all__ = [
    "PRINCIPALS_FILE_ENV",
    "Principal",
    "Principals",
    "bearer_token",
    "token_digest",
]

PRINCIPALS_FILE_ENV = "RUNPLANE_WORKLIST_PRINCIPALS_FILE"
_SECRET_FILE_NAMES = ("principals.yaml", "principals.yml", "principals.json")
_HEX = frozenset("0123456789abcdef")
# A principal's name ends up in wire records (ClaimTask.principal, TaskDecision.decided_by),
# audit trails and HTML; keep it printable and bounded so none of those need escaping rules.
_MAX_NAME = 128


def token_digest(token: str) -> str:
    """How a token is stored: the hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer …`` header value, or None when there is none."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def _name_problem(name: object) -> str | None:
    if not isinstance(name, str) or not name:
        return "name is required"
    if len(name) > _MAX_NAME:
        return f"name is longer than {_MAX_NAME} characters"
    if any(not ch.isprintable() or ch.isspace() for ch in name):
        return "name must be printable with no whitespace"
    return None


@dataclass(frozen=True, slots=True)
class Principal:
    """A configured identity: its name, the digest of its token, and its roles."""

    name: str
    token_sha256: str
    roles: frozenset[str]

    def __post_init__(self) -> None:
        problem = _name_problem(self.name)
        if problem:
            raise ConfigError(f"principal {self.name!r}: {problem}")
        if len(self.token_sha256) != 64 or not set(self.token_sha256) <= _HEX:
            raise ConfigError(f"principal {self.name}: token_sha256 must be 64 lowercase hex")

    def has_role(self, role: str) -> bool:
        return role in self.roles


@dataclass(frozen=True)
class Principals:
    """The principals a service accepts. Empty means nobody can authenticate."""

    principals: tuple[Principal, ...] = ()

    def __post_init__(self) -> None:
        names = [p.name for p in self.principals]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"principals listed twice: {', '.join(dupes)}")
        digests = [p.token_sha256 for p in self.principals]
        if len(set(digests)) != len(digests):
            # Two people sharing a token would make "who acted" unanswerable.
            raise ConfigError("two principals share a token")

    def authenticate(self, token: str | None) -> Principal | None:
        """The principal holding ``token``, or None (missing or unknown token)."""
        if not token:
            return None
        digest = token_digest(token)
        found = None
        for p in self.principals:
            # Compare against every entry, no early exit: timing must not reveal a match.
            if hmac.compare_digest(p.token_sha256, digest):
                found = p
        return found

    def get(self, name: str) -> Principal | None:
        """The principal named ``name`` (for a writer re-checking roles), or None."""
        for p in self.principals:
            if p.name == name:
                return p
        return None

    def roles_of(self, name: str) -> frozenset[str]:
        """The roles of ``name``; an unknown name has none."""
        p = self.get(name)
        return frozenset() if p is None else p.roles

    # --- loading ---------------------------------------------------------------------------

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, var: str = PRINCIPALS_FILE_ENV
    ) -> Principals:
        """From the file named by ``var``; no variable → no principals."""
        e = os.environ if env is None else env
        raw = e.get(var)
        return cls.from_file(Path(raw)) if raw else cls()

    @classmethod
    def from_file(cls, path: Path | None) -> Principals:
        """From a YAML/JSON file, or a directory (a mounted secret) holding one."""
        if path is None:
            return cls()
        target = path
        if path.is_dir():
            found = [path / n for n in _SECRET_FILE_NAMES if (path / n).is_file()]
            if not found:
                raise ConfigError(f"{path} holds none of {', '.join(_SECRET_FILE_NAMES)}")
            target = found[0]
        try:
            data = yaml.safe_load(target.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read principals file {target}: {exc}") from exc
        return cls.from_data(data, str(target))

    @classmethod
    def from_data(cls, data: Any, where: str = "principals") -> Principals:
        """From parsed YAML: ``{principals: [...]}`` or a bare list."""
        items = data.get("principals") if isinstance(data, Mapping) else data
        if items is None:
            items = []
        if not isinstance(items, Sequence) or isinstance(items, str | bytes):
            raise ConfigError(f"{where}: expected a list of principals")
        return cls(tuple(_principal(item, f"{where}[{i}]") for i, item in enumerate(items)))


def _principal(item: Any, where: str) -> Principal:
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: expected a mapping")
    name, digest, roles = item.get("name"), item.get("token_sha256"), item.get("roles", [])
    problem = _name_problem(name)
    if problem:
        raise ConfigError(f"{where}: {problem}")
    if "token" in item:
        # A plaintext token in the file is exactly what hashing is meant to prevent.
        raise ConfigError(f"{where} ({name}): store token_sha256, never the token itself")
    if not isinstance(digest, str):
        raise ConfigError(f"{where} ({name}): token_sha256 is required")
    if not isinstance(roles, Sequence) or isinstance(roles, str | bytes):
        raise ConfigError(f"{where} ({name}): roles must be a list")
    if not all(isinstance(r, str) and r for r in roles):
        raise ConfigError(f"{where} ({name}): roles must be non-empty strings")
    return Principal(str(name), digest.lower() if digest.isascii() else digest, frozenset(roles))
