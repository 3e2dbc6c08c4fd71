"""The local stack's configuration: pure derivations from Settings, no processes started."""

from __future__ import annotations

from pathlib import Path

import pytest

from runplane.config import Settings
from runplane.errors import ConfigError
from runplane.stack import StackConfig
from runplane.stack._kafka import new_cluster_id, render_properties


def test_ports_and_paths_come_from_settings(tmp_path: Path) -> None:
    settings = Settings(
        bootstrap_servers="127.0.0.1:29092,127.0.0.1:29094",
        redis_url="redis://127.0.0.1:26379/0",
        state_dir=Path("state"),
    )
    config = StackConfig.from_settings(settings, env={}, root=tmp_path)
    assert (config.broker_port, config.controller_port, config.redis_port) == (29092, 29093, 26379)
    assert config.state_dir == tmp_path / "state"
    assert config.bootstrap == "127.0.0.1:29092"
    assert config.is_local
    assert (config.tools_dir / "pom.xml").is_file()


def test_environment_overrides(tmp_path: Path) -> None:
    env = {
        "RUNPLANE_KAFKA_CONTROLLER_PORT": "30000",
        "JAVA_HOME": "/opt/jdk",
        "RUNPLANE_KAFKA_HEAP_OPTS": "-Xmx256m",
    }
    config = StackConfig.from_settings(Settings(), env=env, root=tmp_path)
    assert config.controller_port == 30000
    assert config.java == "/opt/jdk/bin/java"
    assert config.kafka_heap_opts == "-Xmx256m"
    with pytest.raises(ConfigError):
        StackConfig.from_settings(Settings(), env={"RUNPLANE_KAFKA_CONTROLLER_PORT": "x"})


def test_a_remote_bootstrap_is_not_local(tmp_path: Path) -> None:
    settings = Settings(bootstrap_servers="kafka.example:9092")
    assert not StackConfig.from_settings(settings, env={}, root=tmp_path).is_local


def test_cluster_ids_look_like_kafka_uuids() -> None:
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    for cluster_id in ids:
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
        assert set(cluster_id) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        )


def test_server_properties_are_a_single_node_kraft_broker(tmp_path: Path) -> None:
    config = StackConfig.from_settings(Settings(state_dir=tmp_path), env={})
    text = render_properties(config).read_text()
    props = dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:19093"
    assert "controller.quorum.voters" not in props  # refused by `format --standalone`
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["log.dirs"] == str(tmp_path / "kafka" / "data")
    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.replication.factor",
    ):
        assert props[key] == "1"
    assert props["auto.create.topics.enable"] == "false"
    assert props["group.initial.rebalance.delay.ms"] == "0"


def test_a_three_broker_cluster_interleaves_its_ports_and_names_every_voter(
    tmp_path: Path,
) -> None:
    from runplane.stack import _cluster

    settings = Settings(bootstrap_servers="127.0.0.1:19700", state_dir=tmp_path)
    config = StackConfig.from_settings(settings, env={"RUNPLANE_KAFKA_BROKERS": "3"})
    nodes = _cluster.nodes(config)
    assert [(n.name, n.broker_port, n.controller_port) for n in nodes] == [
        ("kafka-1", 19700, 19701),
        ("kafka-2", 19702, 19703),
        ("kafka-3", 19704, 19705),
    ]
    assert _cluster.bootstrap(config) == "127.0.0.1:19700,127.0.0.1:19702,127.0.0.1:19704"
    text = _cluster.render(config, nodes[1]).read_text()
    assert "node.id=2\n" in text
    assert "controller.quorum.voters=1@127.0.0.1:19701,2@127.0.0.1:19703,3@127.0.0.1:19705" in text
    assert "listeners=PLAINTEXT://127.0.0.1:19702,CONTROLLER://127.0.0.1:19703" in text
    for line in ("min.insync.replicas=2", "transaction.state.log.replication.factor=3"):
        assert line in text
    assert "-Dkafka.logs.dir=" + str(nodes[1].logs) in _cluster.jvm(config, "java", nodes[1])
    # Unset, the size is what the state dir was formatted for (1 when never formatted).
    assert _cluster.size(StackConfig.from_settings(settings, env={})) == 1


def test_cluster_ports_must_not_collide() -> None:
    with pytest.raises(ConfigError):  # controller port = broker port + 2 collides with node 2
        StackConfig.from_settings(
            Settings(bootstrap_servers="127.0.0.1:19700"),
            env={"RUNPLANE_KAFKA_BROKERS": "3", "RUNPLANE_KAFKA_CONTROLLER_PORT": "19702"},
        )
