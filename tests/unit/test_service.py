"""The service shell: /healthz follows the probes, /metrics serves prometheus text."""

from __future__ import annotations

import json
import logging
import threading

import httpx

from runplane.service import Health, JsonFormatter, make_app, run_http


class FakeMonotonic:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_health_needs_ready_and_fresh_heartbeat() -> None:
    clock = FakeMonotonic()
    health = Health(stale_after_s=5.0, clock=clock)
    probe = health.probe("processor")
    assert health.status() == (False, {"processor": "starting"})
    probe.set_ready(False, "restoring")
    probe.beat()
    assert health.status() == (False, {"processor": "restoring"})
    probe.set_ready(True)
    assert health.status() == (True, {})
    clock.t += 6.0
    ok, reasons = health.status()
    assert not ok and "no heartbeat" in reasons["processor"]


def test_http_healthz_and_metrics_on_port_zero() -> None:
    health = Health()
    probe = health.probe("loop")
    stop = threading.Event()
    with run_http(make_app(health), "127.0.0.1", 0, stop) as srv:
        assert srv.port > 0
        base = f"http://127.0.0.1:{srv.port}"
        r = httpx.get(f"{base}/healthz")
        assert r.status_code == 503
        assert r.json()["reasons"] == {"loop": "starting"}
        probe.set_ready(True)
        probe.beat()
        assert httpx.get(f"{base}/healthz").status_code == 200
        m = httpx.get(f"{base}/metrics")
        assert m.status_code == 200 and "python_info" in m.text
    stop.set()


def test_json_formatter_includes_extra_fields() -> None:
    rec = logging.LogRecord("x", logging.INFO, __file__, 1, "hello %s", ("you",), None)
    rec.partition = 3
    out = json.loads(JsonFormatter("admission").format(rec))
    assert out["msg"] == "hello you" and out["service"] == "admission" and out["partition"] == 3
