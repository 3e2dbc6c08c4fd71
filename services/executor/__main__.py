"""``python -m services.executor``: one executor process (settings from the environment)."""

from __future__ import annotations

import threading

from runplane.config import Settings
from runplane.serving.shell import setup_logging
from runplane.serving.shutdown import install_signal_handlers
from runplane.serving.tracing import configure as configure_tracing
from services.executor.serve import serve
from services.executor.topology import SERVICE


def main() -> None:
    settings = Settings.from_env()
    setup_logging(SERVICE, settings.log_level)
    configure_tracing(SERVICE)  # only when OTEL_* asks for an exporter
    stop = threading.Event()
    install_signal_handlers(stop)
    serve(settings, stop)


if __name__ == "__main__":
    main()
