"""Tools on MCP servers (stdio or streamable HTTP), called as journaled effects.

An agent calls ``ctx.tool("files/read_file", {...})``: the tool ``read_file`` of the MCP
server the tools config names ``files``; the effect's provenance is
``tool://files/read_file`` and its recovery the one the config declares for it (MCP's own
``readOnlyHint``/``idempotentHint`` are hints from the peer, not a promise a crash can rest on).

Schemas are listed once per server when the executor opens its session
(:func:`open_mcp_sessions`): each offered tool must be listed, and the SHA-256 of its
canonical definition (name, input and output schema) is its **schema digest**. Every
recorded result's label carries the provenance ``mcp://{server}/{tool}@sha256:{digest}``, and
labels are in the hash chain itself: the journal pins which contract each call was made
against. A config may pin a digest up front (``schema_digest``); a server whose schema moved
is then refused at start-up.

The value of a call is the tool's structured result (unwrapped from the SDK's
``{"result": ...}`` wrapper for a tool returning a plain value), else its text, else its
content blocks; a null result is ``None``, which a probe uses to say "never happened". When
the tool's input schema has an ``idempotency_key`` property, the call's key is passed in it
(MCP has no convention of its own), so a peer can deduplicate and a probe can look it up; a
mutating tool that reconciles without that property is refused at start-up (``_keyed``).
Results of MCP tools are untrusted unless the config declares ``trust: trusted``. What a model
is told of the tool (its declaration's ``description`` and ``input_schema``) is the config's
when it declares them, else the server's listed ``description`` and ``inputSchema``.

Failure classification, by the live-call table's one question (did it reach the peer?):
a result with ``isError`` is the tool's own answer — it ran and failed (``TerminalError``); a
JSON-RPC error is the server refusing the request (unknown tool, bad arguments: REJECTED); a
broken connection or process is IN_DOUBT — the declared recovery decides.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

from runplane.core.agents import EffectDecl
from runplane.core.canonical import canonical_bytes
from runplane.errors import ConfigError, TerminalError
from runplane.providers._config import McpServerSpec, ToolDecl
from runplane.providers._errors import PeerCallError, Reach
from runplane.providers._keyed import require_key
from runplane.providers._labels import source_label
from runplane.providers._schema import declared_schema
from runplane.wire import Label


class McpSession:
    """One open MCP client session, with the server's tool definitions listed once."""

    def __init__(
        self,
        spec: McpServerSpec,
        client: Any,
        definitions: Mapping[str, Mapping[str, Any]],
    ) -> None:
        self.spec = spec
        self._client = client
        self.definitions = dict(definitions)  # remote tool name → listed definition
        self.digests = {name: schema_digest(d) for name, d in self.definitions.items()}

    def takes_key(self, tool: str) -> bool:
        props = (self.definitions[tool].get("input_schema") or {}).get("properties") or {}
        return "idempotency_key" in props

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
        return _value(result.structured_content, content, self.definitions[tool])


def _value(structured: Any, content: list[dict[str, Any]], definition: Mapping[str, Any]) -> Any:
    if structured is not None:
        out = definition.get("output_schema") or {}
        wrapped = set(out.get("properties") or {}) == {"result"} and out.get("required") == [
            "result"
        ]
        return structured.get("result") if wrapped and isinstance(structured, dict) else structured
    if not content:
        return None
    if all(b.get("type") == "text" for b in content):
        return "".join(str(b.get("text", "")) for b in content)
    return content


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
        self.remote = server.remote_name(self.name)
        self.decl = _described(declared.decl, session.definitions[self.remote])
        # MCP has no convention for the key: it is passed only in an ``idempotency_key``
        # property of the listed schema, so a reconciling tool without one is refused here,
        # at start-up, when the executor builds its tools (``_keyed``).
        self.carries_key = session.takes_key(self.remote)
        require_key(
            self.decl,
            carries=self.carries_key,
            lacks="its input schema (as the server lists it) has no idempotency_key property",
        )
        self.schema_digest = session.digests[self.remote]
        base = source_label(
            self.name, trust=declared.trust or "untrusted", sensitivity=declared.sensitivity
        )
        assert base is not None
        # The contract the call was made against, in the label, so in the hash chain.
        pinned = f"mcp://{server.name}/{self.remote}@sha256:{self.schema_digest}"
        self.label = Label(trust=base.trust, sensitivity=base.sensitivity, provenance=(pinned,))
        self._session = session

    async def call(self, args: Mapping[str, Any], *, idempotency_key: str | None = None) -> Any:
        sent = dict(args)
        if idempotency_key is not None and self._session.takes_key(self.remote):
            sent.setdefault("idempotency_key", idempotency_key)
        return await self._session.call(self.remote, sent)


