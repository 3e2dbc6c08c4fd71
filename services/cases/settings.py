"""The cases service's settings: one frozen object, built once from ``RUNPLANE_*`` variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from runplane.config import Settings, env_int
from runplane.errors import ConfigError
from runplane.signing.admission import SigningKey
from runplane.signing.journal import Signer
from services.cases.warning import DEFAULT_WARN_ROLE


@dataclass(frozen=True)
class CasesSettings:
    """``batch_max`` / ``batch_ms`` bound one transaction of the processor. ``emitter_key``
    signs the breach follow-ups it sends to admission (``RUNPLANE_EMITTER_KEY`` or
    ``RUNPLANE_EMITTER_KEY_FILE``, registered ``any_tenant``; None: unsigned, admitted only by
    an admission in dev mode)."""

    base: Settings = field(default_factory=Settings)
    batch_max: int = 500
    batch_ms: int = 20
    emitter_key: SigningKey | None = None
    # Signs the sealed sweep runs' journal records (RUNPLANE_JOURNAL_SIGNING_KEY).
    journal_signer: Signer | None = None
    # Who is told when an obligation without an owner role passes its warn time.
    warn_role: str = DEFAULT_WARN_ROLE

    def __post_init__(self) -> None:
        if self.batch_max < 1 or self.batch_ms < 0:
            raise ConfigError("RUNPLANE_CASES_BATCH_MAX >= 1 and RUNPLANE_CASES_BATCH_MS >= 0")

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, base: Settings | None = None
    ) -> CasesSettings:
        e = os.environ if env is None else env
        d = cls()
        return cls(
            base=base if base is not None else Settings.from_env(e),
            batch_max=env_int(e, "RUNPLANE_CASES_BATCH_MAX", d.batch_max),
            batch_ms=env_int(e, "RUNPLANE_CASES_BATCH_MS", d.batch_ms),
            emitter_key=SigningKey.from_env(e),
            journal_signer=Signer.from_env(e),
            warn_role=e.get("RUNPLANE_CASES_WARN_ROLE", d.warn_role) or d.warn_role,
        )
