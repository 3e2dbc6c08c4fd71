"""The local Apache Kafka broker: jars from Maven, KRaft storage, the JVM process, readiness."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from string import Template
from typing import Any

from confluent_kafka.admin import AdminClient

from runplane.stack._config import StackConfig
from runplane.stack._errors import StackError, StackStartTimeout
from runplane.stack.process import log_size, port_open, tail

Progress = Callable[[str], None]

MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
_STAMP = ".resolved"
_DOWNLOAD = re.compile(r"Download(?:ing|ed) from \S+: \S+/([^/\s]+)")


# -- jars ------------------------------------------------------------------------------------


def _pom_digest(config: StackConfig) -> str:
    return hashlib.sha256((config.tools_dir / "pom.xml").read_bytes()).hexdigest()


def jars_resolved(config: StackConfig) -> bool:
    """True when target/libs holds the jars of the current pom.xml."""
    stamp = config.libs_dir / _STAMP
    try:
        return stamp.read_text().strip() == _pom_digest(config)
    except FileNotFoundError:
        return False


def resolve_jars(config: StackConfig, progress: Progress | None = None) -> Path:
    """Copy the broker runtime into ``tools/kafka/target/libs`` with Maven (once per pom.xml)."""
    if jars_resolved(config):
        return config.libs_dir
    if not (config.tools_dir / "pom.xml").is_file():
        raise StackError(
            f"no pom.xml in {config.tools_dir}: run from a runplane checkout "
            "or set RUNPLANE_KAFKA_TOOLS_DIR to its tools/kafka folder"
        )
    mvn = shutil.which(config.mvn)
    if mvn is None:
        raise StackError(
            "the Kafka jars are not resolved and Maven is missing: "
            "`apt-get install -y maven`, then `make kafka-jars` (or `runplane up` again)"
        )
    # A version change must not leave the old jars on the classpath beside the new ones.
    shutil.rmtree(config.libs_dir, ignore_errors=True)
    say = progress or (lambda _msg: None)
    say("resolving the Kafka jars with Maven")
    proc = subprocess.Popen(
        [mvn, "-B", "package"],
        cwd=config.tools_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    fetched = 0
    for line in proc.stdout:
        lines.append(line.rstrip())
        match = _DOWNLOAD.search(line)
        if match and line.startswith(("Downloaded", "[INFO] Downloaded")):
            fetched += 1
            say(f"resolving the Kafka jars with Maven: {fetched} files, {match.group(1)}")
    if proc.wait() != 0:
        raise StackError(
            "Maven could not resolve the Kafka jars (`cd tools/kafka && mvn -B package` "
            "reproduces it):\n" + "\n".join(lines[-25:])
        )
    (config.libs_dir / _STAMP).write_text(_pom_digest(config) + "\n")
    return config.libs_dir


# -- java --------------------------------------------------------------------------------------


def java_binary(config: StackConfig) -> str:
    java = shutil.which(config.java)
    if java is None:
        raise StackError(
            f"java not found ({config.java}): install a JDK 17+ "
            "(`apt-get install -y openjdk-17-jre-headless`) or set JAVA_HOME"
        )
    out = subprocess.run(
        [java, "-version"], capture_output=True, text=True, check=False, timeout=30
    ).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if match:
        major = int(match.group(1))
        if major == 1 and match.group(2):  # "1.8.0" style
            major = int(match.group(2))
        if major < 17:
            raise StackError(f"Kafka 4.x needs Java 17+, {java} is Java {major}")
    return java


def jvm_base(config: StackConfig, java: str) -> list[str]:
    return [
        java,
        f"-Dlog4j2.configurationFile={config.tools_dir / 'log4j2.properties'}",
        f"-Dkafka.logs.dir={config.logs_dir}",
        "-Djava.awt.headless=true",
        "-cp",
        str(config.libs_dir / "*"),
    ]


# -- storage -----------------------------------------------------------------------------------


def properties_path(config: StackConfig) -> Path:
    return config.kafka_dir / "server.properties"


def render_properties(config: StackConfig) -> Path:
    template = Template((config.tools_dir / "server.properties.template").read_text())
    text = template.substitute(
        host=config.kafka_host,
        broker_port=config.broker_port,
        controller_port=config.controller_port,
        data_dir=config.kafka_data_dir,
    )
    path = properties_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def new_cluster_id() -> str:
    """A Kafka ``Uuid`` in its text form (URL-safe base64, no padding), as ``random-uuid`` prints."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka refuses ids that look like options
            return text


def _meta_path(config: StackConfig) -> Path:
    return config.kafka_dir / "stack.json"


