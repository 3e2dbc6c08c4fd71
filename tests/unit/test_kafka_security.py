"""Kafka security settings (security review C1): RUNPLANE_KAFKA_* reach every client.

The mapping is pure (Settings -> librdkafka dict), so it is tested here without a broker; the
guard at the end keeps anyone from building a librdkafka client from a hand-written dict,
which would connect without these settings.
"""

from __future__ import annotations

import ast
from pathlib import Path

import certifi
import faust
import pytest

from runplane.config import DEFAULT_AGENT_MODULES, Settings
from runplane.core.agents import import_agent_modules
from runplane.errors import ConfigError
from runplane.kafka.clients import (
    admin_config,
    consumer_config,
    faust_credentials,
    producer_config,
    security_config,
    transactional_producer_config,
)

ROOT = Path(__file__).resolve().parents[2]

SASL_ENV = {
    "RUNPLANE_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
    "RUNPLANE_KAFKA_SASL_MECHANISM": "scram-sha-512",
    "RUNPLANE_KAFKA_SASL_USERNAME": "runplane-executor",
    "RUNPLANE_KAFKA_SASL_PASSWORD": "s3cret-pw",
    "RUNPLANE_KAFKA_SSL_CA_LOCATION": "/etc/kafka/ca.pem",
}
EXPECTED_SASL = {
    "security.protocol": "sasl_ssl",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "runplane-executor",
    "sasl.password": "s3cret-pw",
    "ssl.ca.location": "/etc/kafka/ca.pem",
}


def _all_configs(settings: Settings) -> dict[str, dict[str, object]]:
    return {
        "producer": producer_config(settings),
        "transactional": transactional_producer_config(settings, "rp.executor-0"),
        "consumer": consumer_config(settings, "rp.executor"),
        "admin": admin_config(settings),
    }


def test_sasl_ssl_settings_reach_every_client_factory() -> None:
    settings = Settings.from_env(SASL_ENV)
    for role, conf in _all_configs(settings).items():
        for key, value in EXPECTED_SASL.items():
            assert conf.get(key) == value, (role, key)
        assert "ssl.endpoint.identification.algorithm" not in conf  # librdkafka's https default


def test_plaintext_adds_nothing_and_is_the_default() -> None:
    settings = Settings.from_env({})
    assert settings.kafka_security_protocol == "PLAINTEXT"
    assert security_config(settings) == {}
    for conf in _all_configs(settings).values():
        assert not any(k.startswith(("security.", "sasl.", "ssl.")) for k in conf)


