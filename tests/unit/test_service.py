"""The service shell: /livez and /readyz follow the probes, /metrics serves prometheus text,
forwarded headers are believed from the configured proxies only."""

from __future__ import annotations

import json
import logging
import threading

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from runplane.errors import ConfigError
from runplane.serving.health import Health
from runplane.serving.shell import JsonFormatter, make_app, parse_forwarded_allow_ips, run_http


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


# --- liveness vs readiness (review M5) ---------------------------------------------------------


def test_a_restore_is_not_ready_but_live_until_the_busy_limit() -> None:
    """A restore runs inside the rebalance callback, where the loop cannot beat: the pod must
    leave the Service (readiness) without being restarted (liveness) — until it is stuck."""
    clock = FakeMonotonic()
    health = Health(stale_after_s=5.0, busy_limit_s=60.0, clock=clock)
    probe = health.probe("processor")
    probe.set_ready(True)
    probe.beat()
    assert health.liveness() == (True, {}) and health.readiness() == (True, {})
    probe.set_ready(False, "restoring partitions [0, 1]")
    clock.t += 59.0  # no beat for 59 s: far past stale_after_s, within busy_limit_s
    assert health.readiness() == (False, {"processor": "restoring partitions [0, 1]"})
    assert health.liveness() == (True, {})
    clock.t += 2.0
    live, reasons = health.liveness()
    assert not live and reasons["processor"].startswith("stuck: no heartbeat for 61.0s")
    assert "restoring partitions [0, 1]" in reasons["processor"]


def test_a_ready_loop_that_stops_beating_is_stuck_after_stale_after_s() -> None:
    clock = FakeMonotonic()
    health = Health(stale_after_s=5.0, busy_limit_s=60.0, clock=clock)
    probe = health.probe("processor")
    probe.set_ready(True)
    probe.beat()
    clock.t += 4.0
    assert health.liveness() == (True, {})
    probe.beat()
    clock.t += 4.0  # the beat renewed it
    assert health.liveness() == (True, {})
    clock.t += 2.0
    assert health.liveness()[0] is False and health.readiness()[0] is False


def test_waiting_for_an_assignment_while_beating_stays_live() -> None:
    clock = FakeMonotonic()
    health = Health(stale_after_s=5.0, busy_limit_s=20.0, clock=clock)
    probe = health.probe("processor")
    probe.set_ready(False, "waiting for partition assignment")
    for _ in range(10):  # 100 s of polling without partitions
        clock.t += 10.0
        probe.beat()
        assert health.liveness() == (True, {})
        assert health.readiness()[0] is False


def test_one_stuck_probe_of_two_fails_liveness_and_names_itself() -> None:
    clock = FakeMonotonic()
    health = Health(stale_after_s=5.0, busy_limit_s=20.0, clock=clock)
    audit, indexer = health.probe("audit"), health.probe("indexer")
    for p in (audit, indexer):
        p.set_ready(True)
        p.beat()
    clock.t += 6.0
    audit.beat()
    live, reasons = health.liveness()
    assert not live and set(reasons) == {"indexer"}


def test_no_probe_yet_is_live_but_not_ready() -> None:
    health = Health()
    assert health.liveness() == (True, {})
    assert health.readiness() == (False, {"service": "no probes registered yet"})


def test_start_up_counts_against_the_busy_limit_not_forever() -> None:
    clock = FakeMonotonic()
    health = Health(stale_after_s=5.0, busy_limit_s=30.0, clock=clock)
    health.probe("processor")  # never beats: init_transactions hangs, say
    clock.t += 29.0
    assert health.liveness() == (True, {})
    clock.t += 2.0
    assert health.liveness()[0] is False


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Health(busy_limit_s=0)
    with pytest.raises(ValueError):
        Health(stale_after_s=-1)


