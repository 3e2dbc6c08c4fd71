"""One trace per run across services, on the real broker: an emitter's span → admission →
the executor's step → the tool call (over HTTP, with ``traceparent`` on the request), and the
run's journal records carry the trace context in their headers (a trace and a journal join).

The scenario runs in a child process: the SDK's tracer provider is global and set once per
process, and the in-memory exporter must see only this scenario's spans.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from runplane.config import Settings

pytestmark = pytest.mark.integration


def _scenario(settings: Settings, out: Any) -> None:  # runs in the child
    sys.path.insert(0, str(Path(__file__).parent))  # the worklist's stack helpers
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from test_worklist_support import auth, worklist_service, write_principals

    from runplane.core import AgentRegistry, EffectDecl, Recovery, StepCtx
    from runplane.kafka.clients import consumer_config
    from runplane.providers import HttpTool
    from runplane.runs.client import Client
    from runplane.wire import RunStatus
    from services.admission.decide import CapabilitySpec
    from services.admission.serve import build as build_admission
    from services.admission.settings import AdmissionSettings
    from services.executor.settings import ExecutorSettings
    from tests.helpers.harness import executor_thread
    from tests.helpers.waiting import wait_for

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    seen: list[str | None] = []

    class Lookup(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("traceparent"))
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"ok": True}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Lookup)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    decl = EffectDecl("lookup", mutating=False, recovery=Recovery.RETRY, timeout_s=10.0)
    registry = AgentRegistry()

    @registry.agent("traced", effects=[decl])
    async def traced(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
        found = dict(await ctx.tool("lookup", {"q": input["q"]}))
        await ctx.approval("Go ahead?", found, role="finance")
        return found

    tools = {
        "lookup": HttpTool("lookup", "POST", f"http://127.0.0.1:{server.server_port}/", decl=decl)
    }
    processor = build_admission(
        AdmissionSettings(base=settings, allow_unsigned=True),
        capabilities={"traced": CapabilitySpec({"type": "object"})},
    )
    stop = threading.Event()
    thread = threading.Thread(target=processor.run, args=(stop,), daemon=True)
    thread.start()
    client = Client(settings)
    principals = write_principals(Path(tempfile.mkdtemp()), tenant="default")
    try:
        assert processor.ready.wait(120)
        with (
            executor_thread(
                ExecutorSettings(base=settings, agent_modules=()),
                tools=tools,
                providers={},
                registry=registry,
            ),
            worklist_service(settings, principals) as wl,
        ):
            with trace.get_tracer("emitter").start_as_current_span("emitter admits"):
                reply = client.admit("traced", "k-trace", {"q": "x"}, initiator="alice")
            assert reply.run_id is not None
            client.wait(reply.run_id, timeout=120, until=frozenset({RunStatus.AWAITING_HUMAN}))
            task = wait_for(
                lambda: (
                    wl.client.get("/api/tasks", headers=auth("ada")).json()["tasks"] or [None]
                )[0],
                what="the task",
            )
            decided = wl.client.post(
                f"/api/tasks/{task['task_id']}/decide",
                headers=auth("ada"),
                json={"decision": "approve"},
            )
            assert decided.status_code == 200, decided.text
            done = client.wait(reply.run_id, timeout=120)
            time.sleep(0.5)  # the last commit's spans end just after it
    finally:
        client.close()
        stop.set()
        thread.join(60)
        server.shutdown()
    # The run's journal records, with their headers.
    journal = settings.topic("journal")
    consumer = Consumer(
        consumer_config(
            settings, f"runplane-reader-{uuid.uuid4().hex[:6]}", enable_partition_eof=True
        )
    )
    parts = sorted(consumer.list_topics(journal, timeout=10).topics[journal].partitions)
    consumer.assign([TopicPartition(journal, p, 0) for p in parts])
    pending, headers = set(parts), []
    while pending:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() == KafkaError._PARTITION_EOF:
                pending.discard(msg.partition())
            continue
        if msg.key() == reply.run_id.encode():
            headers.append({k: v.decode() for k, v in (msg.headers() or []) if k == "traceparent"})
    consumer.close()
    out.put(
        {
            "status": str(done.status),
            "http_traceparents": seen,
            "journal_headers": headers,
            "spans": [
                {
                    "name": s.name,
                    "trace": format(s.context.trace_id, "032x"),
                    "id": format(s.context.span_id, "016x"),
                    "parent": None if s.parent is None else format(s.parent.span_id, "016x"),
                }
                for s in exporter.get_finished_spans()
            ],
        }
    )


def test_one_trace_spans_emitter_admission_executor_and_the_tool_call(settings: Settings) -> None:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=_scenario, args=(dataclasses.replace(settings), out))
    child.start()
    try:
        result = out.get(timeout=400)
    finally:
        child.join(60)
    assert result["status"] == "COMPLETED"
    spans = result["spans"]
    by_name = {s["name"]: s for s in spans}
    emitter = by_name["emitter admits"]
    admission = next(s for s in spans if s["name"].startswith("admission "))
    start = by_name["executor StartRun"]
    tool = by_name["tool lookup"]
    # One trace, and each hop a child of the one before it.
    assert {admission["trace"], start["trace"], tool["trace"]} == {emitter["trace"]}
    assert admission["parent"] == emitter["id"]
    assert start["parent"] == admission["id"]
    assert tool["parent"] == start["id"]
    # The decision joins the run's trace: the worklist's span for the TaskDecision continues
    # the context stored with the task, and the executor's step for it continues that.
    decision = next(
        s for s in spans if s["name"].startswith("worklist ") and s["name"].endswith("runs.inbox")
    )
    resumed = by_name["executor TaskDecision"]
    assert decision["trace"] == resumed["trace"] == emitter["trace"]
    assert resumed["parent"] == decision["id"]
    assert decision["parent"] in {tool["id"], start["id"]}
    # The HTTP tool got the tool span's context; the journal records carry the trace.
    [traceparent] = result["http_traceparents"]
    assert traceparent.split("-")[1:3] == [emitter["trace"], tool["id"]]
    carried = [h["traceparent"].split("-")[1] for h in result["journal_headers"] if h]
    assert len(carried) >= 3 and set(carried) == {emitter["trace"]}
