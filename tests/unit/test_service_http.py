"""run_http turns Nagle off on every accepted connection.

Without TCP_NODELAY, uvicorn's separate writes of a response's head and body meet the
client's delayed ACK on a reused keep-alive connection: ~44 ms per request instead of ~1 ms
(``python -m benchmarks.http_keepalive`` prints both). The test reads the socket option on the
server's side of a live keep-alive connection rather than timing anything.
"""

from __future__ import annotations

import socket
import threading

import httpx
import redis
from confluent_kafka import KafkaError, KafkaException
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from runplane.serving.shell import install_backend_errors, run_http


def _nodelay_flags(server_connections: set[object]) -> list[int]:
    flags = []
    for conn in server_connections:
        sock = conn.transport.get_extra_info("socket")  # type: ignore[attr-defined]
        flags.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    return flags


def test_accepted_keepalive_connections_have_tcp_nodelay() -> None:
    async def hello(_: Request) -> PlainTextResponse:
        return PlainTextResponse("hi")

    app = Starlette(routes=[Route("/", hello)])
    stop = threading.Event()
    with run_http(app, "127.0.0.1", 0, stop) as server, httpx.Client() as client:
        for _ in range(3):  # the same pooled connection, reused
            assert client.get(f"http://127.0.0.1:{server.port}/").text == "hi"
        flags = _nodelay_flags(server._server.server_state.connections)  # type: ignore[arg-type]
    assert flags, "the keep-alive connection should still be open on the server"
    assert all(f != 0 for f in flags), flags


def test_backends_that_do_not_answer_are_503_with_the_reason() -> None:
    async def redis_down(_: Request) -> PlainTextResponse:
        raise redis.ConnectionError("Connection refused")

    async def kafka_down(_: Request) -> PlainTextResponse:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    app = Starlette(routes=[Route("/r", redis_down), Route("/k", kafka_down)])
    install_backend_errors(app, redis_holds="task read model")
    with (
        run_http(app, "127.0.0.1", 0, threading.Event()) as server,
        httpx.Client(base_url=f"http://127.0.0.1:{server.port}") as client,
    ):
        r, k = client.get("/r"), client.get("/k")
    assert r.status_code == 503 and r.json()["detail"].startswith("task read model unavailable")
    assert k.status_code == 503 and k.json()["detail"].startswith("Kafka unavailable")
