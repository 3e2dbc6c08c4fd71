"""Platform configuration: one frozen, typed object built once at the edge.

Every value comes from a ``RUNPLANE_*`` environment variable with a default that points at
the local stack that ``runplane up`` starts. Helm values and docker-compose environment map
one to one onto these names (a test checks that). Service-specific settings live beside each
service and embed this object.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

from runplane.errors import ConfigError

DEFAULT_BOOTSTRAP = "127.0.0.1:19092"
DEFAULT_REDIS_URL = "redis://127.0.0.1:16379/0"

# The agent modules imported by admission and the executor when RUNPLANE_AGENT_MODULES is
# unset: the examples, because the demo and the tests run them. A production deployment sets
# RUNPLANE_AGENT_MODULES (the chart's `agentModules`) to its own agents only.
DEFAULT_AGENT_MODULES: tuple[str, ...] = (
    "examples.refund",
    "examples.triage",
    "examples.declarative",
)


def example_tools_config() -> str | None:
    """The example agents' tools config (``examples/tools/billing.yaml``: the billing API's
    HTTP tools), or None when the ``examples`` package is not installed.

    The default of RUNPLANE_TOOLS_CONFIG only while RUNPLANE_AGENT_MODULES is unset too: the
    examples come with their tools. A deployment naming its own agent modules offers only the
    tools of its own file (and its modules' ``@tool`` functions)."""
    spec = importlib.util.find_spec("examples")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "tools" / "billing.yaml"
    return str(path) if path.is_file() else None


# Kafka security (RUNPLANE_KAFKA_*), passed to every client by runplane.kafka.clients.
KAFKA_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
# Mechanisms that authenticate with a user name and password (the ones we configure and test;
# GSSAPI and OAUTHBEARER need more than a password and are not wired).
KAFKA_SASL_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})

# Ports each service serves /healthz and /metrics (and its API, where it has one) on.
SERVICE_PORTS: Mapping[str, int] = {
    "admission": 8301,
    "executor": 8302,
    "cases": 8303,
    "sweeper": 8304,
    "worklist": 8305,
    "journal": 8306,
    "queues": 8307,
}


# --- reading RUNPLANE_* variables -------------------------------------------------------
# One set of parsers for every settings object (the platform's here, each service's beside
# it), so a variable means the same thing to every process: unset and empty both mean "use
# the default", and a value that does not parse is a ConfigError naming the variable.


def env_int(env: Mapping[str, str], name: str, default: int) -> int:
    """``env[name]`` as an integer; ``default`` when unset or empty."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from exc


def env_float(env: Mapping[str, str], name: str, default: float) -> float:
    """``env[name]`` as a number; ``default`` when unset or empty."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    """``env[name]`` as a flag (1/true/yes/on, 0/false/no/off, any case); ``default`` when
    unset or empty. Anything else is refused rather than read as either, so a typo cannot
    silently turn a feature on or off."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


