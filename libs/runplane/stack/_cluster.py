"""A local multi-broker Kafka cluster: N combined KRaft nodes on loopback, one JVM each.

``runplane up --brokers 3`` runs this instead of the single node of ``_kafka.py``, from the
same Maven jars. Every node is a broker *and* a controller voter (combined roles, a static
quorum ``controller.quorum.voters``), so any two of three keep the cluster up: one broker may
be killed or paused and both the metadata quorum and every partition (replication factor 3,
``min.insync.replicas=2``) stay writable. Node k (0-based) listens on ``broker_port + 2k`` and
``controller_port + 2k`` and keeps its properties, data and logs under
``<state_dir>/kafka/node-<k+1>`` and ``<state_dir>/logs/kafka-<k+1>``.

Node names are ``kafka-1`` … ``kafka-N``: the component names ``runplane status`` shows and
the pid files' names, which the chaos suite uses to kill, pause and restart one broker.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from string import Template

from runplane.stack import _kafka
from runplane.stack._config import NODE_PORT_STEP, StackConfig
from runplane.stack._errors import StackError

TEMPLATE = "cluster.properties.template"


@dataclass(frozen=True)
class Node:
    """One node of the local cluster."""

    index: int  # 1-based: the KRaft node id
    host: str
    broker_port: int
    controller_port: int
    home: Path
    logs: Path

    @property
    def name(self) -> str:
        return f"kafka-{self.index}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.broker_port}"

    @property
    def properties(self) -> Path:
        return self.home / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"


def _meta(config: StackConfig) -> Path:
    return config.kafka_dir / "stack.json"


def recorded_brokers(config: StackConfig) -> int:
    """How many brokers the state dir's storage was formatted for (1 when never formatted)."""
    try:
        return int(json.loads(_meta(config).read_text()).get("brokers", 1))
    except (FileNotFoundError, ValueError):
        return 1


def size(config: StackConfig) -> int:
    """The cluster's size: the configured one, else what the state dir was formatted for."""
    return config.brokers if config.brokers is not None else recorded_brokers(config)


def nodes(config: StackConfig) -> tuple[Node, ...]:
    return tuple(
        Node(
            index=k + 1,
            host=config.kafka_host,
            broker_port=config.broker_port + NODE_PORT_STEP * k,
            controller_port=config.controller_port + NODE_PORT_STEP * k,
            home=config.kafka_dir / f"node-{k + 1}",
            logs=config.logs_dir / f"kafka-{k + 1}",
        )
        for k in range(size(config))
    )


def bootstrap(config: StackConfig) -> str:
    """Every node's broker address: what ``RUNPLANE_BOOTSTRAP_SERVERS`` should say."""
    return ",".join(n.address for n in nodes(config))


def render(config: StackConfig, node: Node) -> Path:
    voters = ",".join(f"{n.index}@{n.host}:{n.controller_port}" for n in nodes(config))
    text = Template((config.tools_dir / TEMPLATE).read_text()).substitute(
        node_id=node.index,
        voters=voters,
        host=node.host,
        broker_port=node.broker_port,
        controller_port=node.controller_port,
        data_dir=node.data_dir,
    )
    node.home.mkdir(parents=True, exist_ok=True)
    node.properties.write_text(text)
    return node.properties


def jvm(config: StackConfig, java: str, node: Node) -> list[str]:
    """The node's JVM command (heap, GC, logs in the node's own folder)."""
    base = _kafka.server_argv(config, java)
    logs = f"-Dkafka.logs.dir={config.logs_dir}"
    return [f"-Dkafka.logs.dir={node.logs}" if a == logs else a for a in base[:-1]] + [
        str(node.properties)
    ]


def markers(node: Node) -> tuple[str, ...]:
    """Substrings only this node's command line has."""
    return (_kafka.MAIN_CLASS, str(node.properties))


def format_storage(config: StackConfig, java: str, progress: _kafka.Progress | None) -> str:
    """Format every node's log dir once with one cluster id (a static quorum needs no
    ``--standalone``); returns the cluster id. Storage formatted for another size or other
    ports is refused: ``runplane down --wipe`` starts over."""
    meta = _meta(config)
    wanted = {
        "brokers": size(config),
        "broker_port": config.broker_port,
        "controller_port": config.controller_port,
    }
    if meta.is_file():
        recorded = json.loads(meta.read_text())
        got = {k: recorded.get(k, 1 if k == "brokers" else None) for k in wanted}
        if got != wanted:
            raise StackError(
                f"the Kafka storage in {config.kafka_dir} was formatted for {got}, not "
                f"{wanted}: run `runplane down --wipe` to start from empty storage"
            )
        if all((n.data_dir / "meta.properties").is_file() for n in nodes(config)):
            return str(recorded["cluster_id"])
    if progress:
        progress(f"formatting the storage of {size(config)} Kafka nodes (first start)")
    cluster_id = _kafka.new_cluster_id()
    for node in nodes(config):
        shutil.rmtree(node.data_dir, ignore_errors=True)
        render(config, node)
        argv = [
            *_kafka.jvm_base(config, java), _kafka.STORAGE_TOOL, "format",
            "-t", cluster_id, "-c", str(node.properties), "--ignore-formatted",
        ]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise StackError(
                f"formatting {node.name}'s storage failed:\n{done.stdout}{done.stderr}"
            )
    config.kafka_dir.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({"cluster_id": cluster_id, **wanted}) + "\n")
    return cluster_id


def brokers_seen(config: StackConfig, timeout: float = 3.0) -> int | None:
    """How many brokers the cluster's metadata lists (None: nobody answers)."""
    for node in nodes(config):
        count = _kafka.cluster_brokers(node.address, timeout=timeout)
        if count is not None:
            return count
    return None