def test_mutual_tls_and_a_lab_without_hostname_checks() -> None:
    settings = Settings.from_env(
        {
            "RUNPLANE_KAFKA_SECURITY_PROTOCOL": "SSL",
            "RUNPLANE_KAFKA_SSL_CA_LOCATION": "/ca.pem",
            "RUNPLANE_KAFKA_SSL_CERTIFICATE_LOCATION": "/client.pem",
            "RUNPLANE_KAFKA_SSL_KEY_LOCATION": "/client.key",
            "RUNPLANE_KAFKA_SSL_KEY_PASSWORD": "kp",
            "RUNPLANE_KAFKA_SSL_ENDPOINT_IDENTIFICATION": "false",
        }
    )
    assert security_config(settings) == {
        "security.protocol": "ssl",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/client.pem",
        "ssl.key.location": "/client.key",
        "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_sasl_plaintext_passes_no_tls_settings() -> None:
    settings = Settings.from_env(
        {
            **SASL_ENV,
            "RUNPLANE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
            "RUNPLANE_KAFKA_SASL_MECHANISM": "PLAIN",
        }
    )
    conf = security_config(settings)
    assert conf["security.protocol"] == "sasl_plaintext" and conf["sasl.mechanism"] == "PLAIN"
    assert "ssl.ca.location" not in conf


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"RUNPLANE_KAFKA_SECURITY_PROTOCOL": "TLS"}, "must be one of"),
        (
            {**SASL_ENV, "RUNPLANE_KAFKA_SASL_MECHANISM": ""},
            "RUNPLANE_KAFKA_SASL_MECHANISM must be one of",
        ),
        (
            {**SASL_ENV, "RUNPLANE_KAFKA_SASL_MECHANISM": "GSSAPI"},
            "RUNPLANE_KAFKA_SASL_MECHANISM must be one of",
        ),
        (
            {**SASL_ENV, "RUNPLANE_KAFKA_SASL_PASSWORD": ""},
            "needs RUNPLANE_KAFKA_SASL_USERNAME and",
        ),
        (
            {**SASL_ENV, "RUNPLANE_KAFKA_SASL_USERNAME": ""},
            "needs RUNPLANE_KAFKA_SASL_USERNAME and",
        ),
        # A password with PLAINTEXT would be ignored by librdkafka: nothing would authenticate.
        ({"RUNPLANE_KAFKA_SASL_PASSWORD": "pw"}, "RUNPLANE_KAFKA_SASL_PASSWORD is set but"),
        ({"RUNPLANE_KAFKA_SSL_ENDPOINT_IDENTIFICATION": "maybe"}, "must be true or false"),
    ],
)
def test_inconsistent_security_settings_are_refused_at_start(
    env: dict[str, str], fragment: str
) -> None:
    with pytest.raises(ConfigError, match=fragment):
        Settings.from_env(env)


def test_secrets_stay_out_of_repr() -> None:
    settings = Settings.from_env({**SASL_ENV, "RUNPLANE_KAFKA_SSL_KEY_PASSWORD": "key-pw-9"})
    text = repr(settings)
    assert "runplane-executor" in text  # the user name is not a secret
    assert "s3cret-pw" not in text and "key-pw-9" not in text


def test_faust_gets_the_same_credentials() -> None:
    assert faust_credentials(Settings()) is None
    sasl = faust_credentials(
        Settings.from_env({**SASL_ENV, "RUNPLANE_KAFKA_SSL_CA_LOCATION": certifi.where()})
    )
    assert isinstance(sasl, faust.SASLCredentials)
    assert (sasl.username, sasl.password) == ("runplane-executor", "s3cret-pw")
    assert sasl.mechanism.value == "SCRAM-SHA-512" and sasl.protocol.value == "SASL_SSL"
    assert sasl.ssl_context is not None
    plain = faust_credentials(
        Settings.from_env(
            {
                **SASL_ENV,
                "RUNPLANE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "RUNPLANE_KAFKA_SASL_MECHANISM": "PLAIN",
            }
        )
    )
    assert isinstance(plain, faust.SASLCredentials) and plain.protocol.value == "SASL_PLAINTEXT"
    tls = faust_credentials(
        Settings.from_env(
            {
                "RUNPLANE_KAFKA_SECURITY_PROTOCOL": "SSL",
                "RUNPLANE_KAFKA_SSL_CA_LOCATION": certifi.where(),
            }
        )
    )
    assert isinstance(tls, faust.SSLCredentials)


def test_agent_modules_are_one_setting_with_the_examples_by_default() -> None:
    assert Settings.from_env({}).agent_modules == DEFAULT_AGENT_MODULES
    assert "examples.declarative" in DEFAULT_AGENT_MODULES
    assert Settings.from_env({"RUNPLANE_AGENT_MODULES": " a.b , ,c"}).agent_modules == ("a.b", "c")
    assert Settings.from_env({"RUNPLANE_AGENT_MODULES": ""}).agent_modules == ()


def test_admission_and_executor_import_the_same_modules() -> None:
    from services.admission.settings import AdmissionSettings
    from services.executor.settings import ExecutorSettings

    env = {"RUNPLANE_AGENT_MODULES": "my.agents,other.agents"}
    assert AdmissionSettings.from_env(env).modules == ExecutorSettings.from_env(env).modules
    assert AdmissionSettings.from_env(env).modules == ("my.agents", "other.agents")


