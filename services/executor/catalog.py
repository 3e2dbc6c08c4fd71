"""The tools and model providers the stock executor serves, from configuration only.

``runplane serve executor`` offers exactly: the tools config's HTTP tools, model providers and
MCP servers (``RUNPLANE_TOOLS_CONFIG``, see ``runplane.providers._config``), plus the
``@tool`` functions of the agent modules it imports (``runplane.providers.TOOLS``). Nothing
is hard-wired: the refund example's billing tools are ``examples/tools/billing.yaml``.
Admission loads the same offer (names only) to refuse a run whose agent needs what is missing.
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack

import httpx

from runplane.core import ModelProvider, Tool
from runplane.providers import (
    ToolsConfig,
    build_providers,
    build_tools,
    load_tools_config,
    open_mcp_sessions,
)
from services.executor.settings import ExecutorSettings


def config_env(settings: ExecutorSettings) -> dict[str, str]:
    """The environment the config's ``${NAME}`` and secrets are read from: the process's,
    with the executor's own settings for the variables it also carries (tests set those on
    the settings object rather than in the environment)."""
    env = dict(os.environ)
    env["RUNPLANE_BILLING_URL"] = settings.billing_url
    env["RUNPLANE_OPENAI_BASE_URL"] = settings.openai_base_url
    env["RUNPLANE_OPENAI_MODEL"] = settings.openai_model
    if settings.openai_api_key:
        env["RUNPLANE_OPENAI_API_KEY"] = settings.openai_api_key
    return env


def load_config(settings: ExecutorSettings) -> ToolsConfig:
    return load_tools_config(settings.base.tools_config, config_env(settings))


def offered(
    settings: ExecutorSettings, client: httpx.AsyncClient
) -> tuple[dict[str, Tool], dict[str, ModelProvider]]:
    """Tools and providers without MCP servers (a config naming one needs
    :func:`offered_with_mcp`, which opens their sessions)."""
    config = load_config(settings)
    env = config_env(settings)
    return build_tools(config, client, env), build_providers(config, client, env)


async def offered_with_mcp(
    settings: ExecutorSettings, client: httpx.AsyncClient, stack: AsyncExitStack
) -> tuple[dict[str, Tool], dict[str, ModelProvider]]:
    """Tools and providers, with a session opened (and its tools listed once) per MCP
    server; the sessions close with ``stack``."""
    config = load_config(settings)
    env = config_env(settings)
    sessions = await open_mcp_sessions(config.mcp_servers, stack, env)
    return (
        build_tools(config, client, env, mcp_sessions=sessions),
        build_providers(config, client, env),
    )
