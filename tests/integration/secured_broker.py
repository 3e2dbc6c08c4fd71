"""A single-node Kafka broker with SASL/SCRAM-SHA-512 over TLS and ACLs on, for one test module.

Certificates are generated here (a throwaway CA and a server certificate for 127.0.0.1, PEM
keystores, which Kafka reads since 2.7); SCRAM users are added when the storage is formatted;
the StandardAuthorizer denies everything no ACL allows. The controller listener stays
PLAINTEXT on loopback, and its ANONYMOUS principal is a super user so the node can talk to
itself — as in Kafka's own KRaft examples. Started from the same Maven jars as the stack.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from runplane.config import Settings
from runplane.fakes import free_port
from runplane.stack import StackConfig
from runplane.stack._kafka import (
    MAIN_CLASS,
    STORAGE_TOOL,
    jars_resolved,
    java_binary,
    jvm_base,
    new_cluster_id,
    resolve_jars,
)

ADMIN = ("admin", "admin-secret")


@dataclass(frozen=True)
class SecuredBroker:
    bootstrap: str
    ca_path: Path

    def settings(self, base: Settings, user: str, password: str) -> Settings:
        """``base`` (its prefix and instance id) as principal ``user`` on this broker."""
        return dataclasses.replace(
            base,
            bootstrap_servers=self.bootstrap,
            kafka_security_protocol="SASL_SSL",
            kafka_sasl_mechanism="SCRAM-SHA-512",
            kafka_sasl_username=user,
            kafka_sasl_password=password,
            kafka_ssl_ca_location=str(self.ca_path),
        )


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def write_certificates(directory: Path) -> tuple[Path, Path]:
    """(ca.pem, server.pem): a CA, and the server's key + certificate chain for 127.0.0.1."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "runplane test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, server_path = directory / "ca.pem", directory / "server.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    server_path.write_bytes(
        _pem(key)
        + server.public_bytes(serialization.Encoding.PEM)
        + ca.public_bytes(serialization.Encoding.PEM)
    )
    return ca_path, server_path


def _properties(directory: Path, port: int, controller: int, ca: Path, server: Path) -> Path:
    user, password = ADMIN
    lines = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}",
        "listeners": f"SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"SASL_SSL://127.0.0.1:{port}",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";'
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{user};User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
        "log.dirs": str(directory / "data"),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "auto.create.topics.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
        "transaction.max.timeout.ms": "900000",
    }
    path = directory / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


@contextmanager
def secured_broker(
    config: StackConfig, directory: Path, users: dict[str, str]
) -> Iterator[SecuredBroker]:
    """Format and start the broker with SCRAM ``users`` (name → password) besides the admin."""
    directory.mkdir(parents=True, exist_ok=True)
    port, controller = free_port(), free_port()
    ca, server = write_certificates(directory)
    props = _properties(directory, port, controller, ca, server)
    own = dataclasses.replace(config, state_dir=directory / "state")
    own.logs_dir.mkdir(parents=True, exist_ok=True)
    if not jars_resolved(own):  # a checkout whose tests reuse a stack started elsewhere
        resolve_jars(own)
    java = java_binary(own)
    scram = [
        arg
        for name, password in {ADMIN[0]: ADMIN[1], **users}.items()
        for arg in ("--add-scram", f"SCRAM-SHA-512=[name={name},password={password}]")
    ]
    formatted = subprocess.run(
        [*jvm_base(own, java), STORAGE_TOOL, "format", "--standalone", "-t", new_cluster_id(),
         "-c", str(props), *scram],
        capture_output=True, text=True, check=False, timeout=180,
    )  # fmt: skip
    if formatted.returncode != 0:
        raise RuntimeError(f"format failed:\n{formatted.stdout}{formatted.stderr}")
    log = (directory / "broker.log").open("w")
    base = jvm_base(own, java)
    process = subprocess.Popen(
        [base[0], "-Xms256m", "-Xmx512m", *base[1:], MAIN_CLASS, str(props)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the secured broker exited; see {directory / 'broker.log'}")
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("the secured broker did not open its port")
            time.sleep(0.5)
        yield SecuredBroker(f"127.0.0.1:{port}", ca)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()
