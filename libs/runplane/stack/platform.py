"""Platform processes beside the stack: ``runplane serve all`` and the loopback fakes.

``runplane demo`` starts them in the background; ``runplane down`` stops them (before Kafka, so
the services can finish or abort their transactions while the broker still answers) and
``runplane status`` shows them. They are owned exactly like Kafka and Redis — a pid file under
``run/`` — plus a small JSON note beside it saying what was started (its command-line markers,
address and health URLs), so ``status`` and ``down`` need no knowledge of the demo.

Ownership: a pid is ours only if the process is alive, its command line carries the recorded
markers, and its environment carries ``RUNPLANE_STATE_DIR=<this state dir>`` (every platform
process is started with it). The environment check matters because two checkouts can run the
same ``runplane serve all`` command line; only the state dir tells them apart.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from runplane.errors import ConfigError
from runplane.stack._config import StackConfig
from runplane.stack.process import cmdline, is_alive, read_pid, spawn, terminate

STATE_DIR_ENV = "RUNPLANE_STATE_DIR"
# Stop order: services first (they hold transactions open on the broker), then the fakes.
ORDER = ("services", "billing", "openai")
_GRACE = {"services": 30.0}
PlatformState = Literal["running", "unhealthy", "stopped"]
_DEFAULT_GRACE = 5.0


@dataclass(frozen=True)
class PlatformProcess:
    """One background process of the platform, as started (and later recognised)."""

    name: str
    argv: tuple[str, ...]
    markers: tuple[str, ...]
    address: str
    health_urls: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ConfigError(f"platform process name must be an identifier, got {self.name!r}")
        if not self.argv or not self.markers:
            raise ConfigError(f"platform process {self.name}: argv and markers are required")
        missing = [m for m in self.markers if m not in " ".join(self.argv)]
        if missing:
            # A marker the command line does not carry would make the process unrecognisable.
            raise ConfigError(f"platform process {self.name}: markers not in argv: {missing}")


@dataclass(frozen=True)
class Observation:
    """What ``status`` sees of one recorded platform process."""

    name: str
    state: PlatformState
    address: str
    pid: int | None
    detail: str


def pid_file(config: StackConfig, name: str) -> Path:
    return config.run_dir / f"{name}.pid"


def note_file(config: StackConfig, name: str) -> Path:
    return config.run_dir / f"{name}.json"


def log_file(config: StackConfig, name: str) -> Path:
    return config.logs_dir / f"{name}.log"


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def _read_note(config: StackConfig, name: str) -> dict[str, Any] | None:
    try:
        data = json.loads(note_file(config, name).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _forget(config: StackConfig, name: str) -> None:
    pid_file(config, name).unlink(missing_ok=True)
    note_file(config, name).unlink(missing_ok=True)


def owned(config: StackConfig, name: str) -> int | None:
    """The live pid of platform process ``name`` started from this state dir, else None."""
    pid = read_pid(pid_file(config, name))
    note = _read_note(config, name)
    if pid is None or note is None:
        return None
    markers = [str(m) for m in note.get("markers", [])]
    if (
        markers
        and is_alive(pid)
        and all(m in cmdline(pid) for m in markers)
        and _environ(pid).get(STATE_DIR_ENV) == str(config.state_dir)
    ):
        return pid
    return None


def start(config: StackConfig, proc: PlatformProcess) -> int:
    """Spawn ``proc`` detached, output to ``logs/<name>.log``; record its pid and note."""
    env = {**proc.env, STATE_DIR_ENV: str(config.state_dir)}
    note = {
        "markers": list(proc.markers),
        "address": proc.address,
        "health": list(proc.health_urls),
    }
    config.run_dir.mkdir(parents=True, exist_ok=True)
    note_file(config, proc.name).write_text(json.dumps(note, indent=2) + "\n")
    return spawn(
        proc.argv,
        log_path=log_file(config, proc.name),
        pid_file=pid_file(config, proc.name),
        env=env,
    )


def healthy(url: str, timeout: float = 1.0) -> bool:
    """Does ``url`` answer 200 now?"""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def observe(config: StackConfig) -> tuple[Observation, ...]:
    """Every platform process that has a pid file here (others were never started)."""
    seen: list[Observation] = []
    for name in recorded_names(config):
        note = _read_note(config, name) or {}
        address = str(note.get("address", ""))
        pid = owned(config, name)
        if pid is None:
            # Recorded but gone: say so once, then forget it (like a stale Kafka pid file).
            _forget(config, name)
            seen.append(
                Observation(name, "stopped", address, None, f"exited; see {log_file(config, name)}")
            )
            continue
        urls = [str(u) for u in note.get("health", [])]
        up = sum(1 for u in urls if healthy(u))
        if up == len(urls):
            detail = f"{up}/{len(urls)} healthy" if urls else "alive"
            seen.append(Observation(name, "running", address, pid, detail))
        else:
            seen.append(Observation(name, "unhealthy", address, pid, f"{up}/{len(urls)} healthy"))
    return tuple(seen)


def recorded_names(config: StackConfig) -> list[str]:
    """Recorded platform processes, known names first in stop order, then any others."""
    found = sorted(p.stem for p in config.run_dir.glob("*.json")) if config.run_dir.is_dir() else []
    return [n for n in ORDER if n in found] + [n for n in found if n not in ORDER]


def stop(config: StackConfig, name: str) -> tuple[str, int | None, bool]:
    """Stop ``name`` if it is ours: (its address, the pid it had, whether SIGKILL was needed)."""
    address = str((_read_note(config, name) or {}).get("address", ""))
    pid = owned(config, name)
    killed = False if pid is None else terminate(pid, grace=_GRACE.get(name, _DEFAULT_GRACE))
    _forget(config, name)
    return address, pid, killed


__all__ = [
    "ORDER",
    "STATE_DIR_ENV",
    "Observation",
    "PlatformProcess",
    "healthy",
    "log_file",
    "observe",
    "owned",
    "recorded_names",
    "start",
    "stop",
]