def test_an_agent_module_that_does_not_import_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"cannot import 'no\.such\.agents'"):
        import_agent_modules(["no.such.agents"])


def test_the_initiator_setting_is_optional_but_never_blank() -> None:
    assert Settings.from_env({}).initiator is None
    assert Settings.from_env({"RUNPLANE_INITIATOR": "ivan"}).initiator == "ivan"
    with pytest.raises(ConfigError, match="RUNPLANE_INITIATOR"):
        Settings(initiator="  ")


_CLIENTS = {
    "Producer",
    "Consumer",
    "AdminClient",
    "TransactionalProducer",
    "AIOProducer",
    "AIOConsumer",
}
# The local stack's readiness probe talks to the plaintext broker `runplane up` started itself.
_EXEMPT = {ROOT / "libs" / "runplane" / "stack" / "_kafka.py"}


def _hand_built_clients(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if name in _CLIENTS and isinstance(node.args[0], ast.Dict):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_client_is_built_from_a_hand_written_config() -> None:
    sources = [
        p for top in ("libs", "services") for p in (ROOT / top).rglob("*.py") if p not in _EXEMPT
    ]
    offenders = [where for path in sources for where in _hand_built_clients(path)]
    assert offenders == [], "build clients with runplane.kafka.clients' factories: " + ", ".join(
        offenders
    )


def test_the_guard_finds_a_hand_built_client(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text(
        'from confluent_kafka import Consumer\nc = Consumer({"bootstrap.servers": "x"})\n'
    )
    assert _hand_built_clients(bad, tmp_path) == ["probe.py:2"]


def test_every_transactional_id_starts_with_the_topic_prefix() -> None:
    # Transactional ids are cluster-wide: two deployments sharing a Kafka (two prefixes, the
    # same pod names) must get different ids or the second fences the first (review M6).
    from runplane.kafka.processor import ProcessorConfig
    from services.executor.settings import ExecutorSettings
    from services.journal.settings import JournalSettings

    ids = {}
    for prefix in ("acme.", "globex."):
        base = Settings(topic_prefix=prefix, instance_id="pod-0")
        ids[prefix] = (
            ProcessorConfig(
                service="cases", group_id="g", inputs=("cases.commands",)
            ).transactional_id(base),
            ExecutorSettings(base=base).transactional_id,
            JournalSettings(base=base).transactional_id,
        )
    assert ids["acme."] == ("acme.cases-pod-0", "acme.executor-pod-0", "acme.journal-pod-0")
    assert ids["globex."] == ("globex.cases-pod-0", "globex.executor-pod-0", "globex.journal-pod-0")


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT", "SSL"])
def test_librdkafka_accepts_the_generated_configs(protocol: str) -> None:
    # librdkafka validates names and values when a client is built (an unknown property, an
    # unsupported mechanism or a missing CA file raises here), before any connection.
    from confluent_kafka import Consumer, KafkaException, Producer

    env = {
        **SASL_ENV,
        "RUNPLANE_KAFKA_SECURITY_PROTOCOL": protocol,
        "RUNPLANE_KAFKA_SSL_CA_LOCATION": certifi.where(),
    }
    if protocol == "SSL":
        env = {k: v for k, v in env.items() if "SASL" not in k}
    settings = Settings.from_env({**env, "RUNPLANE_BOOTSTRAP_SERVERS": "127.0.0.1:1"})
    producer = Producer(transactional_producer_config(settings, "p.admission-0"))
    consumer = Consumer(consumer_config(settings, "p.admission"))
    consumer.close()
    assert producer.flush(0) == 0
    if protocol.endswith("SSL"):  # and a CA file that is not there is refused at once
        broken = {**producer_config(settings), "ssl.ca.location": "/nonexistent/ca.pem"}
        with pytest.raises(KafkaException, match="ca"):
            Producer(broken)
