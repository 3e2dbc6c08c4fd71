"""What an executor offers: the tools config plus the Python tools of the agent modules.

* :class:`Offer` — the names only (tools, model providers): what admission checks a
  capability's needs against. Building it reads no secret.
* :func:`build_tools` / :func:`build_providers` — the live objects the executor calls, with
  their secrets read from the environment here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from runplane.core.agents import ModelProvider, Tool
from runplane.errors import ConfigError
from runplane.providers._anthropic import AnthropicProvider
from runplane.providers._config import (
    Auth,
    HttpToolSpec,
    ModelSpec,
    ToolsConfig,
    load_tools_config,
)
from runplane.providers._http_tool import HttpTool
from runplane.providers._labels import source_label
from runplane.providers._mcp import McpSession, McpTool
from runplane.providers._openai import OpenAIProvider
from runplane.providers._registry import MODELS, TOOLS, ToolRegistry


@dataclass(frozen=True)
class Offer:
    """The tool and model-provider names an executor serves."""

    tools: frozenset[str]
    models: frozenset[str]


def offer_of(config: ToolsConfig, python_tools: Mapping[str, Tool] | None = None) -> Offer:
    """The names of ``config``'s tools and models plus the registered Python tools."""
    registered = TOOLS if python_tools is None else python_tools
    clash = sorted(set(config.tool_names()) & set(registered))
    if clash:
        raise ConfigError(f"tool {clash[0]!r} is both in the tools config and a Python @tool")
    _refuse_model_clash(config)
    return Offer(
        tools=frozenset(config.tool_names()) | frozenset(registered),
        models=frozenset(config.model_names()) | frozenset(MODELS),
    )


def _refuse_model_clash(config: ToolsConfig) -> None:
    both = sorted(set(config.model_names()) & set(MODELS))
    if both:
        raise ConfigError(f"model provider {both[0]!r} is both in the tools config and in Python")


class _NamesOnly(dict[str, str]):
    """An environment for reading names only: a ``${NAME}`` the process does not set (a URL
    only the executor's pods define) is not admission's concern, so it reads as a
    placeholder URL instead of failing start-up."""

    def get(self, key: str, default: str | None = None) -> str:  # type: ignore[override]
        return super().get(key) or "http://unset.invalid"


def load_offer(path: str | Path | None, env: Mapping[str, str]) -> Offer:
    """What admission needs: the offer of the config at ``path`` (after the agent modules,
    whose ``@tool`` functions count, have been imported). Reads no secret."""
    return offer_of(load_tools_config(path, _NamesOnly(env)))


def _secret(auth: Auth | None, env: Mapping[str, str], where: str) -> str | None:
    if auth is None:
        return None
    value = env.get(auth.secret_env)
    if not value:
        raise ConfigError(f"{where}: the secret variable {auth.secret_env} is not set")
    return value


def _http_tool(
    spec: HttpToolSpec, client: httpx.AsyncClient | None, env: Mapping[str, str]
) -> HttpTool:
    secret = _secret(spec.auth, env, f"tool {spec.name}")
    headers: dict[str, str] = {}
    if spec.auth is not None and secret is not None:
        scheme = f"{spec.auth.scheme} " if spec.auth.scheme else ""
        headers[spec.auth.header] = scheme + secret
    d = spec.declared
    return HttpTool(
        spec.name,
        spec.method,
        spec.url,
        decl=d.decl,
        not_found_is_none=spec.not_found_is_none,
        client=client,
        headers=headers,
        label=source_label(spec.name, trust=d.trust, sensitivity=d.sensitivity),
    )


def build_tools(
    config: ToolsConfig,
    client: httpx.AsyncClient | None,
    env: Mapping[str, str],
    *,
    python_tools: ToolRegistry | None = None,
    mcp_sessions: Mapping[str, McpSession] | None = None,
) -> dict[str, Tool]:
    """Tool name → tool: the HTTP tools, the MCP tools, the registered Python tools.

    MCP tools call through ``mcp_sessions`` (server name → an open session, see
    :func:`runplane.providers.open_mcp_sessions`); without one for a server configured
    with tools, this is a ``ConfigError``."""
    offer_of(config, TOOLS if python_tools is None else python_tools)  # refuses a clash
    tools: dict[str, Tool] = {s.name: _http_tool(s, client, env) for s in config.tools}
    sessions = mcp_sessions or {}
    for server in config.mcp_servers:
        session = sessions.get(server.name)
        if session is None:
            raise ConfigError(f"MCP server {server.name}: no session opened for it")
        for declared in server.tools:
            tools[declared.decl.name] = McpTool(server, declared, session)
    tools.update(TOOLS if python_tools is None else python_tools)
    return tools


def _provider(spec: ModelSpec, client: httpx.AsyncClient, env: Mapping[str, str]) -> ModelProvider:
    # The openai default names RUNPLANE_OPENAI_API_KEY and may run without it (a loopback
    # fake); any other named secret must be set.
    optional = spec.auth is not None and spec.auth.secret_env == "RUNPLANE_OPENAI_API_KEY"
    key = (
        env.get("RUNPLANE_OPENAI_API_KEY") or None
        if optional
        else _secret(spec.auth, env, f"model provider {spec.name}")
    )
    if spec.api == "anthropic":
        return AnthropicProvider(
            name=spec.name, base_url=spec.base_url, model=spec.model, api_key=key, client=client
        )
    return OpenAIProvider(
        name=spec.name, base_url=spec.base_url, model=spec.model, api_key=key, client=client
    )


def build_providers(
    config: ToolsConfig, client: httpx.AsyncClient, env: Mapping[str, str]
) -> dict[str, ModelProvider]:
    """Provider name → provider: one per configured model provider, and the providers the
    agent modules registered in Python (``MODELS``)."""
    _refuse_model_clash(config)
    return {**{m.name: _provider(m, client, env) for m in config.models}, **MODELS}
