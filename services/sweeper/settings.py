"""The sweeper's settings: one frozen object, built once from ``RUNPLANE_*`` variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from runplane.config import Settings, env_int
from runplane.errors import ConfigError
from runplane.signing.admission import SigningKey


@dataclass(frozen=True)
class SweeperSettings:
    """``tick_ms``: how often due entries are swept (``RUNPLANE_SWEEPER_TICK_MS``).
    ``retry_ms``: how long a sent decision waits for the cases service's answer before it is
    sent again (``RUNPLANE_SWEEPER_RETRY_MS``). ``revalidate_ms``: how long a decision may stay
    unconfirmed before its obligation is checked against the committed ``cases`` records
    (``RUNPLANE_SWEEPER_REVALIDATE_MS``): the cost of a ghost from an aborted transaction is
    at most this long of repeated decisions; each check reads the partition once.
    ``schedule_grace_ms``: how late a tick of a ``skip`` schedule may still fire
    (``RUNPLANE_SWEEPER_SCHEDULE_GRACE_MS``, at least ``tick_ms``); older ones are skipped
    after downtime.
    ``emitter_key``: signs schedule ticks sent to admission (``RUNPLANE_EMITTER_KEY[_FILE]``;
    none = unsigned, dev mode only).
    ``clock_offset_ms``: added to the wall clock
    (``RUNPLANE_SWEEPER_CLOCK_OFFSET_MS``), for tests and drills that pass days in seconds.
    """

    base: Settings = field(default_factory=Settings)
    tick_ms: int = 1_000
    retry_ms: int = 30_000
    revalidate_ms: int = 120_000
    clock_offset_ms: int = 0
    schedule_grace_ms: int = 60_000
    emitter_key: SigningKey | None = None

    def __post_init__(self) -> None:
        if self.tick_ms < 1:
            raise ConfigError("RUNPLANE_SWEEPER_TICK_MS must be at least 1")
        if self.retry_ms < 1:
            raise ConfigError("RUNPLANE_SWEEPER_RETRY_MS must be at least 1")
        if self.revalidate_ms < 1:
            raise ConfigError("RUNPLANE_SWEEPER_REVALIDATE_MS must be at least 1")
        if self.schedule_grace_ms < self.tick_ms:
            # A tick is seen up to one sweep late: a shorter grace would skip every tick.
            raise ConfigError(
                "RUNPLANE_SWEEPER_SCHEDULE_GRACE_MS must be at least RUNPLANE_SWEEPER_TICK_MS"
            )

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, base: Settings | None = None
    ) -> SweeperSettings:
        e = os.environ if env is None else env
        d = cls()
        return cls(
            base=base if base is not None else Settings.from_env(e),
            tick_ms=env_int(e, "RUNPLANE_SWEEPER_TICK_MS", d.tick_ms),
            retry_ms=env_int(e, "RUNPLANE_SWEEPER_RETRY_MS", d.retry_ms),
            revalidate_ms=env_int(e, "RUNPLANE_SWEEPER_REVALIDATE_MS", d.revalidate_ms),
            clock_offset_ms=env_int(e, "RUNPLANE_SWEEPER_CLOCK_OFFSET_MS", d.clock_offset_ms),
            schedule_grace_ms=env_int(e, "RUNPLANE_SWEEPER_SCHEDULE_GRACE_MS", d.schedule_grace_ms),
            emitter_key=SigningKey.from_env(e),
        )
