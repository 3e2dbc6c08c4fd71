"""Who may read bodies: bearer tokens, stored hashed, with roles.

The file (``RUNPLANE_JOURNAL_READERS_FILE``, or the worklist's shared
``RUNPLANE_WORKLIST_PRINCIPALS_FILE``) is YAML or JSON::

    principals:
      - name: ada
        token_sha256: 9f86d081…   # hex SHA-256 of the bearer token; the token itself is never stored
        roles: [auditor]

(a top-level list of principals is accepted too). Identity comes from the token only, never
from a request body or parameter. Only the role ``auditor`` may see bodies.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from runplane.errors import ConfigError

AUDITOR = "auditor"


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    token_sha256: str
    roles: frozenset[str]


def token_digest(token: str) -> str:
    """How a token is stored: hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Readers:
    """The principals that may present a token to the journal API."""

    principals: tuple[Principal, ...] = ()

    def authenticate(self, token: str) -> Principal | None:
        digest = token_digest(token)
        found = None
        for p in self.principals:
            # compare every entry in constant time: no early exit leaks which prefix matched
            if hmac.compare_digest(p.token_sha256, digest):
                found = p
        return found

    @classmethod
    def from_file(cls, path: Path | None) -> Readers:
        if path is None:
            return cls()
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read principals file {path}: {exc}") from exc
        return cls.from_data(data, str(path))

    @classmethod
    def from_data(cls, data: Any, where: str = "principals") -> Readers:
        items = data.get("principals") if isinstance(data, Mapping) else data
        if not isinstance(items, Sequence) or isinstance(items, str):
            raise ConfigError(f"{where}: expected a list of principals")
        out = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise ConfigError(f"{where}[{i}]: expected a mapping")
            name, digest, roles = item.get("name"), item.get("token_sha256"), item.get("roles", [])
            if not isinstance(name, str) or not name:
                raise ConfigError(f"{where}[{i}]: name is required")
            if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise ConfigError(f"{where}[{i}] ({name}): token_sha256 must be 64 lowercase hex")
            if not isinstance(roles, Sequence) or isinstance(roles, str):
                raise ConfigError(f"{where}[{i}] ({name}): roles must be a list")
            out.append(Principal(name, digest, frozenset(str(r) for r in roles)))
        return cls(tuple(out))
