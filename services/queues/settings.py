"""The queue service's settings: one frozen object, built once from ``RUNPLANE_*`` variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from runplane.config import Settings, env_int, env_str
from runplane.core.queues import QueueLimits
from runplane.errors import ConfigError
from runplane.serving.policy import load_policy


@dataclass(frozen=True)
class QueuesSettings:
    """``batch_max`` / ``batch_ms`` bound one transaction of the processor; ``tick_ms`` is how
    often the rate limits' buckets refill; ``limits`` are the policy's ``queues:``
    (``RUNPLANE_POLICY``, the same document admission routes by)."""

    base: Settings = field(default_factory=Settings)
    batch_max: int = 500
    batch_ms: int = 20
    tick_ms: int = 100
    limits: Mapping[str, QueueLimits] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.batch_max < 1 or self.batch_ms < 0 or self.tick_ms < 1:
            raise ConfigError(
                "RUNPLANE_QUEUES_BATCH_MAX >= 1, RUNPLANE_QUEUES_BATCH_MS >= 0 and "
                "RUNPLANE_QUEUES_TICK_MS >= 1"
            )

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, base: Settings | None = None
    ) -> QueuesSettings:
        e = os.environ if env is None else env
        d = cls()
        settings = base if base is not None else Settings.from_env(e)
        policy = load_policy(env_str(e, "RUNPLANE_POLICY"))
        return cls(
            base=settings,
            batch_max=env_int(e, "RUNPLANE_QUEUES_BATCH_MAX", d.batch_max),
            batch_ms=env_int(e, "RUNPLANE_QUEUES_BATCH_MS", d.batch_ms),
            tick_ms=env_int(e, "RUNPLANE_QUEUES_TICK_MS", d.tick_ms),
            limits={} if policy is None else policy.queues,
        )
