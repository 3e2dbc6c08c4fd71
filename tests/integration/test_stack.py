"""The local stack: up is idempotent, status tells the truth, topics carry the catalogue's policies.

The shared session stack is never stopped here; ``down`` is exercised on a second, private
stack on free ports with its own state dir.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from typer.testing import CliRunner

from runplane.cli import app
from runplane.config import Settings
from runplane.fakes import free_port
from runplane.kafka.topics import COMPACTED, TOPICS, create_topics, describe_topics
from runplane.stack import LocalStack, StackError, down, kafka_answers, redis_answers, status, up
from runplane.stack.process import is_alive, port_bindable


def test_status_reports_both_components_ready(stack: LocalStack) -> None:
    report = status(stack.config)
    assert report.ready, report
    assert {c.name for c in report.components} == {"kafka", "redis"}
    assert kafka_answers(stack.config.bootstrap) is not None
    assert redis_answers(stack.config.redis_url) is not None


def test_up_again_is_harmless(stack: LocalStack) -> None:
    before = status(stack.config)
    started = time.monotonic()
    again = up(stack.config)
    assert time.monotonic() - started < 15
    assert again.ready
    for c in again.components:
        assert c.action in {"already running", "reusing what answers there"}
        assert c.pid == before.component(c.name).pid


def test_topics_carry_the_catalogue_policies(settings: Settings, admin_client: AdminClient) -> None:
    reports = {r.logical: r for r in describe_topics(settings, admin_client)}
    assert set(reports) == set(TOPICS)
    assert all(r.ok for r in reports.values()), [r.drift for r in reports.values() if r.drift]
    assert {n for n, r in reports.items() if r.cleanup_policy == "compact"} == COMPACTED
    assert {
        "admission.claims",
        "results",
        "sessions",
        "cases",
        "tasks",
        "schedules",
        "schedules.fired",
        "queues",
    } == COMPACTED
    assert reports["journal"].retention_ms == "-1"
    assert int(reports["audit"].retention_ms or 0) >= 365 * 86_400_000
    assert all(r.partitions == settings.partitions for r in reports.values())


def test_describe_flags_a_drifted_topic(
    empty_settings: Settings, admin_client: AdminClient
) -> None:
    create_topics(
        empty_settings,
        admin_client,
        names=["cases"],
        overrides={"cases": {"cleanup.policy": "delete"}},
    )
    [report] = describe_topics(empty_settings, admin_client, names=["cases"])
    assert report.exists and not report.ok
    assert any("cleanup.policy" in d for d in report.drift)
    [missing] = describe_topics(empty_settings, admin_client, names=["tasks"])
    assert missing.drift == ("missing",)


def test_cli_topics_describe_and_status(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "RUNPLANE_REDIS_URL": settings.redis_url,
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_STATE_DIR": str(settings.state_dir),
        "COLUMNS": "160",
    }
    runner = CliRunner()
    described = runner.invoke(app, ["topics", "describe"], env=env)
    assert described.exit_code == 0, described.output
    assert f"{settings.topic_prefix}results" in described.output
    assert "compact" in described.output and "forever" in described.output
    shown = runner.invoke(app, ["status"], env=env)
    assert shown.exit_code == 0, shown.output
    assert "running" in shown.output or "external" in shown.output


def test_up_refuses_a_taken_port_with_the_reason(stack: LocalStack, tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        config = dataclasses.replace(stack.config, state_dir=tmp_path, redis_port=port)
        with pytest.raises(StackError, match=f"port {port} is in use by pid"):
            up(config)


def test_a_private_stack_goes_up_and_down_leaving_no_process(
    stack: LocalStack, tmp_path: Path
) -> None:
    broker, controller, redis_port = free_port(), free_port(), free_port()
    config = dataclasses.replace(
        stack.config,
        state_dir=tmp_path / "state",
        broker_port=broker,
        controller_port=controller,
        redis_port=redis_port,
        kafka_heap_opts="-Xms256m -Xmx512m",
    )
    try:
        report = up(config)
        assert report.ready
        pids = [c.pid for c in report.components]
        assert all(p is not None for p in pids)
        assert kafka_answers(config.bootstrap) is not None
        # Warming opened both coordinators and left no scratch topic behind.
        listed = AdminClient({"bootstrap.servers": config.bootstrap}).list_topics(timeout=10)
        topics = set(listed.topics)
        assert topics <= {"__consumer_offsets", "__transaction_state"}, topics
    finally:
        stopped = down(config)
    assert [c.state for c in stopped.components] == ["stopped", "stopped"]
    assert not any(is_alive(p) for p in pids if p is not None)
    assert port_bindable("127.0.0.1", broker) and port_bindable("127.0.0.1", redis_port)
    assert not status(config).ready
    # The shared stack is untouched.
    assert status(stack.config).ready
