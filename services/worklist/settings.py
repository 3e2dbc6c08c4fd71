"""The worklist's settings: one frozen object, built once from ``RUNPLANE_*`` variables.

- ``RUNPLANE_WORKLIST_PRINCIPALS_FILE``: principals, hashed tokens, roles (a file, or a mounted
  Kubernetes secret directory holding ``principals.yaml``). Without it nobody can sign in.
- ``RUNPLANE_WORKLIST_ESCALATION_ROLE`` (default ``supervisor``): who an expired task with
  ``on_expiry=ESCALATE`` goes to when the task names no ``escalate_to``.
- ``RUNPLANE_WORKLIST_WAIT_MS`` (default 10000): how long an API call waits for the single
  writer to apply its command before answering 503.
- ``RUNPLANE_WORKLIST_BATCH_MAX`` / ``_BATCH_MS``: bounds of one processor transaction.
- ``RUNPLANE_WORKLIST_TICK_MS`` (default 1000): how often due tasks are expired.
- ``RUNPLANE_WORKLIST_CLAIM_TTL_S`` (default 1800; 0 = claims never lapse): the claim lease.
  The writer's tick hands a task claimed longer than this back to OPEN, noted on the task.
- ``RUNPLANE_WORKLIST_SUPERVISOR_ROLE`` (default ``supervisor``): who may release anyone's
  claim.
- ``RUNPLANE_WORKLIST_PUBLIC_ORIGIN`` (e.g. ``https://worklist.example.com``): the address
  people reach the page at, when a proxy or ingress sits in front (TLS terminated there). The
  page compares a POST's ``Origin`` with it and marks the sign-in cookie ``Secure`` when it
  is https. Unset: the request's own scheme and host. (The proxy's ``X-Forwarded-*`` headers
  are trusted per ``RUNPLANE_FORWARDED_ALLOW_IPS``, read by ``runplane.serving.shell.run_http``.)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runplane.config import Settings, env_int, env_str
from runplane.errors import ConfigError
from runplane.serving.auth import PRINCIPALS_FILE_ENV
from runplane.web import public_origin


@dataclass(frozen=True)
class WorklistSettings:
    base: Settings = field(default_factory=Settings)
    principals_file: Path | None = None
    escalation_role: str = "supervisor"
    wait_ms: int = 10_000
    batch_max: int = 200
    batch_ms: int = 10
    tick_ms: int = 1_000
    claim_ttl_s: int = 1_800
    supervisor_role: str = "supervisor"
    public_origin: str | None = None
    # Where the journal's runs UI is (RUNPLANE_WORKLIST_RUNS_UI, an origin): a task's run
    # links there. None: the run id is shown without a link.
    runs_ui: str | None = None

    def __post_init__(self) -> None:
        if self.claim_ttl_s < 0:
            raise ConfigError("RUNPLANE_WORKLIST_CLAIM_TTL_S must not be negative (0: no lease)")
        if not self.supervisor_role.strip():
            raise ConfigError("RUNPLANE_WORKLIST_SUPERVISOR_ROLE must not be empty")
        if self.batch_max < 1 or self.batch_ms < 0:
            raise ConfigError("RUNPLANE_WORKLIST_BATCH_MAX >= 1 and _BATCH_MS >= 0 are required")
        if self.wait_ms < 100:
            raise ConfigError("RUNPLANE_WORKLIST_WAIT_MS must be at least 100")
        if self.tick_ms < 10:
            raise ConfigError("RUNPLANE_WORKLIST_TICK_MS must be at least 10")
        if not self.escalation_role.strip():
            raise ConfigError("RUNPLANE_WORKLIST_ESCALATION_ROLE must not be empty")

    @property
    def claim_ttl_ms(self) -> int | None:
        """The claim lease for the rules (None: claims never lapse)."""
        return self.claim_ttl_s * 1000 or None

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, base: Settings | None = None
    ) -> WorklistSettings:
        e = os.environ if env is None else env
        d = cls()
        principals = env_str(e, PRINCIPALS_FILE_ENV)
        return cls(
            base=base if base is not None else Settings.from_env(e),
            principals_file=Path(principals) if principals else None,
            escalation_role=env_str(e, "RUNPLANE_WORKLIST_ESCALATION_ROLE", d.escalation_role),
            wait_ms=env_int(e, "RUNPLANE_WORKLIST_WAIT_MS", d.wait_ms),
            batch_max=env_int(e, "RUNPLANE_WORKLIST_BATCH_MAX", d.batch_max),
            batch_ms=env_int(e, "RUNPLANE_WORKLIST_BATCH_MS", d.batch_ms),
            tick_ms=env_int(e, "RUNPLANE_WORKLIST_TICK_MS", d.tick_ms),
            claim_ttl_s=env_int(e, "RUNPLANE_WORKLIST_CLAIM_TTL_S", d.claim_ttl_s),
            supervisor_role=env_str(e, "RUNPLANE_WORKLIST_SUPERVISOR_ROLE", d.supervisor_role),
            public_origin=public_origin(
                e.get("RUNPLANE_WORKLIST_PUBLIC_ORIGIN"), "RUNPLANE_WORKLIST_PUBLIC_ORIGIN"
            ),
            runs_ui=public_origin(e.get("RUNPLANE_WORKLIST_RUNS_UI"), "RUNPLANE_WORKLIST_RUNS_UI"),
        )