@overload
def env_str(env: Mapping[str, str], name: str) -> str | None: ...
@overload
def env_str(env: Mapping[str, str], name: str, default: str) -> str: ...
def env_str(env: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """``env[name]``; ``default`` (None: "not configured") when unset or empty.

    Where an empty value means something of its own (an empty topic prefix), read
    ``env.get(name, default)`` instead."""
    raw = env.get(name)
    return raw if raw else default


def _upper(raw: str | None) -> str | None:
    return None if raw is None else raw.upper()


def _modules(raw: str | None) -> tuple[str, ...]:
    if raw is None:
        return DEFAULT_AGENT_MODULES
    return tuple(m.strip() for m in raw.split(",") if m.strip())


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
    # Kafka authentication and encryption (librdkafka names in runplane.kafka.clients). The
    # secrets are left out of repr so a logged Settings does not leak them.
    kafka_security_protocol: str = "PLAINTEXT"
    kafka_sasl_mechanism: str | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: str | None = field(default=None, repr=False)
    kafka_ssl_ca_location: str | None = None
    kafka_ssl_certificate_location: str | None = None
    kafka_ssl_key_location: str | None = None
    kafka_ssl_key_password: str | None = field(default=None, repr=False)
    kafka_ssl_endpoint_identification: bool = True
    # The agent modules admission and the executor import (both must import the same list:
    # admission admits what the executor can run). See DEFAULT_AGENT_MODULES.
    agent_modules: tuple[str, ...] = DEFAULT_AGENT_MODULES
    # The tools config file (RUNPLANE_TOOLS_CONFIG): HTTP tools, model providers, MCP servers
    # (runplane.providers.load_tools_config). Read by the executor and by admission, like
    # agent_modules; None: no file (no HTTP tools, the default `openai` model provider).
    tools_config: str | None = None
    # The emitter's default initiator (RUNPLANE_INITIATOR): the worklist principal on whose
    # behalf runs act. Services do not read it; the client and `runplane emit` do.
    initiator: str | None = None

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ConfigError("RUNPLANE_BOOTSTRAP_SERVERS must not be empty")
        if self.partitions < 1:
            raise ConfigError("RUNPLANE_PARTITIONS must be at least 1")
        if self.replication_factor < 1:
            raise ConfigError("RUNPLANE_REPLICATION_FACTOR must be at least 1")
        if any(c.isspace() for c in self.topic_prefix):
            raise ConfigError("RUNPLANE_TOPIC_PREFIX must not contain whitespace")
        self._check_kafka_security()
        if self.initiator is not None and not self.initiator.strip():
            raise ConfigError("RUNPLANE_INITIATOR must not be blank")

    def _check_kafka_security(self) -> None:
        protocol = self.kafka_security_protocol
        if protocol not in KAFKA_SECURITY_PROTOCOLS:
            raise ConfigError(
                f"RUNPLANE_KAFKA_SECURITY_PROTOCOL must be one of "
                f"{', '.join(sorted(KAFKA_SECURITY_PROTOCOLS))}, got {protocol!r}"
            )
        sasl = protocol.startswith("SASL_")
        if not sasl:
            # Credentials for a protocol that does not use them are silently ignored by
            # librdkafka: refuse them, so "I set a password" cannot mean "nothing authenticates".
            for name, value in (
                ("RUNPLANE_KAFKA_SASL_MECHANISM", self.kafka_sasl_mechanism),
                ("RUNPLANE_KAFKA_SASL_USERNAME", self.kafka_sasl_username),
                ("RUNPLANE_KAFKA_SASL_PASSWORD", self.kafka_sasl_password),
            ):
                if value is not None:
                    raise ConfigError(f"{name} is set but the security protocol is {protocol}")
            return
        if self.kafka_sasl_mechanism not in KAFKA_SASL_MECHANISMS:
            raise ConfigError(
                f"RUNPLANE_KAFKA_SASL_MECHANISM must be one of "
                f"{', '.join(sorted(KAFKA_SASL_MECHANISMS))} with {protocol}, "
                f"got {self.kafka_sasl_mechanism!r}"
            )
        if not self.kafka_sasl_username or not self.kafka_sasl_password:
            raise ConfigError(
                f"{protocol} needs RUNPLANE_KAFKA_SASL_USERNAME and RUNPLANE_KAFKA_SASL_PASSWORD"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        defaults = cls()
        return cls(
            bootstrap_servers=e.get("RUNPLANE_BOOTSTRAP_SERVERS", DEFAULT_BOOTSTRAP),
            topic_prefix=e.get("RUNPLANE_TOPIC_PREFIX", "runplane."),
            partitions=env_int(e, "RUNPLANE_PARTITIONS", 6),
            replication_factor=env_int(e, "RUNPLANE_REPLICATION_FACTOR", 1),
            redis_url=e.get("RUNPLANE_REDIS_URL", DEFAULT_REDIS_URL),
            schema_registry_url=env_str(e, "RUNPLANE_SCHEMA_REGISTRY_URL"),
            state_dir=Path(e.get("RUNPLANE_STATE_DIR", ".runplane")),
            instance_id=env_str(e, "RUNPLANE_INSTANCE_ID", defaults.instance_id),
            http_host=e.get("RUNPLANE_HTTP_HOST", "127.0.0.1"),
            log_level=e.get("RUNPLANE_LOG_LEVEL", "INFO"),
            kafka_security_protocol=env_str(
                e, "RUNPLANE_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT"
            ).upper(),
            kafka_sasl_mechanism=_upper(env_str(e, "RUNPLANE_KAFKA_SASL_MECHANISM")),
            kafka_sasl_username=env_str(e, "RUNPLANE_KAFKA_SASL_USERNAME"),
            kafka_sasl_password=env_str(e, "RUNPLANE_KAFKA_SASL_PASSWORD"),
            kafka_ssl_ca_location=env_str(e, "RUNPLANE_KAFKA_SSL_CA_LOCATION"),
            kafka_ssl_certificate_location=env_str(e, "RUNPLANE_KAFKA_SSL_CERTIFICATE_LOCATION"),
            kafka_ssl_key_location=env_str(e, "RUNPLANE_KAFKA_SSL_KEY_LOCATION"),
            kafka_ssl_key_password=env_str(e, "RUNPLANE_KAFKA_SSL_KEY_PASSWORD"),
            kafka_ssl_endpoint_identification=env_bool(
                e, "RUNPLANE_KAFKA_SSL_ENDPOINT_IDENTIFICATION", True
            ),
            agent_modules=_modules(e.get("RUNPLANE_AGENT_MODULES")),
            tools_config=env_str(e, "RUNPLANE_TOOLS_CONFIG")
            or (example_tools_config() if e.get("RUNPLANE_AGENT_MODULES") is None else None),
            initiator=env_str(e, "RUNPLANE_INITIATOR"),
        )

    def topic(self, name: str) -> str:
        """The full name of a logical topic (``journal`` → ``runplane.journal``)."""
        return f"{self.topic_prefix}{name}"

    def http_port(self, service: str) -> int:
        return env_int(os.environ, f"RUNPLANE_{service.upper()}_PORT", SERVICE_PORTS[service])
