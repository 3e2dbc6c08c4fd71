"""What a newcomer needs to watch the demo: a Prometheus scrape config for the six ports, and
the Grafana dashboard at a documented path that cannot drift from the chart's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from runplane.config import SERVICE_PORTS
from runplane.demo import DemoPorts

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_prints_a_scrape_config_naming_each_service_port_once() -> None:
    ports = DemoPorts(services={name: 9100 + i for i, name in enumerate(SERVICE_PORTS)})
    config = yaml.safe_load(ports.scrape_config())
    (job,) = config["scrape_configs"]
    assert job["honor_labels"] is True
    targets = [t for c in job["static_configs"] for t in c["targets"]]
    assert sorted(targets) == sorted(f"127.0.0.1:{9100 + i}" for i in range(len(SERVICE_PORTS)))
    components = [c["labels"]["component"] for c in job["static_configs"]]
    assert components == list(SERVICE_PORTS)
    assert all(c["labels"]["namespace"] for c in job["static_configs"])


def test_the_dashboard_in_docs_is_the_charts() -> None:
    docs = ROOT / "docs" / "grafana" / "runplane.json"
    chart = ROOT / "helm" / "runplane" / "dashboards" / "runplane.json"
    assert docs.exists(), "docs/grafana/runplane.json is missing (a link to the chart's)"
    assert docs.read_bytes() == chart.read_bytes()
    assert json.loads(docs.read_text())["uid"]
    note = (ROOT / "docs" / "grafana" / "README.md").read_text()
    assert "Import" in note and "scrape_configs" in note


def test_the_demo_s_last_words_include_the_scrape_config(tmp_path: Path) -> None:
    import dataclasses

    from rich.console import Console

    from runplane.cli.demo import _footer
    from runplane.config import Settings
    from runplane.demo import DemoConfig, DemoOutcome

    console = Console(width=120, record=True)
    config = DemoConfig(settings=dataclasses.replace(Settings(), state_dir=tmp_path))
    _footer(console, config, DemoOutcome(runs=()))
    text = console.export_text()
    scrape = text.split("(prometheus.yml):\n", 1)[1].split("Stop everything", 1)[0]
    assert yaml.safe_load(scrape) == yaml.safe_load(config.ports.scrape_config())
    assert "docs/grafana/runplane.json" in text
