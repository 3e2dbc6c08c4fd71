"""Loop health: a :class:`Probe` per poll loop, a :class:`Health` per service. No I/O.

The loops of ``runplane.kafka`` (the transactional processor, ``TopicFeed``) and of the
services beat a probe; ``runplane.serving.shell`` serves the verdicts over HTTP (``/livez``,
``/readyz``, ``/healthz``). The two live apart so a loop can take a probe without importing
Starlette, uvicorn or redis — nor can a pure handler's unit test, through the loop module.
The endpoints' semantics are in ``runplane.serving.shell``'s docstring.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Health", "MonotonicClock", "Probe"]

MonotonicClock = Callable[[], float]


class Probe:
    """One loop's health: ``beat()`` from every poll iteration, ``set_ready`` around restore.

    Readiness (``check``) needs ready *and* a beat within ``stale_after_s``. Liveness
    (``check_live``) needs only a recent sign of life — a beat or a readiness change — within
    ``stale_after_s`` while ready, or within ``busy_limit_s`` while not ready: a loop restoring
    tables inside its rebalance callback cannot beat, and restarting it for that would only
    start the restore again.
    """

    def __init__(
        self,
        name: str,
        stale_after_s: float,
        clock: MonotonicClock,
        busy_limit_s: float | None = None,
    ) -> None:
        if stale_after_s <= 0:
            raise ValueError(f"probe {name!r}: stale_after_s must be positive")
        self.name = name
        self._stale_after_s = stale_after_s
        self._busy_limit_s = max(stale_after_s, busy_limit_s or stale_after_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._last_beat: float | None = None
        # Creation counts as a sign of life: start-up (init_transactions, the first join)
        # gets the busy limit before the first beat is due.
        self._last_change = clock()
        self._ready = False
        self._reason = "starting"

    def beat(self) -> None:
        now = self._clock()
        with self._lock:
            self._last_beat = now

    def set_ready(self, ready: bool, reason: str = "") -> None:
        now = self._clock()
        with self._lock:
            self._ready = ready
            self._reason = "" if ready else (reason or "not ready")
            self._last_change = now

    def check(self) -> str | None:
        """Readiness: None when ready and beating, else why not."""
        with self._lock:
            last, ready, reason = self._last_beat, self._ready, self._reason
        if not ready:
            return reason
        if last is None:
            return "no heartbeat yet"
        age = self._clock() - last
        if age > self._stale_after_s:
            return f"no heartbeat for {age:.1f}s (limit {self._stale_after_s:.1f}s)"
        return None

    def check_live(self) -> str | None:
        """Liveness: None unless the loop shows no sign of life for longer than it may."""
        with self._lock:
            last, changed, ready, reason = (
                self._last_beat,
                self._last_change,
                self._ready,
                self._reason,
            )
        seen = changed if last is None else max(last, changed)
        limit = self._stale_after_s if ready else self._busy_limit_s
        age = self._clock() - seen
        if age <= limit:
            return None
        state = "ready" if ready else f"not ready: {reason}"
        return f"stuck: no heartbeat for {age:.1f}s (limit {limit:.1f}s, {state})"


class Health:
    """The health of one service: live while every probe's loop is, ready while every one is.

    ``busy_limit_s``: how long a probe that is not ready may go without a beat before
    ``/livez`` calls its loop stuck (a restore runs where the loop cannot beat).
    """

    def __init__(
        self,
        *,
        stale_after_s: float = 30.0,
        busy_limit_s: float = 300.0,
        clock: MonotonicClock = time.monotonic,
    ) -> None:
        if stale_after_s <= 0 or busy_limit_s <= 0:
            raise ValueError("stale_after_s and busy_limit_s must be positive")
        self._stale_after_s = stale_after_s
        self._busy_limit_s = busy_limit_s
        self._clock = clock
        self._lock = threading.Lock()
        self._probes: dict[str, Probe] = {}

    def probe(self, name: str, *, stale_after_s: float | None = None) -> Probe:
        with self._lock:
            if name in self._probes:
                raise ValueError(f"probe {name!r} already registered")
            p = Probe(name, stale_after_s or self._stale_after_s, self._clock, self._busy_limit_s)
            self._probes[name] = p
            return p

    def _probes_now(self) -> list[Probe]:
        with self._lock:
            return list(self._probes.values())

    def readiness(self) -> tuple[bool, dict[str, str]]:
        """(ready, {probe: reason}) — the reasons of the probes that are not ready."""
        probes = self._probes_now()
        if not probes:
            return False, {"service": "no probes registered yet"}
        problems = {p.name: r for p in probes if (r := p.check()) is not None}
        return not problems, problems

    def status(self) -> tuple[bool, dict[str, str]]:
        """The readiness answer (``/healthz``'s), under its original name."""
        return self.readiness()

    def liveness(self) -> tuple[bool, dict[str, str]]:
        """(live, {probe: reason}) — the reasons of the probes whose loop looks stuck.

        No probe yet is live: the process answers, and its loops have not started, so
        nothing can be stuck (the startup of a loop is bounded by its own busy limit).
        """
        problems = {p.name: r for p in self._probes_now() if (r := p.check_live()) is not None}
        return not problems, problems
