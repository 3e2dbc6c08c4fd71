"""``runplane journal verify --all / --since`` against Kafka: every run of the topic, one process."""

from __future__ import annotations

import dataclasses
import json

import pytest
import typer
from confluent_kafka import Producer
from typer.testing import CliRunner

from runplane.cli import journal as cli
from runplane.config import Settings
from runplane.kafka.clients import producer_config
from runplane.kafka.partition import partition_for
from runplane.runs.read import journal_run_ids, result_key
from runplane.wire import encode
from tests.helpers.sample import sample_run

pytestmark = pytest.mark.integration


def _write(settings: Settings, run: str, *, forge: bool = False) -> None:
    records, results = sample_run(run, calls=2)
    if forge:
        records[3] = dataclasses.replace(records[3], hash="f" * 64)
    producer = Producer(producer_config(settings))
    errors: list[object] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)

    for e in results.values():
        producer.produce(
            settings.topic("results"),
            key=result_key(e.session_id, e.era, e.call_seq).encode(),
            value=encode(e),
            partition=partition_for(e.session_id, settings.partitions),
        )
    for r in records:
        producer.produce(
            settings.topic("journal"),
            key=r.session_id.encode(),
            value=encode(r),
            partition=partition_for(r.session_id, settings.partitions),
            on_delivery=delivered,
        )
    assert producer.flush(10) == 0
    assert errors == []


def test_verify_all_and_since_read_every_run_in_one_process(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [f"r-batch-{i}" for i in range(5)]
    for run in runs:
        _write(settings, run, forge=run == "r-batch-3")
    assert journal_run_ids(settings) == runs
    assert journal_run_ids(settings, since_ms=4_102_444_800_000) == []  # 2100: nothing since

    monkeypatch.setenv("RUNPLANE_BOOTSTRAP_SERVERS", settings.bootstrap_servers)
    monkeypatch.setenv("RUNPLANE_TOPIC_PREFIX", settings.topic_prefix)
    monkeypatch.setenv("RUNPLANE_PARTITIONS", str(settings.partitions))
    app = typer.Typer()
    cli.register(app)
    result = CliRunner().invoke(app, ["journal", "verify", "--all", "--json"])
    data = json.loads(result.output)
    assert {r["run_id"]: r["verdict"] for r in data["runs"]} == {
        run: "BROKEN" if run == "r-batch-3" else "VERIFIED" for run in runs
    }
    assert data["summary"]["VERIFIED"] == 4 and data["summary"]["BROKEN"] == 1
    assert result.exit_code == cli.EXIT_BROKEN

    recent = CliRunner().invoke(app, ["journal", "verify", "--since", "1h"])
    assert recent.output.strip().splitlines()[-1].startswith("5 runs: 4 verified, 1 broken")
    future = CliRunner().invoke(app, ["journal", "verify", "--since", "2100-01-01"])
    assert future.exit_code == 0 and future.output.startswith("0 runs")
