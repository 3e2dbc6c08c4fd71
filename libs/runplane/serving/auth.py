"""Principals and bearer tokens: who is acting, from the credential, never from a request body.

A deployment lists its principals in a YAML (or JSON) file; tokens are stored as their hex
SHA-256 only, so the file reveals no credential::

    principals:
      - name: ada
        token_sha256: 9f86d081…   # sha256 of the bearer token's UTF-8 bytes
        roles: [finance, auditor]
        tenant: acme                # optional; default "default"

(a top-level list of principals is accepted too). The path may also be a directory — a
Kubernetes secret mounted as a volume — holding ``principals.yaml`` (or ``.yml``/``.json``).

``Principals.authenticate(token)`` hashes the presented token and compares it against every
entry in constant time, so timing reveals neither which entry matched nor how much of a digest
did. A principal belongs to one tenant: the worklist shows and lets them decide only that
tenant's tasks, the journal API only that tenant's runs. Generic on purpose: the worklist checks roles like ``finance``, the journal service the
role ``auditor``; this module knows no role names.

``token_digest`` is how a deployment produces the stored form::

    python -c 'import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())' TOKEN

Services hold a :class:`PrincipalsFile`, not a fixed :class:`Principals`: it stats the file on
every lookup and re-reads it when it changes (``runplane.serving.watched``). A rotated Kubernetes
secret or an edited file takes effect on the next request, no restart; a new version that does
not parse is refused with a warning and the last good one stays in force.

:func:`require_principal` is the one HTTP check every API uses: the bearer token names the
principal (401 when missing or unknown), an optional role is required of it (403).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from starlette.exceptions import HTTPException

from runplane.errors import ConfigError
from runplane.serving.watched import WatchedFile, listed, load_yaml_secret
from runplane.wire import tenant_problem

__all__ = [
    "DEFAULT_TENANT",
    "PRINCIPALS_FILE_ENV",
    "Principal",
    "PrincipalSource",
    "Principals",
    "PrincipalsFile",
    "bearer_token",
    "require_principal",
    "token_digest",
]

log = logging.getLogger(__name__)

PRINCIPALS_FILE_ENV = "RUNPLANE_WORKLIST_PRINCIPALS_FILE"
# The tenant of a principal that names none, and of records written before tenants were
# carried (a task from an older executor): the emitter's and client's default tenant too.
DEFAULT_TENANT = "default"
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
    """A configured identity: its name, the digest of its token, its roles and its tenant."""

    name: str
    token_sha256: str
    roles: frozenset[str]
    tenant: str = DEFAULT_TENANT

    def __post_init__(self) -> None:
        problem = _name_problem(self.name)
        if problem:
            raise ConfigError(f"principal {self.name!r}: {problem}")
        bad_tenant = tenant_problem(self.tenant)
        if bad_tenant:
            raise ConfigError(f"principal {self.name}: {bad_tenant}")
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

    def tenant_of(self, name: str) -> str | None:
        """The tenant of ``name``; None for an unknown name (who belongs to no tenant)."""
        p = self.get(name)
        return None if p is None else p.tenant

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
        data, target = load_yaml_secret(path, "principals", _SECRET_FILE_NAMES)
        return cls.from_data(data, str(target))

    @classmethod
    def from_data(cls, data: Any, where: str = "principals") -> Principals:
        """From parsed YAML: ``{principals: [...]}`` or a bare list."""
        items = listed(data, "principals", where)
        return cls(tuple(_principal(item, f"{where}[{i}]") for i, item in enumerate(items)))


def _principal(item: Any, where: str) -> Principal:
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: expected a mapping")
    name, digest, roles = item.get("name"), item.get("token_sha256"), item.get("roles", [])
    tenant = item.get("tenant", DEFAULT_TENANT)
    if not isinstance(tenant, str):
        raise ConfigError(f"{where} ({name}): tenant must be a string")
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
    digest = digest.lower() if digest.isascii() else digest
    return Principal(str(name), digest, frozenset(roles), tenant)


class PrincipalSource(Protocol):
    """What a service asks of its principals (both :class:`Principals` and
    :class:`PrincipalsFile` answer it)."""

    def authenticate(self, token: str | None) -> Principal | None: ...
    def roles_of(self, name: str) -> frozenset[str]: ...
    def tenant_of(self, name: str) -> str | None: ...


class PrincipalsFile(WatchedFile[Principals]):
    """The principals of a file (or mounted secret directory), re-read when it changes
    (``runplane.serving.watched``): a rotated token takes effect on the next request.

    Construction reads the file and raises ``ConfigError`` when it is bad: a service must not
    start with a broken principals file. ``path=None`` means no principals (nobody can
    authenticate).
    """

    def __init__(self, path: Path | None) -> None:
        super().__init__(
            path, Principals.from_file, Principals(), what="principals", names=_SECRET_FILE_NAMES
        )

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, var: str = PRINCIPALS_FILE_ENV
    ) -> PrincipalsFile:
        e = os.environ if env is None else env
        raw = e.get(var)
        return cls(Path(raw) if raw else None)

    def authenticate(self, token: str | None) -> Principal | None:
        return self.current().authenticate(token)

    def roles_of(self, name: str) -> frozenset[str]:
        return self.current().roles_of(name)

    def tenant_of(self, name: str) -> str | None:
        return self.current().tenant_of(name)

    def get(self, name: str) -> Principal | None:
        return self.current().get(name)


_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def require_principal(
    principals: PrincipalSource,
    authorization: str | None,
    *,
    role: str | None = None,
    purpose: str = "",
) -> Principal:
    """The principal an ``Authorization`` header authenticates, for an HTTP handler.

    Raises ``HTTPException`` 401 (with a Bearer challenge) when the token is missing or
    unknown, and 403 when ``role`` is given and the principal lacks it; ``purpose`` ("read
    bodies") makes the messages say what was being attempted.
    """
    to = f" to {purpose}" if purpose else ""
    token = bearer_token(authorization)
    if token is None:
        raise HTTPException(401, f"a bearer token is required{to}", headers=_CHALLENGE)
    who = principals.authenticate(token)
    if who is None:
        raise HTTPException(401, "unknown token", headers=_CHALLENGE)
    if role is not None and role not in who.roles:
        what = purpose or "do this"
        raise HTTPException(403, f"{who.name} may not {what} (needs role {role!r})")
    return who
