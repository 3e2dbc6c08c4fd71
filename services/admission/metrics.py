"""Admission's metrics (names listed in docs/metrics.md). The claims table size is the
processor's ``runplane_processor_table_rows{service="admission",table="claims"}``."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from runplane.kafka.handler import Incoming
from runplane.wire import AdmissionRequest
from services.admission.decide import Admitted, Decision, Duplicate, Refused, StatusUpdated

ADMITTED = Counter("runplane_admission_admitted_total", "Requests admitted as new runs")
DUPLICATES = Counter(
    "runplane_admission_duplicates_total", "Requests answered with an existing run"
)
REFUSED = Counter("runplane_admission_refused_total", "Requests refused", ["reason"])
STATUS_UPDATES = Counter("runplane_admission_status_updates_total", "Claim status changes applied")
LATENCY = Histogram(
    "runplane_admission_request_latency_seconds",
    "From the emitter's requested_ms to admission's decision",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


def observe(decision: Decision, msg: Incoming | None, now_ms: int) -> None:
    match decision:
        case Admitted():
            ADMITTED.inc()
        case Duplicate():
            DUPLICATES.inc()
        case Refused(code, _):
            REFUSED.labels(code.value).inc()
        case StatusUpdated():
            STATUS_UPDATES.inc()
    if msg is not None and isinstance(msg.value, AdmissionRequest) and msg.value.requested_ms > 0:
        LATENCY.observe(max(0, now_ms - msg.value.requested_ms) / 1000)