def format_storage(config: StackConfig, java: str, progress: Progress | None = None) -> str:
    """Format the KRaft log dir once (``StorageTool format --standalone``); returns the cluster id."""
    meta = _meta_path(config)
    if (config.kafka_data_dir / "meta.properties").is_file() and meta.is_file():
        recorded = json.loads(meta.read_text())
        if recorded.get("controller_port") != config.controller_port:
            raise StackError(
                f"the Kafka storage in {config.kafka_data_dir} was formatted for controller "
                f"port {recorded.get('controller_port')}, not {config.controller_port}: "
                "run `runplane down --wipe` to start from empty storage"
            )
        return str(recorded["cluster_id"])
    if progress:
        progress("formatting the Kafka storage (first start)")
    shutil.rmtree(config.kafka_data_dir, ignore_errors=True)
    cluster_id = new_cluster_id()
    argv = [
        *jvm_base(config, java), STORAGE_TOOL, "format", "--standalone",
        "-t", cluster_id, "-c", str(properties_path(config)), "--ignore-formatted",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        raise StackError(f"formatting the Kafka storage failed:\n{done.stdout}{done.stderr}")
    meta.write_text(
        json.dumps(
            {
                "cluster_id": cluster_id,
                "broker_port": config.broker_port,
                "controller_port": config.controller_port,
            }
        )
        + "\n"
    )
    return cluster_id


# -- process -----------------------------------------------------------------------------------


def server_argv(config: StackConfig, java: str) -> list[str]:
    heap = config.kafka_heap_opts.split()
    return [
        *jvm_base(config, java)[:1],
        *heap,
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:+ExitOnOutOfMemoryError",
        *jvm_base(config, java)[1:],
        MAIN_CLASS,
        str(properties_path(config)),
    ]


def kafka_markers(config: StackConfig) -> tuple[str, ...]:
    """Substrings only our broker's command line has (the state dir's server.properties)."""
    return (MAIN_CLASS, str(properties_path(config)))


LOG_FILES = ("kafka.out", "kafka.log")


def log_marks(config: StackConfig, logs: Path | None = None) -> dict[str, int]:
    """Where each log ends now, so a failure shows only what this start wrote."""
    return {name: log_size((logs or config.logs_dir) / name) for name in LOG_FILES}


def kafka_log_tail(
    config: StackConfig,
    lines: int = 30,
    *,
    since: dict[str, int] | None = None,
    logs: Path | None = None,
) -> str:
    folder = logs or config.logs_dir
    parts = []
    for name in LOG_FILES:
        text = tail(folder / name, lines, since=(since or {}).get(name, 0))
        if text:
            parts.append(f"--- {folder / name} (last lines) ---\n{text}")
    return "\n".join(parts)


def cluster_brokers(bootstrap: str, timeout: float = 5.0) -> int | None:
    """Number of brokers in the metadata of whoever answers at ``bootstrap``; None otherwise."""
    metadata = _metadata(bootstrap, timeout)
    return None if metadata is None else len(metadata.brokers)


def kafka_answers(bootstrap: str, timeout: float = 5.0) -> int | None:
    """Number of topics if a broker at ``bootstrap`` answers ``list_topics``; None otherwise."""
    metadata = _metadata(bootstrap, timeout)
    return None if metadata is None else len(metadata.topics)


def _metadata(bootstrap: str, timeout: float) -> Any:
    """The cluster's metadata (confluent-kafka's ClusterMetadata), None if nobody answers."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    if not port_open(host, int(port)):
        return None  # don't let librdkafka log connection-refused noise while it starts
    client = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.connection.setup.timeout.ms": 3000,
            "log.connection.close": False,
        }
    )
    try:
        return client.list_topics(timeout=timeout)
    except Exception:  # KafkaException while the broker is still starting
        return None


def wait_kafka(
    config: StackConfig,
    alive: Callable[[], bool],
    progress: Progress | None,
    started: float,
    *,
    marks: dict[str, int] | None = None,
    address: str | None = None,
    logs: Path | None = None,
) -> None:
    """Wait until the broker at ``address`` (default: the single node's) answers."""
    where = address or config.bootstrap
    deadline = started + config.start_timeout
    while time.monotonic() < deadline:
        if not alive():
            raise StackError(
                f"Kafka on {where} exited during start-up.\n"
                + kafka_log_tail(config, since=marks, logs=logs)
            )
        if kafka_answers(where, timeout=3.0) is not None:
            return
        if progress:
            progress(f"waiting for Kafka on {where} ({time.monotonic() - started:.0f}s)")
        time.sleep(0.25)
    raise StackStartTimeout(
        f"Kafka did not answer on {where} within {config.start_timeout:.0f}s "
        "(set RUNPLANE_STACK_START_TIMEOUT to wait longer).\n"
        + kafka_log_tail(config, since=marks, logs=logs)
    )
