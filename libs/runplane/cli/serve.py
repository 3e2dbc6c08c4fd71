"""CLI: ``runplane serve NAME`` / ``runplane serve all``.

Each service module ``services.<name>.serve`` exposes ``serve(settings, stop)``, which blocks
until ``stop`` is set. ``serve all`` runs every service in its own thread of one process (for
local use). SIGTERM/SIGINT set the stop event; a service that dies takes the others down with
it and the process exits non-zero, so a supervisor restarts the whole thing.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import cast

import typer

from runplane.config import SERVICE_PORTS, Settings
from runplane.errors import ConfigError
from runplane.serving.metrics import serving_as
from runplane.serving.shell import setup_logging
from runplane.serving.shutdown import install_signal_handlers
from runplane.serving.tracing import configure as configure_tracing

log = logging.getLogger(__name__)

SERVICES: tuple[str, ...] = tuple(SERVICE_PORTS)

ServeFn = Callable[[Settings, threading.Event], None]


def load(name: str) -> ServeFn:
    """``services.<name>.serve.serve``, or a ConfigError saying what is missing."""
    if name not in SERVICES:
        raise ConfigError(f"unknown service {name!r}; choose one of {', '.join(SERVICES)} or all")
    module_name = f"services.{name}.serve"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name in (module_name, f"services.{name}"):
            raise ConfigError(f"service {name!r} has no {module_name} module yet") from exc
        raise
    fn = getattr(module, "serve", None)
    if not callable(fn):
        raise ConfigError(f"{module_name} has no serve(settings, stop) function")
    return cast(ServeFn, fn)


def run_services(names: Sequence[str], settings: Settings, stop: threading.Event) -> int:
    """Run ``names`` (each in a thread) until ``stop``; 0 when all ended cleanly, else 1."""
    fns = {name: load(name) for name in names}  # fail before starting anything
    failures: list[str] = []

    def run(name: str, fn: ServeFn) -> None:
        try:
            # Each port serves its own service's metrics; the process's own on the first only.
            with serving_as(name, process_metrics=name == names[0]):
                fn(settings, stop)
        except ConfigError as exc:  # the deployment's to fix (an agent module refused at
            # start-up, a bad setting): its one-line message says what, a traceback nothing more
            log.error("service failed: %s", exc, extra={"service": name})
            failures.append(name)
        except BaseException:
            log.exception("service failed", extra={"service": name})
            failures.append(name)
        finally:
            # One service ending (cleanly or not) ends the process: a half-running
            # platform is worse than a restarted one.
            stop.set()

    threads = [
        threading.Thread(target=run, args=(name, fn), name=f"serve-{name}", daemon=True)
        for name, fn in fns.items()
    ]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(0.2)
    return 1 if failures else 0


def serve_command(
    name: str = typer.Argument(..., help=f"a service ({', '.join(SERVICES)}) or 'all'"),
) -> None:
    """Run one service (or all of them) until SIGTERM/SIGINT."""
    settings = Settings.from_env()
    setup_logging(name, settings.log_level)
    configure_tracing(name)  # only when OTEL_* asks for an exporter (runplane.serving.tracing)
    names = list(SERVICES) if name == "all" else [name]
    stop = threading.Event()
    install_signal_handlers(stop)
    # A ConfigError at start-up is the root group's one line, exit 2 (runplane.cli).
    raise typer.Exit(code=run_services(names, settings, stop))


def register(app: typer.Typer) -> None:
    """Attach the serve command to the root app."""
    app.command("serve")(serve_command)
