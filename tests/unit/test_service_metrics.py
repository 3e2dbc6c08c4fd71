"""Each service's port serves its own metrics only: ``runplane serve all`` runs six services in
one process, and a scrape of the six ports must count every counter once, not six times."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from runplane.cli import serve as cli_serve
from runplane.config import SERVICE_PORTS, Settings
from runplane.serving.health import Health
from runplane.serving.metrics import OWNED_PREFIXES, ServiceView, owner_of, serving_as
from runplane.serving.shell import make_app

pytestmark = pytest.mark.unit

METRICS_DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def _rows() -> list[tuple[str, str, str]]:
    """(name, labels, service) of docs/metrics.md's "Emitted" table."""
    emitted = METRICS_DOC.read_text().split("## Emitted", 1)[1].split("\n## ", 1)[0]
    return [
        (m[1], m[2], m[3].strip())
        for m in re.finditer(
            r"^\| `(runplane_[a-z0-9_]+)` \| [^|]+ \| ([^|]+) \| ([^|]+) \|", emitted, re.M
        )
    ]


def test_every_documented_metric_is_owned_by_the_service_docs_name() -> None:
    rows = _rows()
    assert len(rows) > 40
    for name, labels, service in rows:
        if service in SERVICE_PORTS:
            assert owner_of(name) == service, (name, service)
        else:  # shared by several services: told apart by the service label
            assert owner_of(name) is None and "service" in labels, (name, labels, service)
    assert set(OWNED_PREFIXES) == set(SERVICE_PORTS)


def _source() -> CollectorRegistry:
    source = CollectorRegistry()
    Counter("runplane_journal_records_total", "j", registry=source).inc(3)
    Counter("runplane_admission_admitted_total", "a", registry=source).inc(2)
    shared = Histogram("runplane_processor_commit_seconds", "p", ["service"], registry=source)
    for service in ("admission", "cases", "journal"):
        shared.labels(service).observe(0.01)
    ProcessCollector(registry=source)
    return source


def _samples(view: ServiceView) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {
        (s.name, tuple(sorted(s.labels.items())))
        for family in view.collect()
        for s in family.samples
    }


def test_a_view_holds_its_own_metrics_its_shared_samples_and_the_process_once() -> None:
    source = _source()
    journal = _samples(ServiceView("journal", process_metrics=True, source=source))
    names = {n for n, _ in journal}
    assert "runplane_journal_records_total" in names
    assert "runplane_admission_admitted_total" not in names
    shared = {labels for n, labels in journal if n == "runplane_processor_commit_seconds_count"}
    assert shared == {(("service", "journal"),)}
    assert any(n.startswith("process_") for n in names)
    admission = _samples(ServiceView("admission", process_metrics=False, source=source))
    assert not any(n.startswith("process_") for n, _ in admission)
    # Over all six ports, every sample of the process is served exactly once.
    views = [
        _samples(ServiceView(s, process_metrics=i == 0, source=source))
        for i, s in enumerate(SERVICE_PORTS)
    ]
    everything = {
        (s.name, tuple(sorted(s.labels.items()))) for f in source.collect() for s in f.samples
    }
    assert sum(len(v) for v in views) == len(everything) and set().union(*views) == everything


def _scrape(app: object) -> set[str]:
    text = TestClient(app).get("/metrics").text  # type: ignore[arg-type]
    return {f.name for f in text_string_to_metric_families(text)}


def test_serve_all_gives_each_port_its_own_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both services' metrics are defined in this process, as under `runplane serve all`.
    import services.admission.metrics
    import services.journal.metrics  # noqa: F401

    scraped: dict[str, set[str]] = {}

    def service(name: str):  # type: ignore[no-untyped-def]
        def serve(settings: Settings, stop: threading.Event) -> None:
            scraped[name] = _scrape(make_app(Health()))

        return serve

    monkeypatch.setattr(cli_serve, "load", service)
    assert cli_serve.run_services(["admission", "journal"], Settings(), threading.Event()) == 0
    assert "runplane_admission_admitted" in scraped["admission"]
    assert "runplane_journal_records" not in scraped["admission"]
    assert "runplane_journal_records" in scraped["journal"]
    assert "runplane_admission_admitted" not in scraped["journal"]
    assert "process_cpu_seconds" in scraped["admission"]
    assert "process_cpu_seconds" not in scraped["journal"]


def test_outside_serve_the_whole_registry_is_served() -> None:
    import services.admission.metrics
    import services.journal.metrics  # noqa: F401

    names = _scrape(make_app(Health()))
    assert {"runplane_admission_admitted", "runplane_journal_records"} <= names
    with serving_as("journal", process_metrics=False):
        app = make_app(Health())
    assert "runplane_admission_admitted" not in _scrape(app)
