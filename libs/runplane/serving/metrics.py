"""Each service's ``/metrics`` serves its own metrics only, even when services share a process.

Every service defines its metrics on prometheus-client's process-wide default registry (one
definition per process, whatever runs in it). ``runplane serve all`` runs the six services in
one process, each on its own port: serving that registry on every port made a scrape of all six
count every counter six times. So a service's port serves a *view* of it — a
``CollectorRegistry`` of its own holding one :class:`ServiceView` collector — with:

- the metrics the service owns, by name (:data:`OWNED_PREFIXES`, the "service" column of
  docs/metrics.md; ``tests/unit/test_service_metrics.py`` holds the two to each other);
- of the metrics shared by several services (the transactional processor's, labelled
  ``service``), the samples labelled with its own name;
- the process's own metrics (``process_*``, ``python_*``) and anything no service owns, on one
  port of the process only: the first service ``runplane serve`` starts.

Which service a port belongs to is set by :func:`serving_as` around a service's
``serve(settings, stop)`` (``runplane.cli.serve`` does it, in the service's own thread), and
read by ``runplane.serving.shell.health_routes`` when it builds ``/metrics``. Outside it (tests,
an app built by hand) ``/metrics`` serves the whole default registry, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = [
    "OWNED_PREFIXES",
    "SHARED_LABEL",
    "ServiceView",
    "metrics_registry",
    "owner_of",
    "serving_as",
]

# The metric names each service owns, by prefix (docs/metrics.md's "service" column).
OWNED_PREFIXES: Mapping[str, tuple[str, ...]] = {
    "admission": ("runplane_admission_",),
    "executor": ("runplane_executor_", "runplane_live_call", "runplane_gate_"),
    "cases": ("runplane_cases_", "runplane_obligations_", "runplane_deadline_"),
    "sweeper": ("runplane_sweeper_",),
    "worklist": ("runplane_worklist_", "runplane_task_", "runplane_tasks_"),
    "journal": ("runplane_journal_", "runplane_chain_", "runplane_audit_", "runplane_cost_"),
    "queues": ("runplane_queues_",),
}
# A metric several services emit tells them apart by this label (runplane.kafka.metrics).
SHARED_LABEL = "service"


def owner_of(name: str) -> str | None:
    """The service that owns the metric (family) ``name``, or None (shared or the process's)."""
    for service, prefixes in OWNED_PREFIXES.items():
        if name.startswith(prefixes):
            return service
    return None


@dataclass(frozen=True)
class ServiceView(Collector):
    """The part of ``source`` that ``service``'s port serves (see the module docstring)."""

    service: str
    process_metrics: bool
    source: CollectorRegistry = REGISTRY

    def collect(self) -> Iterable[Metric]:
        for family in self.source.collect():
            owner = owner_of(family.name)
            if owner is not None:
                if owner == self.service:
                    yield family
                continue
            if any(SHARED_LABEL in s.labels for s in family.samples):
                yield _only(family, self.service)
            elif self.process_metrics:
                yield family


def _only(family: Metric, service: str) -> Metric:
    copy = Metric(family.name, family.documentation, family.type, family.unit)
    copy.samples = [s for s in family.samples if s.labels.get(SHARED_LABEL) == service]
    return copy


@dataclass(frozen=True)
class _Serving:
    service: str
    process_metrics: bool


_SERVING: ContextVar[_Serving | None] = ContextVar("runplane_serving", default=None)


@contextmanager
def serving_as(service: str, *, process_metrics: bool) -> Iterator[None]:
    """Within the block (one service's thread), ``/metrics`` routes built serve ``service``'s
    view; ``process_metrics``: this service's port also serves the process's own metrics."""
    token = _SERVING.set(_Serving(service, process_metrics))
    try:
        yield
    finally:
        _SERVING.reset(token)


def metrics_registry() -> CollectorRegistry:
    """What ``/metrics`` serves here: the serving service's view, else the default registry."""
    serving = _SERVING.get()
    if serving is None:
        return REGISTRY
    view = CollectorRegistry(auto_describe=False)
    view.register(ServiceView(serving.service, serving.process_metrics))
    return view
