"""Whether the CLI can reach Kafka at all, asked before a command's first client call: a
client with an unreachable broker waits out its 10–60 s metadata timeout and then raises, so
the CLI asks a TCP connection of 2 s first and says in one line what is wrong."""

from __future__ import annotations

import socket

from runplane.config import Settings
from runplane.errors import ConfigError


def require_kafka(settings: Settings, *, timeout_s: float = 2.0) -> None:
    """Refuse, naming the servers, unless one of the bootstrap servers accepts a TCP
    connection (what a client's first metadata request needs; authentication comes after)."""
    failures = []
    for server in settings.bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return
        except (OSError, ValueError) as exc:
            failures.append(f"{server.strip()}: {getattr(exc, 'strerror', None) or exc}")
    raise ConfigError(
        f"cannot reach Kafka ({'; '.join(failures)}): is the stack up? (`runplane up`, or "
        "set RUNPLANE_BOOTSTRAP_SERVERS)"
    )
