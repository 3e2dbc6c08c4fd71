"""OpenTelemetry traces across the services: W3C trace context in Kafka record headers.

One trace follows a run: an emitter's ``traceparent`` (or none) → admission's span for the
request → the StartRun it writes carries admission's context → the executor's span for each
step is a child of the inbox record's context → every effect it performs (tool, model, probe)
is a span under that step, and an HTTP tool gets ``traceparent`` on its request → the records
a step writes (journal records included, so a trace and a journal join on the trace id, and
the commands other services act on) carry the step's context in their headers.

Off by default, and the standard ``OTEL_*`` variables configure it: ``configure(service)``
installs the SDK with an OTLP/HTTP exporter when ``OTEL_TRACES_EXPORTER`` is ``otlp`` or an
``OTEL_EXPORTER_OTLP[_TRACES]_ENDPOINT`` is set (and ``OTEL_SDK_DISABLED`` is not true).
Without it the API's no-op tracer costs a context lookup per record, and a record that came
without trace headers leaves without them, so journals and wire bytes are unchanged.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Span

__all__ = [
    "TRACE_HEADERS",
    "configure",
    "current_headers",
    "inject_http",
    "span_from_headers",
    "tracer",
]

TRACE_HEADERS = ("traceparent", "tracestate")
# What confluent-kafka's Message.headers() returns (a list of pairs; a dict from some clients).
KafkaHeaders = Iterable[tuple[str, bytes | str | None]] | Mapping[str, bytes | str | None]

_configured = False


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes")


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the OTEL_* variables ask for an exporter (the SDK is off otherwise)."""
    if _truthy(env.get("OTEL_SDK_DISABLED")):
        return False
    exporters = (env.get("OTEL_TRACES_EXPORTER") or "").lower()
    if "none" in exporters.split(","):
        return False
    return "otlp" in exporters or any(
        env.get(name)
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def configure(service: str, env: Mapping[str, str] | None = None) -> bool:
    """Install the SDK with an OTLP exporter when the environment asks for one (once per
    process); True when traces are exported. ``service`` is the default service.name."""
    global _configured
    e = os.environ if env is None else env
    if _configured or not wanted(e):
        return _configured
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create(
        {"service.name": e.get("OTEL_SERVICE_NAME") or f"runplane-{service}"}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _configured = True
    return True


def tracer() -> trace.Tracer:
    return trace.get_tracer("runplane")


class _HeaderGetter(Getter[dict[str, str]]):
    """Reads W3C headers out of a Kafka record's header pairs (made a dict first)."""

    def get(self, carrier: dict[str, str], key: str) -> list[str] | None:
        value = carrier.get(key)
        return None if value is None else [value]

    def keys(self, carrier: dict[str, str]) -> list[str]:
        return list(carrier)


def _as_text(headers: KafkaHeaders | None) -> dict[str, str]:
    out: dict[str, str] = {}
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    for name, value in pairs or ():
        if name in TRACE_HEADERS and value is not None:
            out[name] = value.decode("latin-1") if isinstance(value, bytes) else value
    return out


def _recording() -> bool:
    return isinstance(trace.get_tracer_provider(), _sdk_provider_type())


@functools.cache
def _sdk_provider_type() -> type:
    # Cached: asked once per record handled, and an import statement is not free.
    try:
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:  # pragma: no cover - the SDK is a dependency
        return type(None)
    return TracerProvider


@contextmanager
def span_from_headers(
    name: str, headers: KafkaHeaders | None, attributes: Mapping[str, Any] | None = None
) -> Iterator[Span | None]:
    """A span ``name`` for handling one record, child of the record's trace context, current
    for the block. Yields None (no span, no context) when the record carries no trace context
    and no SDK is installed: the no-op path costs nothing."""
    carrier = _as_text(headers)
    if not carrier and not _recording():
        yield None
        return
    parent = extract(carrier, getter=_HeaderGetter()) if carrier else None
    with tracer().start_as_current_span(
        name, context=parent, kind=trace.SpanKind.CONSUMER, attributes=dict(attributes or {})
    ) as span:
        yield span


def current_headers() -> list[tuple[str, bytes]]:
    """The current context as Kafka headers ([] when there is none to carry)."""
    if not trace.get_current_span().get_span_context().is_valid:
        return []
    carrier: dict[str, str] = {}
    inject(carrier)
    return [(k, v.encode("latin-1")) for k, v in carrier.items() if k in TRACE_HEADERS]


def inject_http(headers: dict[str, str]) -> None:
    """Add the current context to an outgoing HTTP request's headers."""
    if trace.get_current_span().get_span_context().is_valid:
        inject(headers)


def current_context() -> otel_context.Context:
    return otel_context.get_current()


@contextmanager
def effect_span(
    name: str, parent: otel_context.Context | None, attributes: Mapping[str, Any]
) -> Iterator[None]:
    """A CLIENT span for one performed effect, under the step that requested it."""
    if parent is None or not trace.get_current_span(parent).get_span_context().is_valid:
        yield
        return
    with tracer().start_as_current_span(
        name, context=parent, kind=trace.SpanKind.CLIENT, attributes=dict(attributes)
    ):
        yield
