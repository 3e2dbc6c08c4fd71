"""Configuration factories for every confluent-kafka client runplane creates.

Every service, CLI command and test builds its clients here, so the platform-wide choices are
made once:

* producers use ``partitioner=murmur2_random`` (Java's, aiokafka's and Faust's placement; the
  librdkafka default ``consistent_random`` would put a key on another partition), are
  idempotent and wait for ``acks=all``;
* consumers read ``read_committed``, never auto-commit (offsets are committed in the
  transaction that made their outputs durable, or explicitly after the work), and start from
  the earliest offset when their group is new;
* every client (producer, consumer, admin) authenticates and encrypts as ``RUNPLANE_KAFKA_*``
  says (:func:`security_config`): security.protocol, SASL mechanism, user name and password,
  and the TLS CA (plus an optional client certificate for mutual TLS). A client built by hand
  would connect without them, so nothing in libs/ or services/ builds one by hand. The
  sweeper's Faust (aiokafka) client gets the same settings from :func:`faust_credentials`.

Extra settings are passed as keyword arguments; an underscore in a keyword stands for a dot
(``linger_ms=0`` → ``linger.ms``), and dotted names can be passed with ``**{"linger.ms": 0}``.
"""

from __future__ import annotations

import ssl
from typing import Any

from confluent_kafka.admin import AdminClient

from runplane.config import Settings
from runplane.errors import ConfigError

ClientConfig = dict[str, Any]


def _normalise(extra: dict[str, Any]) -> ClientConfig:
    return {key.replace("_", "."): value for key, value in extra.items()}


def security_config(settings: Settings) -> ClientConfig:
    """librdkafka's security settings from ``RUNPLANE_KAFKA_*`` (empty for PLAINTEXT).

    Only what is configured is passed, so librdkafka's own defaults (the system CA store,
    hostname verification) apply otherwise.
    """
    protocol = settings.kafka_security_protocol
    if protocol == "PLAINTEXT":
        return {}
    conf: ClientConfig = {"security.protocol": protocol.lower()}
    if protocol.startswith("SASL_"):
        conf["sasl.mechanism"] = settings.kafka_sasl_mechanism
        conf["sasl.username"] = settings.kafka_sasl_username
        conf["sasl.password"] = settings.kafka_sasl_password
    if protocol.endswith("SSL"):
        optional = {
            "ssl.ca.location": settings.kafka_ssl_ca_location,
            "ssl.certificate.location": settings.kafka_ssl_certificate_location,
            "ssl.key.location": settings.kafka_ssl_key_location,
            "ssl.key.password": settings.kafka_ssl_key_password,
        }
        conf.update({k: v for k, v in optional.items() if v is not None})
        if not settings.kafka_ssl_endpoint_identification:
            # Only for brokers whose certificates do not name their hosts (a lab); the default
            # ("https") checks the broker's name against its certificate.
            conf["ssl.endpoint.identification.algorithm"] = "none"
    return conf


def _common(settings: Settings, role: str) -> ClientConfig:
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "client.id": f"runplane-{role}-{settings.instance_id}",
        **security_config(settings),
    }


def producer_config(settings: Settings, **extra: Any) -> ClientConfig:
    """An idempotent producer placing keys with murmur2, like every other client of ours."""
    return {
        **_common(settings, "producer"),
        "partitioner": "murmur2_random",
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        **_normalise(extra),
    }


def transactional_producer_config(
    settings: Settings, transactional_id: str, **extra: Any
) -> ClientConfig:
    """A transactional producer; ``transactional_id`` must be stable per instance.

    A restarted instance with the same id aborts its predecessor's open transaction at
    ``init_transactions()``; with a random id, read_committed readers would stall at the last
    stable offset until the old transaction timed out.
    """
    if not transactional_id:
        raise ValueError("transactional_id must not be empty")
    return producer_config(
        settings,
        **{
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60_000,
            # A transaction begun right after a commit finds the coordinator still writing
            # the previous one's markers and is told CONCURRENT_TRANSACTIONS until they are
            # written (a few ms). librdkafka retries after retry.backoff.ms: its default
            # (100 ms) made every back-to-back commit wait ~90 ms in send_offsets (raw
            # two-hop loop at 16 in flight: 63 runs/s, p50 245 ms; with 5 ms: 580 runs/s,
            # p50 24 ms), and 5 ms still doubled one (`python -m benchmarks.txn`: an
            # admission-shaped transaction back to back 7.0 ms with 5, 3.2-3.5 with 1). The
            # backoff grows exponentially up to retry.backoff.max.ms (1 s) for errors that last.
            "retry.backoff.ms": 1,
            # Every record of a transaction goes out by its commit anyway (the commit flushes);
            # lingering only delays the flush the commit waits for (admission at 16 runs in
            # flight: commit p50 7.0 → 4.4 ms). Under load librdkafka still batches: records
            # queue behind the request in flight.
            "linger.ms": 0,
            **_normalise(extra),
        },
    )


def consumer_config(settings: Settings, group_id: str, **extra: Any) -> ClientConfig:
    """A read_committed consumer with auto commit off, starting at the earliest offset."""
    return {
        **_common(settings, "consumer"),
        "group.id": group_id,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **_normalise(extra),
    }


def admin_config(settings: Settings, **extra: Any) -> ClientConfig:
    return {**_common(settings, "admin"), **_normalise(extra)}


def ssl_context(settings: Settings) -> ssl.SSLContext:
    """A TLS context for Python (aiokafka) clients, from the same ``RUNPLANE_KAFKA_SSL_*``."""
    context = ssl.create_default_context(cafile=settings.kafka_ssl_ca_location)
    if not settings.kafka_ssl_endpoint_identification:
        context.check_hostname = False
    if settings.kafka_ssl_certificate_location:
        context.load_cert_chain(
            settings.kafka_ssl_certificate_location,
            settings.kafka_ssl_key_location,
            settings.kafka_ssl_key_password,
        )
    return context


def faust_credentials(settings: Settings) -> Any:
    """Faust's ``broker_credentials`` for ``settings`` (None for PLAINTEXT).

    The sweeper's Faust app speaks to Kafka through aiokafka, not librdkafka, so it cannot
    take :func:`security_config`; this gives it the same protocol, mechanism and secrets.
    """
    import faust  # only the sweeper needs faust; keep it off every other import path

    protocol = settings.kafka_security_protocol
    if protocol == "PLAINTEXT":
        return None
    context = ssl_context(settings) if protocol.endswith("SSL") else None
    if protocol == "SSL":
        return faust.SSLCredentials(context)
    if settings.kafka_sasl_mechanism is None:  # Settings refuses this; keeps mypy honest
        raise ConfigError(f"{protocol} needs RUNPLANE_KAFKA_SASL_MECHANISM")
    return faust.SASLCredentials(
        username=settings.kafka_sasl_username,
        password=settings.kafka_sasl_password,
        ssl_context=context,
        mechanism=settings.kafka_sasl_mechanism,
    )


def admin(settings: Settings, **extra: Any) -> AdminClient:
    """An AdminClient for ``settings``' cluster."""
    return AdminClient(admin_config(settings, **extra))
