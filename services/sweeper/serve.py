"""Run the sweeper: ``runplane serve sweeper``."""

from __future__ import annotations

import threading

from runplane.config import Settings
from runplane.serving.health import Health
from runplane.serving.shell import make_app, run_http
from services.sweeper.settings import SweeperSettings
from services.sweeper.sweeper import Sweeper
from services.sweeper.topology import SERVICE


def serve(settings: Settings, stop: threading.Event) -> None:
    """Serve until ``stop`` is set."""
    own = SweeperSettings.from_env(base=settings)
    health = Health()
    sweeper = Sweeper(own, probe=health.probe("sweeper"))
    with run_http(make_app(health), settings.http_host, settings.http_port(SERVICE), stop):
        sweeper.run(stop)
