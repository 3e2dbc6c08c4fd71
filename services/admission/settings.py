"""The admission service's settings: one frozen object, built once from ``RUNPLANE_*``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runplane.config import Settings, env_bool, env_int, env_str
from runplane.core.limits import DEFAULT_MAX_INPUT_BYTES
from runplane.errors import ConfigError
from runplane.signing.admission import DEFAULT_WINDOW_MS
from runplane.signing.journal import Signer


@dataclass(frozen=True)
class AdmissionSettings:
    """``batch_max`` / ``batch_ms`` bound one transaction; the agent modules are imported to
    learn the capabilities (and their input schemas) admission accepts: ``agent_modules``
    when given (tests), else the platform's one setting ``base.agent_modules``
    (``RUNPLANE_AGENT_MODULES``, the executor's too — see :attr:`modules`).

    ``transaction_timeout_ms`` bounds how long a killed instance's open transaction can hold
    back read_committed readers (and a successor's restore) before the broker aborts it;
    ``session_timeout_ms`` how long its group membership holds its partitions.

    Emitters are authenticated by signature (``runplane.signing.admission``, docs/security.md):
    ``emitters_file`` is the registry (``RUNPLANE_ADMISSION_EMITTERS_FILE``, a YAML file or a
    mounted Secret directory holding ``emitters.yaml``; re-read when it changes). ``allow_unsigned`` (``RUNPLANE_ADMISSION_ALLOW_UNSIGNED``) is dev mode: unsigned
    requests are admitted with the tenant and initiator they name. It is off unless set —
    ``runplane demo``, compose and the tests set it; the chart does not.
    ``signature_window_ms`` bounds |record timestamp - signed-at| (replays of refused keys).
    """

    base: Settings = field(default_factory=Settings)
    batch_max: int = 500
    batch_ms: int = 20
    agent_modules: tuple[str, ...] | None = None
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    transaction_timeout_ms: int = 10_000
    session_timeout_ms: int = 10_000
    emitters_file: Path | None = None
    allow_unsigned: bool = False
    signature_window_ms: int = DEFAULT_WINDOW_MS
    # Signs each run's seq 0 on ``journal`` (RUNPLANE_JOURNAL_SIGNING_KEY).
    journal_signer: Signer | None = None
    # The deployment policy (RUNPLANE_POLICY): its ``queues:`` say which capabilities' runs
    # go to the queue service instead of starting at once (docs/decisions.md 33).
    policy_path: str | None = None

    def __post_init__(self) -> None:
        if self.batch_max < 1 or self.batch_ms < 0:
            raise ConfigError(
                "RUNPLANE_ADMISSION_BATCH_MAX >= 1 and RUNPLANE_ADMISSION_BATCH_MS >= 0"
            )
        if self.max_input_bytes < 2:
            raise ConfigError("RUNPLANE_ADMISSION_MAX_INPUT_BYTES must be at least 2")
        if self.transaction_timeout_ms < 1000:
            raise ConfigError("RUNPLANE_ADMISSION_TRANSACTION_TIMEOUT_MS must be >= 1000")
        if self.session_timeout_ms < 6000:
            # The broker's group.min.session.timeout.ms default refuses anything shorter.
            raise ConfigError("RUNPLANE_ADMISSION_SESSION_TIMEOUT_MS must be >= 6000")
        if self.signature_window_ms < 1000:
            raise ConfigError("RUNPLANE_ADMISSION_SIGNATURE_WINDOW_MS must be >= 1000")

    @property
    def modules(self) -> tuple[str, ...]:
        """The agent modules to import: the override, or ``RUNPLANE_AGENT_MODULES``."""
        return self.base.agent_modules if self.agent_modules is None else self.agent_modules

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, base: Settings | None = None
    ) -> AdmissionSettings:
        e = os.environ if env is None else env
        d = cls()
        return cls(
            base=base if base is not None else Settings.from_env(e),
            batch_max=env_int(e, "RUNPLANE_ADMISSION_BATCH_MAX", d.batch_max),
            batch_ms=env_int(e, "RUNPLANE_ADMISSION_BATCH_MS", d.batch_ms),
            # Spelled out for the settings reference; core.limits.MAX_INPUT_BYTES_ENV is it too.
            max_input_bytes=env_int(e, "RUNPLANE_ADMISSION_MAX_INPUT_BYTES", d.max_input_bytes),
            transaction_timeout_ms=env_int(
                e, "RUNPLANE_ADMISSION_TRANSACTION_TIMEOUT_MS", d.transaction_timeout_ms
            ),
            session_timeout_ms=env_int(
                e, "RUNPLANE_ADMISSION_SESSION_TIMEOUT_MS", d.session_timeout_ms
            ),
            emitters_file=Path(e["RUNPLANE_ADMISSION_EMITTERS_FILE"])
            if e.get("RUNPLANE_ADMISSION_EMITTERS_FILE")
            else None,
            allow_unsigned=env_bool(e, "RUNPLANE_ADMISSION_ALLOW_UNSIGNED", d.allow_unsigned),
            signature_window_ms=env_int(
                e, "RUNPLANE_ADMISSION_SIGNATURE_WINDOW_MS", d.signature_window_ms
            ),
            journal_signer=Signer.from_env(e),
            policy_path=env_str(e, "RUNPLANE_POLICY"),
        )
