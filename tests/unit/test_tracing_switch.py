"""Tracing is off unless the OTEL_* variables ask for an exporter, and then costs nothing:
a record without trace headers leaves without them (journals and wire bytes unchanged)."""

from __future__ import annotations

import pytest

from runplane.serving.tracing import current_headers, span_from_headers, wanted


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, False),
    ],
)
def test_the_standard_variables_switch_it_on(env: dict[str, str], on: bool) -> None:
    assert wanted(env) is on


def test_an_untraced_record_gets_no_span_and_carries_nothing() -> None:
    with span_from_headers("executor StartRun", [("runplane-sig", b"x")]) as span:
        assert span is None
        assert current_headers() == []


def test_a_traced_record_passes_its_context_on_without_an_sdk() -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with span_from_headers("executor StartRun", [("traceparent", parent.encode())]):
        (name, value), *_ = current_headers()
    # The no-op tracer records nothing, but the run stays in its emitter's trace.
    assert name == "traceparent" and value.decode().split("-")[1] == parent.split("-")[1]
