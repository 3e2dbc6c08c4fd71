"""Tools on MCP servers (stdio or streamable HTTP), called as journaled effects.

An agent calls ``ctx.tool("files/read_file", {...})``: the tool ``read_file`` of the MCP
server the tools config names ``files``; the effect's provenance is
``tool://files/read_file`` and its recovery the one the config declares for it (MCP's own
``readOnlyHint``/``idempotentHint`` are hints from the peer, not a promise a crash can rest on).

Schemas are listed once per server when the executor opens its session
(:func:`open_mcp_sessions`): each offered tool must be listed, and the SHA-256 of its
canonical definition (name, input and output schema) is its **schema digest**. Every call's
recorded value carries that digest, so the result journal (whose body digest is in the hash
chain) pins which contract the call was made against; a config may pin a digest up front
(``schema_digest``), and a server whose schema moved is refused at start-up.

Failure classification, by the live-call table's one question (did it reach the peer?):
a result with ``isError`` is the tool's own answer — it ran and failed (``TerminalError``); a
JSON-RPC error is the server refusing the request (unknown tool, bad arguments: REJECTED); a
broken connection or process is IN_DOUBT — the declared recovery decides.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

from runplane.core.canonical import canonical_bytes
from runplane.errors import ConfigError, TerminalError
from runplane.providers._config import McpServerSpec, ToolDecl
from runplane.providers._errors import PeerCallError, Reach
from runplane.providers._labels import source_label


class McpSession:
    """One open MCP client session, with the server's tool definitions listed once."""

    def __init__(self, spec: McpServerSpec, client: Any, digests: Mapping[str, str]) -> None:
        self.spec = spec
        self._client = client
        self.digests = dict(digests)  # remote tool name → schema digest

    async def call(self, tool: str, args: Mapping[str, Any]) -> Any:
        from mcp.shared.exceptions import MCPError

        try:
            result = await self._client.call_tool(tool, dict(args))
        except MCPError as exc:
            raise PeerCallError(
                f"MCP {self.spec.name}/{tool}: {exc}", reach=Reach.REJECTED, retryable=False
            ) from exc
        except Exception as exc:  # the transport or the process broke mid-call
            raise PeerCallError(
                f"MCP {self.spec.name}/{tool}: {type(exc).__name__}: {exc}",
                reach=Reach.IN_DOUBT,
                retryable=True,
            ) from exc
        content = [block.model_dump(mode="json", exclude_none=True) for block in result.content]
        if result.is_error:
            text = " ".join(str(b.get("text", "")) for b in content).strip()
            raise TerminalError(f"MCP {self.spec.name}/{tool} failed: {text or 'isError'}")
        return {
            "content": content,
            "structured": result.structured_content,
            "schema_digest": self.digests[tool],
        }


def schema_digest(definition: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a tool's canonical definition: name, input and output schema."""
    pinned = {
        "name": definition.get("name"),
        "input_schema": definition.get("input_schema"),
        "output_schema": definition.get("output_schema"),
    }
    return hashlib.sha256(canonical_bytes(pinned)).hexdigest()


class McpTool:
    """One offered tool of an MCP server (``runplane.core.Tool``)."""

    def __init__(self, server: McpServerSpec, declared: ToolDecl, session: McpSession) -> None:
        self.name = declared.decl.name
        self.decl = declared.decl
        self.remote = server.remote_name(self.name)
        self.label = source_label(self.name, trust=declared.trust, sensitivity=declared.sensitivity)
        self._session = session

    async def call(self, args: Mapping[str, Any], *, idempotency_key: str | None = None) -> Any:
        # MCP has no idempotency-key convention; a tool that wants one declares an argument.
        return await self._session.call(self.remote, args)


async def _list_all(client: Any) -> dict[str, dict[str, Any]]:
    listed: dict[str, dict[str, Any]] = {}
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        for t in page.tools:
            listed[t.name] = {
                "name": t.name,
                "input_schema": t.input_schema,
                "output_schema": t.output_schema,
            }
        cursor = page.next_cursor
        if not cursor:
            return listed


def _client_for(spec: McpServerSpec, env: Mapping[str, str]) -> Any:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    if spec.command:
        server_env = {**env, **spec.env}
        params = StdioServerParameters(
            command=spec.command[0], args=list(spec.command[1:]), env=server_env
        )
        return Client(params)
    assert spec.url is not None
    return Client(spec.url)


async def open_mcp_sessions(
    servers: tuple[McpServerSpec, ...],
    stack: AsyncExitStack,
    env: Mapping[str, str],
    pins: Mapping[str, str] | None = None,
) -> dict[str, McpSession]:
    """Connect to every server, list its tools once, check the offered ones exist (and match
    a pinned digest, ``pins``: ``{server}/{tool}`` → digest); the sessions close with ``stack``."""
    sessions: dict[str, McpSession] = {}
    for spec in servers:
        try:
            client = await stack.enter_async_context(_client_for(spec, env))
            listed = await _list_all(client)
        except Exception as exc:
            raise ConfigError(f"MCP server {spec.name}: cannot connect: {exc}") from exc
        digests: dict[str, str] = {}
        for declared in spec.tools:
            remote = spec.remote_name(declared.decl.name)
            if remote not in listed:
                raise ConfigError(
                    f"MCP server {spec.name} has no tool {remote!r} "
                    f"(it lists: {', '.join(sorted(listed)) or 'none'})"
                )
            digests[remote] = schema_digest(listed[remote])
            pinned = (pins or {}).get(declared.decl.name)
            if pinned is not None and pinned != digests[remote]:
                raise ConfigError(
                    f"MCP tool {declared.decl.name}: schema digest {digests[remote]} "
                    f"is not the pinned {pinned}"
                )
        sessions[spec.name] = McpSession(spec, client, digests)
    return sessions
