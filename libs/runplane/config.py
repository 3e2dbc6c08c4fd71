"""Platform configuration: one frozen, typed object built once at the edge.

Every value comes from a ``RUNPLANE_*`` environment variable with a default that points at
the local stack that ``runplane up`` starts. Helm values and docker-compose environment map
one to one onto these names (a test checks that). Service-specific settings live beside each
service and embed this object.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runplane.errors import ConfigError

DEFAULT_BOOTSTRAP = "127.0.0.1:19092"
DEFAULT_REDIS_URL = "redis://127.0.0.1:16379/0"

# Ports each service serves /healthz and /metrics (and its API, where it has one) on.
SERVICE_PORTS: Mapping[str, int] = {
    "admission": 8301,
    "executor": 8302,
    "cases": 8303,
    "sweeper": 8304,
    "worklist": 8305,
    "journal": 8306,
}


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from exc


@dataclass(frozen=True)
class Settings:
    """What every runplane process needs to find the platform."""

    bootstrap_servers: str = DEFAULT_BOOTSTRAP
    topic_prefix: str = "runplane."
    partitions: int = 6
    replication_factor: int = 1
    redis_url: str = DEFAULT_REDIS_URL
    schema_registry_url: str | None = None
    state_dir: Path = field(default_factory=lambda: Path(".runplane"))
    instance_id: str = field(default_factory=socket.gethostname)
    http_host: str = "127.0.0.1"
    log_level: str = "INFO"

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ConfigError("RUNPLANE_BOOTSTRAP_SERVERS must not be empty")
        if self.partitions < 1:
            raise ConfigError("RUNPLANE_PARTITIONS must be at least 1")
        if self.replication_factor < 1:
            raise ConfigError("RUNPLANE_REPLICATION_FACTOR must be at least 1")
        if any(c.isspace() for c in self.topic_prefix):
            raise ConfigError("RUNPLANE_TOPIC_PREFIX must not contain whitespace")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        defaults = cls()
        return cls(
            bootstrap_servers=e.get("RUNPLANE_BOOTSTRAP_SERVERS", DEFAULT_BOOTSTRAP),
            topic_prefix=e.get("RUNPLANE_TOPIC_PREFIX", "runplane."),
            partitions=_int(e, "RUNPLANE_PARTITIONS", 6),
            replication_factor=_int(e, "RUNPLANE_REPLICATION_FACTOR", 1),
            redis_url=e.get("RUNPLANE_REDIS_URL", DEFAULT_REDIS_URL),
            schema_registry_url=e.get("RUNPLANE_SCHEMA_REGISTRY_URL") or None,
            state_dir=Path(e.get("RUNPLANE_STATE_DIR", ".runplane")),
            instance_id=e.get("RUNPLANE_INSTANCE_ID") or defaults.instance_id,
            http_host=e.get("RUNPLANE_HTTP_HOST", "127.0.0.1"),
            log_level=e.get("RUNPLANE_LOG_LEVEL", "INFO"),
        )

    def topic(self, name: str) -> str:
        """The full name of a logical topic (``journal`` → ``runplane.journal``)."""
        return f"{self.topic_prefix}{name}"

    def http_port(self, service: str) -> int:
        return _int(os.environ, f"RUNPLANE_{service.upper()}_PORT", SERVICE_PORTS[service])
