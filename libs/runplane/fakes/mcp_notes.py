"""A real MCP server (the ``mcp`` SDK's ``MCPServer``) for tests and demos: a notes store.

    python -m runplane.fakes.mcp_notes --state notes.jsonl            # stdio
    python -m runplane.fakes.mcp_notes --state notes.jsonl --port 0   # streamable HTTP, loopback

Tools:

* ``add(a, b)`` — read-only arithmetic.
* ``append_note(note_id, text, idempotency_key)`` — mutating: appends one line to the state
  file, once per idempotency key (a repeat returns the first note). With ``slow_s`` it
  sleeps *after* writing, before answering: the window in which a crash leaves the call
  performed but unrecorded.
* ``find_note(note_id, text, idempotency_key)`` — the probe: the note written under that key,
  or null.
* ``fail(message)`` — a tool error (``isError``).

With ``--port`` it prints its URL (``http://127.0.0.1:PORT/mcp``) on the first line.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from runplane.fakes._http import free_port


def read_notes(path: Path) -> list[dict[str, Any]]:
    """Every note written, in order (one per line; also counts the writes)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def build_server(state: Path, **settings: Any) -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("notes", **settings)

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool()
    def append_note(
        note_id: str, text: str, idempotency_key: str, slow_s: float = 0.0
    ) -> dict[str, Any]:
        for note in read_notes(state):
            if note["idempotency_key"] == idempotency_key:
                return note
        note = {"note_id": note_id, "text": text, "idempotency_key": idempotency_key}
        with state.open("a", encoding="utf-8") as out:
            out.write(json.dumps(note) + "\n")
        time.sleep(slow_s)  # performed, not yet answered
        return note

    @server.tool()
    def find_note(
        note_id: str, text: str, idempotency_key: str, slow_s: float = 0.0
    ) -> dict[str, Any] | None:
        return next((n for n in read_notes(state) if n["idempotency_key"] == idempotency_key), None)

    @server.tool()
    def fail(message: str) -> str:
        from mcp.server.mcpserver.exceptions import ToolError

        raise ToolError(message)  # a tool error the server reports as is (isError)

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m runplane.fakes.mcp_notes")
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--port", type=int, default=None, help="streamable HTTP (0: any)")
    args = parser.parse_args(argv)
    if args.port is None:
        build_server(args.state).run("stdio")
        return
    port = args.port or free_port()
    server = build_server(args.state)
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    server.run("streamable-http", host="127.0.0.1", port=port)


if __name__ == "__main__":
    main()
