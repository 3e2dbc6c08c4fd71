"""Latency of requests on a reused keep-alive connection to our uvicorn server.

    python -m benchmarks.http_keepalive [N]      # prints a table; run() returns the numbers

Serves a tiny FastAPI app twice — through ``runplane.serving.shell.run_http`` and, as the baseline,
through uvicorn on a socket made the way ``run_http`` made it before the fix
(``socket(AF_INET, SOCK_STREAM)``: proto 0, so asyncio left Nagle on) — and times N GETs and N
JSON POSTs with one ``httpx.Client`` (one pooled connection). The loopback fakes
(``runplane.fakes``, http.server) had the same stall; their billing API is timed too.
Numbers only, no assertions.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from runplane.fakes import FakeBillingServer
from runplane.serving.shell import run_http


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/g")
    def get() -> dict[str, str]:
        return {"x": "y" * 100}

    @app.post("/p")
    def post(body: dict[str, Any]) -> dict[str, Any]:
        return body

    return app


@contextmanager
def _legacy(app: FastAPI) -> Iterator[int]:
    """uvicorn on a proto-0 socket: the server as it was before TCP_NODELAY."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield int(sock.getsockname()[1])
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextmanager
def _current(app: FastAPI) -> Iterator[int]:
    with run_http(app, "127.0.0.1", 0, threading.Event()) as server:
        yield server.port


def _times(fn: Callable[[], httpx.Response], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn().raise_for_status()
        out.append((time.perf_counter() - t) * 1000)
    return out


def run(n: int = 50) -> dict[str, dict[str, float]]:
    """{"<server> <method>": {first_ms, reused_p50_ms, reused_max_ms}}."""
    results: dict[str, dict[str, float]] = {}
    for label, serve in (("before (proto 0)", _legacy), ("run_http", _current)):
        with serve(_app()) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            time.sleep(0.05)  # let the server finish starting before the first timed request
            for method, fn in (
                ("GET", lambda: client.get("/g")),
                ("POST", lambda: client.post("/p", json={"a": 1})),
            ):
                ts = _times(fn, n)
                results[f"{label} {method}"] = {
                    "first_ms": ts[0],
                    "reused_p50_ms": statistics.median(ts[1:]),
                    "reused_max_ms": max(ts[1:]),
                }
    return results


def run_fake(n: int = 50) -> dict[str, float]:
    """The fake billing API (stdlib http.server) on one keep-alive connection."""
    with FakeBillingServer() as billing, httpx.Client(base_url=billing.url) as client:
        ts = _times(lambda: client.get("/invoices/INV-1"), n)
    return {
        "first_ms": ts[0],
        "reused_p50_ms": statistics.median(ts[1:]),
        "reused_max_ms": max(ts[1:]),
    }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    print(f"{n} requests per row on one keep-alive connection (httpx)")
    print(f"{'server / method':<24} {'first ms':>9} {'reused p50':>11} {'reused max':>11}")
    for name, r in {**run(n), "fake billing GET": run_fake(n)}.items():
        print(
            f"{name:<24} {r['first_ms']:>9.1f} {r['reused_p50_ms']:>11.1f} {r['reused_max_ms']:>11.1f}"
        )


if __name__ == "__main__":
    main()
