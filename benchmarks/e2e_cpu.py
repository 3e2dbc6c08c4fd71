"""CPU per run, process by process, for ``benchmarks.e2e`` (Linux ``/proc``; else nothing).

On a small machine the end-to-end numbers are set by who burns the CPU: the broker, the
services, or the benchmark's own driver. A meter reads each process's user + system time
(``/proc/<pid>/stat``) before and after a measured level and divides by the runs it
completed. The broker is found by the port it listens on (the local stack's); one on
another machine is simply not listed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from typing import Any

from benchmarks.e2e_drive import Level
from runplane.config import Settings
from runplane.stack.process import port_owner

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` so far, or None when /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # Fields after the command name (which may hold spaces), 0-based: 11 utime, 12 stime.
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def broker_pid(settings: Settings) -> int | None:
    """The local process serving the first bootstrap address, if this machine runs it."""
    host_port = settings.bootstrap_servers.split(",")[0].rsplit(":", 1)
    if len(host_port) != 2 or host_port[0] not in ("127.0.0.1", "localhost"):
        return None
    with contextlib.suppress(ValueError):
        owner = port_owner(int(host_port[1]))
        return owner[0] if owner is not None else None
    return None


class CpuMeter:
    """``start()`` then ``per_run(runs)``: ms of CPU per run for each named process."""

    def __init__(self, pids: Mapping[str, int]) -> None:
        self._pids = dict(pids)
        self._start: dict[str, float] = {}

    @classmethod
    def with_broker(cls, settings: Settings, pids: Mapping[str, int]) -> CpuMeter:
        """``pids`` and, first, the local broker when this machine runs it."""
        broker = broker_pid(settings)
        return cls({**({"broker": broker} if broker else {}), **pids})

    def level(self, total: int, measure: Callable[[], Level]) -> dict[str, Any]:
        """Run one closed-loop level and return it as a dict with its CPU per run."""
        self.start()
        lv = measure()
        return {**lv.as_dict(), "cpu_ms_per_run": self.per_run(total)}

    def start(self) -> None:
        self._start = {}
        for name, pid in self._pids.items():
            seconds = cpu_seconds(pid)
            if seconds is not None:
                self._start[name] = seconds

    def per_run(self, runs: int) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, before in self._start.items():
            after = cpu_seconds(self._pids[name])
            if after is not None and runs > 0:
                out[name] = round((after - before) * 1000 / runs, 2)
        return out
