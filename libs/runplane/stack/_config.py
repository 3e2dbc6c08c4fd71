"""Where the local stack lives and which ports it uses, derived from :class:`Settings`.

The stack serves exactly what ``Settings`` points at: the broker listens on the host and port
of the first ``bootstrap_servers`` entry, Redis on the host and port of ``redis_url``. So a
second stack (a clean clone, CI beside a developer's stack) only needs different
``RUNPLANE_BOOTSTRAP_SERVERS`` / ``RUNPLANE_REDIS_URL`` / ``RUNPLANE_STATE_DIR``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from runplane.config import Settings, env_float, env_int
from runplane.errors import ConfigError

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
DEFAULT_KAFKA_HEAP_OPTS = "-Xms512m -Xmx1g"
DEFAULT_START_TIMEOUT = 120.0
MAX_BROKERS = 9
# Node k of a cluster (0-based) listens on broker_port + 2k and controller_port + 2k, so the
# default controller port (broker port + 1) interleaves: 19700/19701, 19702/19703, …
NODE_PORT_STEP = 2


def _find_tools_dir() -> Path:
    """``tools/kafka`` of the checkout this package was installed from (editable install)."""
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "tools" / "kafka"
        if (candidate / "pom.xml").is_file():
            return candidate
    return Path.cwd() / "tools" / "kafka"


def _host_port(address: str, default_port: int) -> tuple[str, int]:
    host, sep, port = address.strip().rpartition(":")
    if not sep:
        return address.strip(), default_port
    try:
        return host.strip("[]"), int(port)
    except ValueError as exc:
        raise ConfigError(f"bad port in address {address!r}") from exc


@dataclass(frozen=True)
class StackConfig:
    """Everything ``runplane up`` / ``down`` / ``status`` need; build it with :meth:`from_settings`."""

    state_dir: Path
    kafka_host: str
    broker_port: int
    controller_port: int
    redis_host: str
    redis_port: int
    tools_dir: Path
    java: str = "java"
    mvn: str = "mvn"
    redis_server: str = "redis-server"
    kafka_heap_opts: str = DEFAULT_KAFKA_HEAP_OPTS
    start_timeout: float = DEFAULT_START_TIMEOUT
    # Brokers of the local cluster: 1 (the default single node) or a KRaft cluster of N
    # combined nodes (``runplane up --brokers 3``). None: what the state dir was formatted for.
    brokers: int | None = None

    def __post_init__(self) -> None:
        if not self.state_dir.is_absolute():
            raise ConfigError(f"state_dir must be absolute here, got {self.state_dir}")
        for name in ("broker_port", "controller_port", "redis_port"):
            port = getattr(self, name)
            if not 0 < port < 65536:
                raise ConfigError(f"{name} out of range: {port}")
        if len({self.broker_port, self.controller_port}) != 2:
            raise ConfigError("the Kafka broker and controller ports must differ")
        if self.brokers is not None and not 1 <= self.brokers <= MAX_BROKERS:
            raise ConfigError(f"brokers must be 1..{MAX_BROKERS}, got {self.brokers}")
        n = self.brokers or 1
        ports = [p + NODE_PORT_STEP * i for p in self.kafka_ports for i in range(n)]
        if len(set(ports)) != len(ports) or max(ports) >= 65536:
            raise ConfigError(
                f"{n} brokers need broker ports {self.broker_port}+{NODE_PORT_STEP}k and "
                f"controller ports {self.controller_port}+{NODE_PORT_STEP}k, all distinct"
            )

    @property
    def kafka_ports(self) -> tuple[int, int]:
        return self.broker_port, self.controller_port

    @classmethod
    def from_settings(
        cls, settings: Settings, env: Mapping[str, str] | None = None, *, root: Path | None = None
    ) -> StackConfig:
        """Derive the stack from ``settings``; a relative state dir is taken from ``root`` (cwd)."""
        e = os.environ if env is None else env
        first = settings.bootstrap_servers.split(",")[0]
        kafka_host, broker_port = _host_port(first, 9092)
        redis = urlparse(settings.redis_url)
        state_dir = settings.state_dir
        if not state_dir.is_absolute():
            state_dir = (root or Path.cwd()) / state_dir
        java_home = e.get("JAVA_HOME")
        controller_port = env_int(e, "RUNPLANE_KAFKA_CONTROLLER_PORT", broker_port + 1)
        return cls(
            state_dir=state_dir.resolve(),
            kafka_host=kafka_host,
            broker_port=broker_port,
            controller_port=controller_port,
            redis_host=redis.hostname or "127.0.0.1",
            redis_port=redis.port or 6379,
            tools_dir=Path(e["RUNPLANE_KAFKA_TOOLS_DIR"])
            if e.get("RUNPLANE_KAFKA_TOOLS_DIR")
            else _find_tools_dir(),
            java=str(Path(java_home) / "bin" / "java") if java_home else "java",
            kafka_heap_opts=e.get("RUNPLANE_KAFKA_HEAP_OPTS", DEFAULT_KAFKA_HEAP_OPTS),
            start_timeout=env_float(e, "RUNPLANE_STACK_START_TIMEOUT", DEFAULT_START_TIMEOUT),
            brokers=env_int(e, "RUNPLANE_KAFKA_BROKERS", 0) or None,
        )

    # -- derived paths -------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.kafka_host}:{self.broker_port}"

    @property
    def redis_url(self) -> str:
        return f"redis://{self.redis_host}:{self.redis_port}/0"

    @property
    def is_local(self) -> bool:
        return self.kafka_host in LOCAL_HOSTS and self.redis_host in LOCAL_HOSTS

    @property
    def libs_dir(self) -> Path:
        return self.tools_dir / "target" / "libs"

    @property
    def kafka_dir(self) -> Path:
        return self.state_dir / "kafka"

    @property
    def kafka_data_dir(self) -> Path:
        return self.kafka_dir / "data"

    @property
    def redis_dir(self) -> Path:
        return self.state_dir / "redis"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"
