"""Run the executor: import the agents, build providers and tools, serve until stopped."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import threading
from collections.abc import Mapping
from contextlib import AsyncExitStack
from urllib.parse import urlsplit

import httpx

from runplane.config import Settings
from runplane.core import AgentRegistry, ModelProvider, Tool
from runplane.core.agents import import_agent_modules
from runplane.providers import refuse_unkeyed
from runplane.serving.health import Health
from runplane.serving.shell import make_app, run_http
from services.executor.catalog import offered, offered_with_mcp
from services.executor.executor import Executor
from services.executor.settings import ExecutorSettings
from services.executor.topology import SERVICE

log = logging.getLogger(__name__)


def load_agents(modules: tuple[str, ...]) -> AgentRegistry:
    """Import ``RUNPLANE_AGENT_MODULES``; importing a module registers its agents."""
    return import_agent_modules(modules)  # the one loader, shared with admission


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def missing_key_warnings(settings: ExecutorSettings) -> list[str]:
    """Providers configured for a remote endpoint without an API key (review m13).

    A warning, not a refusal: a loopback endpoint (the local fake) or an in-cluster gateway
    may need no key. Without one, the first model call would be refused at run time instead.
    """
    if settings.openai_api_key or _is_loopback(settings.openai_base_url):
        return []
    return [
        f"RUNPLANE_OPENAI_API_KEY is not set but RUNPLANE_OPENAI_BASE_URL is "
        f"{settings.openai_base_url}: model calls go out without a key and will be refused "
        "unless that endpoint needs none"
    ]


def build(
    settings: ExecutorSettings,
    client: httpx.AsyncClient,
    *,
    health: Health | None = None,
    tools: Mapping[str, Tool] | None = None,
    providers: Mapping[str, ModelProvider] | None = None,
    registry: AgentRegistry | None = None,
) -> Executor:
    """An executor, not started (tests run ``asyncio.run(executor.run(stop))`` in a thread).

    Tools and providers default to what the configuration offers (``catalog``), read after
    the agent modules are imported so their ``@tool`` functions count."""
    agents = registry if registry is not None else load_agents(settings.modules)
    if tools is None or providers is None:
        own_tools, own_providers = offered(settings, client)
        tools = own_tools if tools is None else tools
        providers = own_providers if providers is None else providers
    return Executor(
        settings,
        registry=agents,
        tools=tools,
        providers=providers,
        probe=health.probe("executor") if health is not None else None,
    )


async def _serve(settings: ExecutorSettings, stop: threading.Event, health: Health) -> None:
    limits = httpx.Limits(
        max_connections=settings.max_inflight, max_keepalive_connections=settings.max_inflight
    )
    async with (
        httpx.AsyncClient(
            limits=limits, timeout=httpx.Timeout(settings.call_timeout_s, connect=5.0)
        ) as client,
        AsyncExitStack() as stack,
    ):
        registry = load_agents(settings.modules)
        tools, providers = await offered_with_mcp(settings, client, stack)
        refuse_unkeyed(tools, registry.values())  # a one-line ConfigError at start-up
        executor = build(
            settings, client, health=health, tools=tools, providers=providers, registry=registry
        )
        await executor.run(stop)


def serve(settings: Settings, stop: threading.Event) -> None:
    """Serve until ``stop`` is set (``runplane serve executor``)."""
    own = ExecutorSettings.from_env(base=settings)
    for warning in missing_key_warnings(own):
        log.warning(warning)
    health = Health()
    with run_http(make_app(health), settings.http_host, settings.http_port(SERVICE), stop):
        asyncio.run(_serve(own, stop, health))
