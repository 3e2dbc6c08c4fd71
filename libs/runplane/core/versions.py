"""Agent versions: which deployed version serves a run, and which one a new run starts on.

A version is a dotted string (``"1"``, ``"1.1"``, ``"2"``). Its first part is its *line*: the
versions of one line replay each other's histories — ``1.1`` is ``1`` with a fix behind
``ctx.patched`` — so a run recorded on ``1`` continues on the newest deployed version of line
``1``; a new line (``2``) is a changed call sequence that only new runs take. A run whose line
is not deployed any more is not failed: the executor parks it on its version, holding what
arrives for it, until a version of its line is deployed again (``runplane.core.engine.stranded``).
Unversioned agents (``None``) behave as today: one
version, always the one deployed.

Pure: values in, values out. ``runplane.core.agents.AgentRegistry`` holds the versions of each
capability; admission and the executor resolve through ``resolve``.
"""

from __future__ import annotations

import hashlib
import inspect
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runplane.errors import RunplaneError

__all__ = [
    "VersionNotDeployed",
    "VersionRow",
    "code_digest",
    "inventory",
    "line_of",
    "newest",
    "resolve",
    "version_key",
    "version_problem",
]


class VersionNotDeployed(RunplaneError):
    """No deployed version of the capability can serve the run's version (its line is gone)."""


def version_problem(version: str) -> str | None:
    """Why ``version`` is not a version string, or None."""
    if not version or version != version.strip() or any(not p for p in version.split(".")):
        return f"agent version {version!r} must be dotted parts like 1, 1.1 or 2.0-rc1"
    return None


def version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    """Orders versions: numeric parts numerically (``1.10`` after ``1.9``), others as text
    after every number."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in version.split("."))


def line_of(version: str) -> str:
    return version.split(".", 1)[0]


def newest(versions: Iterable[str]) -> str | None:
    return max(versions, key=version_key, default=None)


def resolve(deployed: Iterable[str], wanted: str | None) -> str | None:
    """The deployed version serving a run of version ``wanted``: itself, else the newest of its
    line; the newest of all for ``None`` (a new run, or one recorded before versions).
    ``VersionNotDeployed`` when its line has no deployed version."""
    versions = list(deployed)
    if wanted is None:
        return newest(versions)
    if wanted in versions:
        return wanted
    same_line = [v for v in versions if line_of(v) == line_of(wanted)]
    if not same_line:
        shown = ", ".join(sorted(versions, key=version_key)) or "none"
        raise VersionNotDeployed(f"version {wanted} is not deployed (deployed: {shown})")
    return newest(same_line)


def code_digest(fn: Callable[..., Any]) -> str | None:
    """Hex SHA-256 of the source of the module defining ``fn`` (its helpers included): what
    ``runplane agents list`` shows beside a version, so two builds claiming one version differ
    visibly. None when the source cannot be read (a frozen or generated module)."""
    module = inspect.getmodule(fn)
    try:
        source = inspect.getsource(module if module is not None else fn)
    except (OSError, TypeError):
        return None
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class VersionRow:
    """One line of ``runplane agents list``: a version deployed here or still in flight.

    ``served_by``: the deployed version its runs continue on (itself when deployed, else the
    newest of its line; None for an unversioned agent). ``stranded``: no deployed version can
    serve its runs (its line is gone): they stay parked. ``parked``: of the runs in flight, those
    an executor has parked because it could not serve them (their snapshots say so; released
    as soon as an executor hosting the line owns them). A version with no runs in flight, or
    whose runs a newer version of its line serves, can be removed."""

    capability: str
    version: str | None
    digest: str | None
    deployed: bool
    in_flight: int
    served_by: str | None
    stranded: bool
    parked: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "capability": self.capability,
            "version": self.version,
            "digest": self.digest,
            "deployed": self.deployed,
            "in_flight": self.in_flight,
            "served_by": self.served_by,
            "stranded": self.stranded,
            "parked": self.parked,
        }


def inventory(
    deployed: Mapping[str, Mapping[str | None, str | None]],
    in_flight: Iterable[tuple[str, str | None]],
    parked: Iterable[tuple[str, str | None]] = (),
) -> list[VersionRow]:
    """Rows for every (capability, version) deployed (``deployed``: capability → version →
    code digest) or recorded by a run in flight (``in_flight``: (capability, version) per run;
    ``parked``: the same for the runs among them an executor parked on their version)."""
    counts = Counter(in_flight)
    parked_counts = Counter(parked)
    keys = {(c, v) for c, vs in deployed.items() for v in vs} | set(counts)
    rows = []
    for cap, version in keys:
        here = deployed.get(cap, {})
        served: str | None = None
        stranded = not here
        if here and None not in here:
            try:
                served = resolve([v for v in here if v is not None], version)
            except VersionNotDeployed:
                stranded = True
        row = VersionRow(
            cap,
            version,
            here.get(version),
            version in here,
            counts[(cap, version)],
            served,
            stranded,
            parked_counts[(cap, version)],
        )
        rows.append(row)
    return sorted(rows, key=lambda r: (r.capability, version_key(r.version or "0")))
