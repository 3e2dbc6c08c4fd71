"""Model providers and tools: the executor's outward calls.

* :class:`OpenAIProvider` — any OpenAI-compatible chat-completions endpoint (httpx);
  :class:`AnthropicProvider` — the Messages API, whose shape differs. Both speak tool calling
  in their protocol from one provider-neutral conversation (``runplane.core.turns``);
  :class:`ModelReplyError` is a reply that broke its turn's contract.
* :func:`tool` — declare a Python function in an agent module as a tool (``TOOLS``); its
  docstring and signature are what a model is told of it. ``MODELS``: model providers an
  agent module registers in Python (a framework adapter's, ``runplane.contrib``).
* :class:`HttpTool` — a tool that is one HTTP request; :class:`McpTool` — a tool on an MCP
  server (stdio or streamable HTTP), provenance ``tool://{server}/{tool}``.
* :func:`load_tools_config` — the tools config file (``RUNPLANE_TOOLS_CONFIG``): HTTP tools,
  model providers and MCP servers; :func:`build_tools` / :func:`build_providers` make the
  live objects, :class:`Offer` the names admission checks a capability's needs against.
* :class:`StreamingProvider` — a provider's ``stream``: the same generation, its text and
  tool-call fragments handed to a :data:`DeltaSink` as :class:`Delta`\ s as they arrive.
* :func:`refuse_unkeyed` — an agent declaring ``reconcile`` for a mutating tool that does not
  pass its idempotency key to the peer is refused at start-up (the tools refuse it of their
  own declarations when they are registered).
* :class:`PeerCallError` / :class:`Reach` — the "did it reach the peer?" classification the
  live-call runner retries by.

Each call is one attempt; timeouts, retries and concurrency bounds are the executor's.
"""

from __future__ import annotations

from runplane.providers._anthropic import AnthropicProvider
from runplane.providers._catalog import Offer, build_providers, build_tools, load_offer, offer_of
from runplane.providers._config import ToolsConfig, load_tools_config, parse_tools_config
from runplane.providers._errors import (
    ModelReplyError,
    PeerCallError,
    Reach,
    classify_status,
    classify_transport,
)
from runplane.providers._function_tool import FunctionTool
from runplane.providers._http_tool import HttpTool
from runplane.providers._keyed import refuse_unkeyed
from runplane.providers._mcp import McpSession, McpTool, open_mcp_sessions, schema_digest
from runplane.providers._openai import Completion, OpenAIProvider
from runplane.providers._registry import MODELS, TOOLS, ModelRegistry, ToolRegistry, tool
from runplane.providers._stream import Delta, DeltaSink, StreamingProvider

__all__ = [
    "MODELS",
    "TOOLS",
    "AnthropicProvider",
    "Completion",
    "Delta",
    "DeltaSink",
    "FunctionTool",
    "HttpTool",
    "McpSession",
    "McpTool",
    "ModelRegistry",
    "ModelReplyError",
    "Offer",
    "OpenAIProvider",
    "PeerCallError",
    "Reach",
    "StreamingProvider",
    "ToolRegistry",
    "ToolsConfig",
    "build_providers",
    "build_tools",
    "classify_status",
    "classify_transport",
    "load_offer",
    "load_tools_config",
    "offer_of",
    "open_mcp_sessions",
    "parse_tools_config",
    "refuse_unkeyed",
    "schema_digest",
    "tool",
]
