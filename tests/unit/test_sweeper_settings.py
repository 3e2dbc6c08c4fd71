"""The sweeper's schedule settings: read from the environment, refused when they cannot work."""

from __future__ import annotations

import pytest

from runplane.errors import ConfigError
from runplane.signing.admission import SigningKey
from services.sweeper.settings import SweeperSettings


def test_schedule_settings_from_the_environment() -> None:
    key = SigningKey.generate("sweeper-1")
    own = SweeperSettings.from_env(
        {
            "RUNPLANE_SWEEPER_TICK_MS": "500",
            "RUNPLANE_SWEEPER_SCHEDULE_GRACE_MS": "5000",
            "RUNPLANE_EMITTER_KEY": key.to_text(),
        }
    )
    assert own.schedule_grace_ms == 5_000
    assert own.emitter_key is not None and own.emitter_key.key_id == "sweeper-1"
    assert SweeperSettings.from_env({}).emitter_key is None  # unsigned: dev mode only


def test_a_grace_shorter_than_a_tick_is_refused() -> None:
    # Every tick is seen up to one sweep late: such a grace would skip all of them.
    with pytest.raises(ConfigError, match="SCHEDULE_GRACE_MS"):
        SweeperSettings.from_env(
            {"RUNPLANE_SWEEPER_TICK_MS": "1000", "RUNPLANE_SWEEPER_SCHEDULE_GRACE_MS": "999"}
        )
