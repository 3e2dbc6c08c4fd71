"""The worklist's settings: one frozen object, built once from ``RUNPLANE_*`` variables.

- ``RUNPLANE_WORKLIST_PRINCIPALS_FILE``: principals, hashed tokens, roles (a file, or a mounted
  Kubernetes secret directory holding ``principals.yaml``). Without it nobody can sign in.
- ``RUNPLANE_WORKLIST_ESCALATION_ROLE`` (default ``supervisor``): who an expired task with
  ``on_expiry=ESCALATE`` goes to when the task names no ``escalate_to``.
- ``RUNPLANE_WORKLIST_WAIT_MS`` (default 10000): how long an API call waits for the single
  writer to apply its command before answering 503.
- ``RUNPLANE_WORKLIST_BATCH_MAX`` / ``_BATCH_MS``: bounds of one processor transaction.
- ``RUNPLANE_WORKLIST_TICK_MS`` (default 1000): how often due tasks are expired.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runplane.auth import PRINCIPALS_FILE_ENV
from runplane.config import Settings
from runplane.errors import ConfigError


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from exc


@dataclass(frozen=True)
class WorklistSettings:
    base: Settings = field(default_factory=Settings)
    principals_file: Path | None = None
    escalation_role: str = "supervisor"
    wait_ms: int = 10_000
    batch_max: int = 200
    batch_ms: int = 10
    tick_ms: int = 1_000

    def __post_init__(self) -> None:
        if self.batch_max < 1 or self.batch_ms < 0:
            raise ConfigError("RUNPLANE_WORKLIST_BATCH_MAX >= 1 and _BATCH_MS >= 0 are required")
        if self.wait_ms < 100:
            raise ConfigError("RUNPLANE_WORKLIST_WAIT_MS must be at least 100")
        if self.tick_ms < 10:
            raise ConfigError("RUNPLANE_WORKLIST_TICK_MS must be at least 10")
        if not self.escalation_role.strip():
            raise ConfigError("RUNPLANE_WORKLIST_ESCALATION_ROLE must not be empty")

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, base: Settings | None = None
    ) -> WorklistSettings:
        e = os.environ if env is None else env
        d = cls()
        principals = e.get(PRINCIPALS_FILE_ENV)
        return cls(
            base=base if base is not None else Settings.from_env(e),
            principals_file=Path(principals) if principals else None,
            escalation_role=e.get("RUNPLANE_WORKLIST_ESCALATION_ROLE") or d.escalation_role,
            wait_ms=_int(e, "RUNPLANE_WORKLIST_WAIT_MS", d.wait_ms),
            batch_max=_int(e, "RUNPLANE_WORKLIST_BATCH_MAX", d.batch_max),
            batch_ms=_int(e, "RUNPLANE_WORKLIST_BATCH_MS", d.batch_ms),
            tick_ms=_int(e, "RUNPLANE_WORKLIST_TICK_MS", d.tick_ms),
        )