def _described(decl: EffectDecl, listed: Mapping[str, Any]) -> EffectDecl:
    """The declaration with what a model is told of the tool: the config's description and
    input schema when it declares them, else the server's listed ones. A listed schema that
    is not an object schema is left out (the tool stays callable; a loop offers it open)."""
    schema = decl.input_schema
    if schema is None and listed.get("input_schema") is not None:
        try:
            schema = declared_schema(decl.name, listed["input_schema"])
        except ConfigError:
            schema = None
    return dataclasses.replace(
        decl,
        description=decl.description or str(listed.get("description") or ""),
        input_schema=schema,
    )


async def _list_all(client: Any) -> dict[str, dict[str, Any]]:
    listed: dict[str, dict[str, Any]] = {}
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        for t in page.tools:
            listed[t.name] = {
                "name": t.name,
                "description": t.description or "",
                "input_schema": t.input_schema,
                "output_schema": t.output_schema,
            }
        cursor = page.next_cursor
        if not cursor:
            return listed


async def _client_for(spec: McpServerSpec, env: Mapping[str, str], stack: AsyncExitStack) -> Any:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    if spec.command:
        # The server process gets the executor's environment plus the config's ``env``.
        params = StdioServerParameters(
            command=spec.command[0], args=list(spec.command[1:]), env={**env, **spec.env}
        )
        return Client(params)
    assert spec.url is not None
    if spec.auth is None:
        return Client(spec.url)
    secret = env.get(spec.auth.secret_env)
    if not secret:
        raise ConfigError(
            f"MCP server {spec.name}: the secret variable {spec.auth.secret_env} is not set"
        )
    scheme = f"{spec.auth.scheme} " if spec.auth.scheme else ""
    http = await stack.enter_async_context(
        create_mcp_http_client(headers={spec.auth.header: scheme + secret})
    )
    return Client(streamable_http_client(spec.url, http_client=http))


async def open_mcp_sessions(
    servers: tuple[McpServerSpec, ...],
    stack: AsyncExitStack,
    env: Mapping[str, str],
) -> dict[str, McpSession]:
    """Connect to every server, list its tools once, check the offered ones exist (and match
    their pinned ``schema_digest``, if the config pins one); the sessions close with ``stack``."""
    sessions: dict[str, McpSession] = {}
    for spec in servers:
        try:
            client = await stack.enter_async_context(await _client_for(spec, env, stack))
            listed = await _list_all(client)
        except Exception as exc:
            raise ConfigError(f"MCP server {spec.name}: cannot connect: {exc}") from exc
        offered: dict[str, Mapping[str, Any]] = {}
        for declared in spec.tools:
            remote = spec.remote_name(declared.decl.name)
            if remote not in listed:
                raise ConfigError(
                    f"MCP server {spec.name} has no tool {remote!r} "
                    f"(it lists: {', '.join(sorted(listed)) or 'none'})"
                )
            offered[remote] = listed[remote]
            pinned = spec.pins.get(declared.decl.name)
            digest = schema_digest(listed[remote])
            if pinned is not None and pinned != digest:
                raise ConfigError(
                    f"MCP tool {declared.decl.name}: the server's schema digest {digest} "
                    f"is not the pinned {pinned}"
                )
        sessions[spec.name] = McpSession(spec, client, offered)
    return sessions