def test_http_livez_readyz_and_the_healthz_alias() -> None:
    clock = FakeMonotonic()
    health = Health(stale_after_s=5.0, busy_limit_s=60.0, clock=clock)
    probe = health.probe("loop")
    stop = threading.Event()
    with (
        run_http(make_app(health), "127.0.0.1", 0, stop) as srv,
        httpx.Client(base_url=f"http://127.0.0.1:{srv.port}") as client,
    ):
        probe.set_ready(True)
        probe.beat()
        assert [client.get(p).status_code for p in ("/livez", "/readyz", "/healthz")] == [200] * 3
        probe.set_ready(False, "restoring partitions [3]")
        clock.t += 30.0
        live, ready, old = client.get("/livez"), client.get("/readyz"), client.get("/healthz")
        assert live.status_code == 200 and live.json() == {"status": "ok"}
        assert ready.status_code == 503
        assert ready.json() == {
            "status": "unavailable",
            "reasons": {"loop": "restoring partitions [3]"},
        }
        assert old.status_code == 503 and old.json() == ready.json()
        clock.t += 31.0
        stuck = client.get("/livez")
        assert stuck.status_code == 503 and stuck.json()["status"] == "stuck"
        assert "loop" in stuck.json()["reasons"]
    stop.set()


# --- forwarded headers behind an ingress (review M3) -------------------------------------------


def _scheme_and_client_app() -> Starlette:
    async def where(request: Request) -> JSONResponse:
        client = request.client.host if request.client else None
        return JSONResponse({"scheme": request.url.scheme, "client": client})

    return Starlette(routes=[Route("/", where)])


_FORWARDED = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"}


def _ask(**run_kwargs: str) -> dict[str, str]:
    with (
        run_http(_scheme_and_client_app(), "127.0.0.1", 0, threading.Event(), **run_kwargs) as srv,
        httpx.Client(base_url=f"http://127.0.0.1:{srv.port}") as client,
    ):
        answer: dict[str, str] = client.get("/", headers=_FORWARDED).json()
        return answer


def test_forwarded_headers_are_believed_from_a_trusted_proxy_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RUNPLANE_FORWARDED_ALLOW_IPS", raising=False)
    # The test client connects from 127.0.0.1: trusted by default (loopback only).
    assert _ask() == {"scheme": "https", "client": "203.0.113.7"}
    # Only some other proxy is trusted: the headers are ignored.
    assert _ask(forwarded_allow_ips="10.1.2.3") == {"scheme": "http", "client": "127.0.0.1"}
    # A network holding the peer.
    assert _ask(forwarded_allow_ips="10.0.0.0/8, 127.0.0.0/8")["scheme"] == "https"


def test_forwarded_allow_ips_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPLANE_FORWARDED_ALLOW_IPS", "10.1.2.3")
    assert _ask() == {"scheme": "http", "client": "127.0.0.1"}
    monkeypatch.setenv("RUNPLANE_FORWARDED_ALLOW_IPS", "*")
    assert _ask()["scheme"] == "https"


@pytest.mark.parametrize(
    "raw, expected",
    [
        (None, "127.0.0.1,::1"),
        ("", "127.0.0.1,::1"),
        (" 10.0.0.0/8 , fd00::/8,192.168.1.1 ", "10.0.0.0/8,fd00::/8,192.168.1.1"),
        ("*", "*"),
    ],
)
def test_parse_forwarded_allow_ips(raw: str | None, expected: str) -> None:
    assert parse_forwarded_allow_ips(raw) == expected


@pytest.mark.parametrize("raw", ["ingress-nginx", "10.0.0.0/33", "*,10.0.0.1", "10.0.0.256"])
def test_a_forwarded_allow_ips_typo_is_a_config_error_not_silence(raw: str) -> None:
    with pytest.raises(ConfigError, match="RUNPLANE_FORWARDED_ALLOW_IPS"):
        parse_forwarded_allow_ips(raw)
    app, stop = _scheme_and_client_app(), threading.Event()
    with pytest.raises(ConfigError), run_http(app, "127.0.0.1", 0, stop, forwarded_allow_ips=raw):
        pass  # never reached: refused before a socket is bound
