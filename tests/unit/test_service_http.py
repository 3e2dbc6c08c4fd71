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
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from runplane.service import run_http


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
