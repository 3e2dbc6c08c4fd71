"""A tiny loopback JSON HTTP server shared by the fakes.

The fakes stand in for things outside the platform (a model vendor, a billing API), so they
must behave like a remote peer: a real TCP socket on 127.0.0.1, real HTTP, their own thread.
The standard library's threading server is enough and starts in milliseconds; a fake never
listens on anything but loopback.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from runplane.errors import ConfigError

JSON = dict[str, Any]


@dataclass(frozen=True)
class Request:
    """One HTTP request as a fake sees it."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: JSON | None


@dataclass(frozen=True)
class Response:
    """A reply: ``body`` as JSON, or — with ``events`` — a server-sent event stream, each
    event written (chunked) ``pace_s`` after the one before, as a streaming peer sends."""

    status: int
    body: JSON
    headers: Mapping[str, str] = field(default_factory=dict)
    events: tuple[bytes, ...] | None = None
    pace_s: float = 0.0


Route = Callable[[Request], Response]


def _handler_class(route: Route) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # TCP_NODELAY: the head and the body go out in two writes; with Nagle on, every
        # reused keep-alive request waited ~40 ms for the client's delayed ACK.
        disable_nagle_algorithm = True

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                self._reply(Response(400, {"error": {"message": "body is not JSON"}}))
                return
            if body is not None and not isinstance(body, dict):
                self._reply(Response(400, {"error": {"message": "body must be a JSON object"}}))
                return
            request = Request(
                method=self.command,
                path=parts.path,
                query={k: v[-1] for k, v in parse_qs(parts.query).items()},
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            self._reply(route(request))

        def _reply(self, response: Response) -> None:
            if response.events is not None:
                self._stream(response)
                return
            data = json.dumps(response.body).encode()
            self.send_response(response.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in response.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, response: Response) -> None:
            self.send_response(response.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            for k, v in response.headers.items():
                self.send_header(k, v)
            self.end_headers()
            pause = threading.Event()
            for i, event in enumerate(response.events or ()):
                if i and response.pace_s > 0:
                    pause.wait(response.pace_s)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        do_GET = _serve
        do_POST = _serve
        do_PUT = _serve
        do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            # Quiet: the fakes run inside tests and benchmarks.
            return

    return _Handler


class LoopbackServer:
    """Serve ``route`` on 127.0.0.1 in a daemon thread; port 0 picks a free port."""

    def __init__(self, route: Route, *, host: str = "127.0.0.1", port: int = 0) -> None:
        if not host.startswith("127.") and host not in ("localhost", "::1"):
            raise ConfigError(f"fakes listen on loopback only, not {host!r}")
        self._httpd = ThreadingHTTPServer((host, port), _handler_class(route))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LoopbackServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Block serving (for ``python -m runplane.fakes``)."""
        self._httpd.serve_forever(poll_interval=0.05)

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it), for a loopback
    server a test, demo or benchmark is about to start."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
