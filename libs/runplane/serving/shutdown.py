"""Graceful shutdown: SIGTERM/SIGINT become a stop event, with a bound on how long it takes.

What a service does on SIGTERM (every loop: the shared processor, the executor, the journal):
it stops taking input, finishes or aborts its open transaction (an aborted one is redone by
the next owner from the committed offsets), leaves the consumer group (``Consumer.close``,
so its partitions move on at once instead of after the session timeout) and exits 0. A
rebalance under way does not delay it: a restore in a rebalance callback and the wait for a
previous owner's transaction check the stop event every second.

The bound: a healthy service exits within a few seconds (the executor lets live calls finish
for up to 5 s first). If anything blocks longer — a broker that does not answer the commit or
the group leave — the process exits with status 1 after ``RUNPLANE_SHUTDOWN_GRACE_S`` (default
20 s, under Kubernetes' 30 s termination grace), so a supervisor never waits on a stuck
process. Nothing is lost by that exit: uncommitted work is void and redone by the next owner.

A signal that arrives while the console script is still importing its modules (seconds on
a busy machine) is caught by :func:`catch_early`, which ``runplane.cli`` calls first, and is
honoured once the service has installed its handlers. Only the interpreter's own start and
``import runplane`` come before it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import FrameType

__all__ = ["catch_early", "install_signal_handlers", "release_early", "shutdown_grace_s"]

log = logging.getLogger(__name__)

DEFAULT_GRACE_S = 20.0
GRACE_ENV = "RUNPLANE_SHUTDOWN_GRACE_S"

# Set by the early handler: a stop was asked for before the service had its stop event.
_early = threading.Event()


_early_signal: list[int] = []


def catch_early() -> None:
    """In the ``runplane`` console script only: remember SIGTERM/SIGINT from now on, until
    :func:`install_signal_handlers` or :func:`release_early` runs. (A library must not
    change how the process it is imported into answers signals.)"""
    if os.path.basename(sys.argv[0]) != "runplane":
        return

    def remember(signum: int, _frame: FrameType | None) -> None:
        _early_signal.append(signum)
        _early.set()

    signal.signal(signal.SIGTERM, remember)
    signal.signal(signal.SIGINT, remember)


def release_early() -> None:
    """Give SIGTERM/SIGINT their default meaning back (and act on one caught meanwhile), for
    a command that installs no handlers of its own."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if _early_signal:
        os.kill(os.getpid(), _early_signal[0])


def shutdown_grace_s(env: dict[str, str] | None = None) -> float:
    """``RUNPLANE_SHUTDOWN_GRACE_S``: how long a stopping process may take before exit(1)."""
    raw = (os.environ if env is None else env).get(GRACE_ENV, "")
    try:
        value = float(raw) if raw.strip() else DEFAULT_GRACE_S
    except ValueError:
        return DEFAULT_GRACE_S
    return value if value > 0 else DEFAULT_GRACE_S


def _watchdog(grace_s: float) -> None:
    """Exit(1) if the process is still here ``grace_s`` after the stop was asked for."""

    def expire() -> None:
        log.error("shutdown did not finish in %.0fs; exiting", grace_s)
        logging.shutdown()
        os._exit(1)

    timer = threading.Timer(grace_s, expire)
    timer.daemon = True
    timer.start()


def install_signal_handlers(stop: threading.Event, *, grace_s: float | None = None) -> None:
    """SIGTERM/SIGINT set ``stop`` and arm the shutdown bound; a second signal exits at once
    (an impatient operator). A signal caught early (:func:`catch_early`) counts as the first."""
    bound = shutdown_grace_s() if grace_s is None else grace_s

    def begin(reason: str) -> None:
        log.info("stopping", extra={"signal": reason, "grace_s": bound})
        stop.set()
        _watchdog(bound)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            sys.exit(128 + signum)
        begin(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if _early.is_set() and not stop.is_set():
        begin("before start")
