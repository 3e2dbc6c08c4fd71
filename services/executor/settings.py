"""The executor's settings: one frozen object, built once from ``RUNPLANE_*`` variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from runplane.config import Settings, env_bool, env_float, env_int, env_str
from runplane.core.limits import Limits, limits_from_env
from runplane.errors import ConfigError
from runplane.signing.admission import SigningKey
from runplane.signing.journal import Signer


@dataclass(frozen=True)
class ExecutorSettings:
    """Everything the executor reads from its environment.

    ``batch_max`` / ``batch_ms`` bound a group commit whose input never drains: a batch is
    committed as soon as the loop has nothing more in hand, else when it holds ``batch_max``
    records or its oldest record waited ``batch_ms``, whichever comes first.
    ``transaction_timeout_ms`` and ``session_timeout_ms`` bound how long a killed instance's
    open transaction and group membership can hold up the survivors (the broker aborts the
    one and evicts the other after these times).
    """

    base: Settings = field(default_factory=Settings)
    idle_grace_s: float = 300.0
    max_inflight: int = 64
    batch_max: int = 500
    batch_ms: float = 5.0
    openai_base_url: str = "http://127.0.0.1:8399/v1"
    openai_api_key: str | None = None
    openai_model: str = "gpt-4o-mini"
    # None: the platform's one setting, base.agent_modules (RUNPLANE_AGENT_MODULES, admission's
    # too); a tuple overrides it (tests).
    agent_modules: tuple[str, ...] | None = None
    billing_url: str = "http://127.0.0.1:8398"
    transaction_timeout_ms: int = 10_000
    session_timeout_ms: int = 6_000
    call_timeout_s: float = 30.0
    # How long an ended run's bodies stay in ``results`` before the executor tombstones them
    # (an automatic erase, "retention"); negative: kept forever. Restores then read the live
    # runs' bodies and the recent ones, not all history.
    results_retention_s: float = 7 * 86_400.0
    # The platform's emitter key (RUNPLANE_EMITTER_KEY[_FILE]): signs the AdmissionRequests of
    # commissioned children, for an admission that requires signatures. None: unsigned.
    emitter_key: SigningKey | None = None
    # Signs every journal record the executor writes (RUNPLANE_JOURNAL_SIGNING_KEY).
    journal_signer: Signer | None = None
    # Per-run limits (RUNPLANE_MAX_*; runplane.core.limits): what a run may grow to.
    limits: Limits = field(default_factory=Limits)
    # RUNPLANE_POLICY: the deployment policy file (sink gate, grants, budgets); None: none.
    policy_path: str | None = None
    # RUNPLANE_EXECUTOR_STREAM: publish runs' live events on runs.stream (providers stream).
    stream: bool = True

    def __post_init__(self) -> None:
        if self.idle_grace_s < 0:
            raise ConfigError("RUNPLANE_EXECUTOR_IDLE_GRACE_S must not be negative")
        if self.max_inflight < 1:
            raise ConfigError("RUNPLANE_EXECUTOR_MAX_INFLIGHT must be at least 1")
        if self.batch_max < 1:
            raise ConfigError("RUNPLANE_EXECUTOR_BATCH_MAX must be at least 1")
        if self.batch_ms < 0:
            raise ConfigError("RUNPLANE_EXECUTOR_BATCH_MS must not be negative")
        if self.session_timeout_ms < 1000 or self.transaction_timeout_ms < 1000:
            raise ConfigError("executor session/transaction timeouts must be at least 1000 ms")

    @property
    def transactional_id(self) -> str:
        """Stable per instance, so a restarted instance fences and aborts its predecessor.

        Prefixed with the topic prefix: transactional ids are cluster-wide (M6)."""
        return f"{self.base.topic_prefix}executor-{self.base.instance_id}"

    @property
    def modules(self) -> tuple[str, ...]:
        """The agent modules to import: the override, or ``RUNPLANE_AGENT_MODULES``."""
        return self.base.agent_modules if self.agent_modules is None else self.agent_modules

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, base: Settings | None = None
    ) -> ExecutorSettings:
        e = os.environ if env is None else env
        d = cls()
        return cls(
            base=base if base is not None else Settings.from_env(e),
            idle_grace_s=env_float(e, "RUNPLANE_EXECUTOR_IDLE_GRACE_S", d.idle_grace_s),
            max_inflight=env_int(e, "RUNPLANE_EXECUTOR_MAX_INFLIGHT", d.max_inflight),
            batch_max=env_int(e, "RUNPLANE_EXECUTOR_BATCH_MAX", d.batch_max),
            batch_ms=env_float(e, "RUNPLANE_EXECUTOR_BATCH_MS", d.batch_ms),
            openai_base_url=env_str(e, "RUNPLANE_OPENAI_BASE_URL", d.openai_base_url),
            openai_api_key=env_str(e, "RUNPLANE_OPENAI_API_KEY"),
            openai_model=env_str(e, "RUNPLANE_OPENAI_MODEL", d.openai_model),
            billing_url=env_str(e, "RUNPLANE_BILLING_URL", d.billing_url),
            transaction_timeout_ms=env_int(
                e, "RUNPLANE_EXECUTOR_TRANSACTION_TIMEOUT_MS", d.transaction_timeout_ms
            ),
            session_timeout_ms=env_int(
                e, "RUNPLANE_EXECUTOR_SESSION_TIMEOUT_MS", d.session_timeout_ms
            ),
            call_timeout_s=env_float(e, "RUNPLANE_EXECUTOR_CALL_TIMEOUT_S", d.call_timeout_s),
            results_retention_s=env_float(
                e, "RUNPLANE_EXECUTOR_RESULTS_RETENTION_S", d.results_retention_s
            ),
            emitter_key=SigningKey.from_env(e),
            journal_signer=Signer.from_env(e),
            limits=limits_from_env(e),
            policy_path=env_str(e, "RUNPLANE_POLICY"),
            stream=env_bool(e, "RUNPLANE_EXECUTOR_STREAM", d.stream),
        )

    @property
    def retention_ms(self) -> int | None:
        """The results retention in ms; None when ended runs keep their bodies forever."""
        return None if self.results_retention_s < 0 else int(self.results_retention_s * 1000)
