"""The service shell: health, metrics, structured logs and shutdown, shared by every service.

The probes themselves (``Health``, ``Probe``) live in ``runplane.serving.health``, which imports
nothing but the standard library, so a loop in ``runplane.kafka`` can beat one without pulling
Starlette, uvicorn or redis in; a shell imports them from there.

A service's ``serve(settings, stop)`` composes these pieces::

    health = Health()
    probe = health.probe("processor")          # the poll loop beats it and marks it ready
    app = make_app(health)                     # or: fastapi_app.router.routes.extend(health_routes(health))
    with run_http(app, settings.http_host, settings.http_port("admission"), stop):
        processor.run(stop)                    # blocks until stop is set

Two questions, two endpoints (an orchestrator must not restart a pod for being busy):

* ``/livez`` — *is the loop stuck?* 200 while every probe's loop beats. A restore runs inside
  the rebalance callback, where the loop cannot beat, so a probe that is not ready may go
  ``busy_limit_s`` without a beat before it counts as stuck; 503 only then. The default, 300 s,
  is librdkafka's ``max.poll.interval.ms`` (a loop silent that long has lost its partitions
  anyway) and above the restore deadlines (the processor gives up after 120 s by itself).
* ``/readyz`` — *should traffic and dependants wait?* 200 only while every probe is ready
  (assignment and restore done) and has beaten within its ``stale_after_s``; 503 with a JSON
  reason otherwise — during every rebalance restore, for instance.
* ``/healthz`` — the readiness answer under its old name, for existing callers (the demo, the
  CLI, scripts).

``/metrics`` is prometheus-client's text format of the service's own metrics
(``runplane.serving.metrics``: under ``runplane serve all`` each port serves only its service's,
not every service's six times); outside ``runplane serve``, of the default registry.

``run_http`` trusts ``X-Forwarded-Proto``/``X-Forwarded-For`` only from the peers listed in
``RUNPLANE_FORWARDED_ALLOW_IPS`` (comma-separated addresses or networks, ``*`` for any;
default loopback only): behind a TLS-terminating ingress, list the ingress controller's
addresses so the app sees ``https`` and the client's address.

``install_signal_handlers(stop)`` turns SIGTERM/SIGINT into ``stop.set()``: loops notice it,
finish or abort their transaction and return, and the process exits cleanly.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis
import uvicorn
from confluent_kafka import KafkaException
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from runplane.errors import ConfigError
from runplane.serving.health import Health
from runplane.serving.metrics import metrics_registry

__all__ = [
    "DEFAULT_FORWARDED_ALLOW_IPS",
    "FORWARDED_ALLOW_IPS_ENV",
    "HttpServer",
    "error_response",
    "health_routes",
    "install_backend_errors",
    "make_app",
    "parse_forwarded_allow_ips",
    "run_http",
    "setup_logging",
]

log = logging.getLogger(__name__)


def _answer(ok: bool, problems: dict[str, str], bad: str) -> Response:
    body: dict[str, Any] = {"status": "ok" if ok else bad}
    if problems:
        body["reasons"] = problems
    return JSONResponse(body, status_code=200 if ok else 503)


def health_routes(health: Health, registry: CollectorRegistry | None = None) -> list[BaseRoute]:
    """``/livez``, ``/readyz``, ``/healthz`` (= readyz) and ``/metrics`` for any Starlette app;
    ``/metrics`` serves ``registry``, by default the serving service's own metrics
    (``runplane.serving.metrics.metrics_registry``, read here, in the service's thread)."""
    served = metrics_registry() if registry is None else registry

    async def livez(_: Request) -> Response:
        return _answer(*health.liveness(), bad="stuck")

    async def readyz(_: Request) -> Response:
        return _answer(*health.readiness(), bad="unavailable")

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(served), media_type=CONTENT_TYPE_LATEST)

    return [
        Route("/livez", livez, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/healthz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]


def error_response(
    status: int,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    response: type[JSONResponse] = JSONResponse,
    **fields: Any,
) -> JSONResponse:
    """The one error body of runplane's HTTP APIs: ``{"detail": why}`` — FastAPI's own, which
    every ``HTTPException`` of the journal, worklist and admission apps answers — plus any
    machine-readable ``fields`` (admission's ``refused`` code, a run's ``run_status``)."""
    return response({"detail": detail, **fields}, status_code=status, headers=headers)


def install_backend_errors(
    app: Starlette, *, redis_holds: str, response: type[JSONResponse] = JSONResponse
) -> None:
    """Redis or Kafka not answering is a 503 whose ``detail`` says which, never a 500.

    ``redis_holds`` names what Redis serves for this app ("run index", "task read model").
    """

    async def redis_down(_: Request, exc: Exception) -> Response:
        return error_response(503, f"{redis_holds} unavailable: {exc}", response=response)

    async def kafka_down(_: Request, exc: Exception) -> Response:
        return error_response(503, f"Kafka unavailable: {exc}", response=response)

    app.add_exception_handler(redis.RedisError, redis_down)
    app.add_exception_handler(KafkaException, kafka_down)


def make_app(health: Health, extra: Sequence[BaseRoute] = ()) -> Starlette:
    """A bare app with the health routes, for services that have no API of their own."""
    return Starlette(routes=[*health_routes(health), *extra])


@dataclass
class HttpServer:
    """A running uvicorn server; ``port`` is the bound port (useful when asked for port 0)."""

    host: str
    port: int
    _server: uvicorn.Server
    _thread: threading.Thread

    def close(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)


FORWARDED_ALLOW_IPS_ENV = "RUNPLANE_FORWARDED_ALLOW_IPS"
DEFAULT_FORWARDED_ALLOW_IPS = "127.0.0.1,::1"


def parse_forwarded_allow_ips(raw: str | None) -> str:
    """The peers whose ``X-Forwarded-*`` headers uvicorn may believe, validated.

    ``raw`` is ``RUNPLANE_FORWARDED_ALLOW_IPS``: comma-separated IP addresses or networks
    (``10.0.0.0/8``), or ``*``. Unset or empty means loopback only. uvicorn itself keeps an
    entry it cannot parse as a literal host name that never matches a peer, so a typo would
    silently switch the forwarded headers off; here it is a ``ConfigError`` at start instead.
    """
    if raw is None or not raw.strip():
        return DEFAULT_FORWARDED_ALLOW_IPS
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if items == ["*"]:
        return "*"
    for item in items:
        try:
            if "/" in item:
                ipaddress.ip_network(item, strict=False)
            else:
                ipaddress.ip_address(item)
        except ValueError as exc:
            raise ConfigError(
                f"{FORWARDED_ALLOW_IPS_ENV}: {item!r} is not an IP address or network "
                "(use addresses, CIDR networks, or * alone)"
            ) from exc
    return ",".join(items)


@contextmanager
def run_http(
    app: Any,
    host: str,
    port: int,
    stop: threading.Event,
    *,
    forwarded_allow_ips: str | None = None,
) -> Iterator[HttpServer]:
    """Serve ``app`` on (host, port) from a background thread until the block ends or ``stop``.

    We bind the socket ourselves so port 0 works (tests) and the real port is known before
    the first request; uvicorn then serves on that socket without touching signal handlers
    (it only installs them on the main thread, and this is not it).

    ``forwarded_allow_ips`` (default: ``RUNPLANE_FORWARDED_ALLOW_IPS``, else loopback only)
    lists the proxies trusted to set ``X-Forwarded-Proto``/``-For``; requests from them get
    the forwarded scheme and client address. The variable is read here, at the HTTP edge
    every service shares, so no service's settings need to carry it.

    TCP_NODELAY: asyncio turns Nagle off on accepted connections only when the socket's
    ``proto`` is ``IPPROTO_TCP`` — a socket made as ``socket(AF_INET, SOCK_STREAM)`` has proto
    0, so it did not, and every response on a reused keep-alive connection (uvicorn writes the
    head and the body separately) waited for the client's delayed ACK: ~44 ms per request.
    We create the socket with ``IPPROTO_TCP`` *and* set TCP_NODELAY on the listener (accepted
    sockets inherit it on Linux), so neither path depends on the other.
    """
    trusted = parse_forwarded_allow_ips(
        os.environ.get(FORWARDED_ALLOW_IPS_ENV)
        if forwarded_allow_ips is None
        else forwarded_allow_ips
    )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    bound = int(sock.getsockname()[1])
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="off",
        proxy_headers=True,
        forwarded_allow_ips=trusted,
    )
    server = uvicorn.Server(config)

    def serve() -> None:
        asyncio.run(server.serve(sockets=[sock]))

    thread = threading.Thread(target=serve, name=f"http-{bound}", daemon=True)
    thread.start()

    def watch_stop() -> None:
        stop.wait()
        server.should_exit = True

    threading.Thread(target=watch_stop, name=f"http-stop-{bound}", daemon=True).start()
    handle = HttpServer(host, bound, server, thread)
    log.info("http listening", extra={"host": host, "port": bound})
    try:
        yield handle
    finally:
        handle.close()
        sock.close()


_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, service, plus any ``extra=`` fields."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self._service = service

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "service": self._service,
            "thread": record.threadName,
        }
        for k, v in record.__dict__.items():
            if k not in _RESERVED and not k.startswith("_"):
                out[k] = v
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(service: str, level: str = "INFO") -> None:
    """JSON logs on stderr for the whole process (idempotent: replaces our previous handler)."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_runplane", False):
            root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    handler._runplane = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
