"""The tools config (HTTP tools, model providers, MCP servers), ``@tool``, and the offer
admission checks a capability's needs against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from runplane.core.agents import AgentSpec, EffectDecl, Recovery
from runplane.errors import ConfigError
from runplane.providers import (
    AnthropicProvider,
    HttpTool,
    OpenAIProvider,
    ToolRegistry,
    build_providers,
    build_tools,
    load_offer,
    load_tools_config,
    offer_of,
    parse_tools_config,
    tool,
)
from runplane.providers._config import interpolate
from runplane.wire import Sensitivity, Trust
from services.admission.decide import CapabilitySpec, Refusal
from services.admission.serve import capabilities_from

ROOT = Path(__file__).resolve().parents[2]


def _doc(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "tools": [
            {
                "name": "crm_lookup",
                "method": "GET",
                "url": "${CRM_URL:-http://127.0.0.1:1}/customers/{customer_id}",
                "mutating": False,
                "sensitivity": "confidential",
                "auth": {"secret_env": "CRM_TOKEN"},
            }
        ],
        "models": [
            {"name": "local", "api": "openai", "base_url": "http://127.0.0.1:2/v1", "model": "m"},
            {
                "name": "claude",
                "api": "anthropic",
                "base_url": "https://api.anthropic.com",
                "model": "claude-x",
                "secret_env": "ANTHROPIC_API_KEY",
            },
        ],
    }
    doc.update(extra)
    return doc


def test_interpolation_fills_env_and_defaults_and_keeps_placeholders() -> None:
    env = {"A": "http://a"}
    assert interpolate("${A}/x/{id}", env, "t") == "http://a/x/{id}"
    assert interpolate("${B:-http://b}/{id}", env, "t") == "http://b/{id}"
    with pytest.raises(ConfigError, match="B is not set"):
        interpolate("${B}/x", env, "t")


def test_parse_builds_tools_models_and_names() -> None:
    config = parse_tools_config(_doc(), {"CRM_URL": "http://crm"}, source="f")
    [crm] = config.tools
    assert crm.url == "http://crm/customers/{customer_id}"
    assert crm.declared.decl.mutating is False
    assert crm.declared.decl.effective_recovery is Recovery.RETRY
    # A models: section adds providers; the default openai one stays (issue 30).
    assert config.model_names() == {"local", "claude", "openai"}


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"api_key": "sk-123"}, "secret"),
        ({"token": "x"}, "secret"),
        ({"mutating": None}, None),
        ({"colour": "red"}, "unknown field"),
        ({"url": "ftp://x"}, "http"),
        ({"recovery": "reconcile"}, "probe"),
    ],
)
def test_a_bad_tool_is_refused_with_its_place(patch: dict[str, Any], message: str | None) -> None:
    doc = _doc()
    entry = dict(doc["tools"][0])
    if patch.get("mutating", True) is None:
        entry.pop("mutating")
        message = "mutating"
    else:
        entry.update(patch)
    doc["tools"] = [entry]
    with pytest.raises(ConfigError, match=message) as info:
        parse_tools_config(doc, {}, source="tools.yaml")
    assert "tools.yaml: tools[0]" in str(info.value)


def test_a_file_without_models_offers_the_default_openai() -> None:
    config = parse_tools_config({"tools": []}, {"RUNPLANE_OPENAI_MODEL": "x"}, source="f")
    assert config.model_names() == {"openai"}
    assert config.models[0].model == "x"


def test_a_models_section_naming_openai_replaces_the_default() -> None:
    doc = {"models": [{"name": "openai", "api": "openai", "base_url": "http://m/v1", "model": "y"}]}
    config = parse_tools_config(doc, {}, source="f")
    assert [(m.name, m.model) for m in config.models] == [("openai", "y")]


def test_several_files_comma_separated_add_up() -> None:
    root = Path(__file__).resolve().parents[2] / "examples" / "tools"
    both = load_tools_config(f"{root / 'billing.yaml'},{root / 'quote.yaml'}", {})
    billing = load_tools_config(root / "billing.yaml", {})
    assert set(both.tool_names()) == set(billing.tool_names()) | {"fx_rate"}
    assert both.model_names() == {"openai"}
    with pytest.raises(ConfigError, match="declared twice"):
        load_tools_config(f"{root / 'quote.yaml'},{root / 'quote.yaml'}", {})


def test_mcp_tools_are_named_server_slash_tool() -> None:
    doc = {
        "mcp_servers": [
            {
                "name": "files",
                "command": ["python", "-m", "srv"],
                "tools": [{"name": "read", "mutating": False}],
            }
        ]
    }
    config = parse_tools_config(doc, {}, source="f")
    assert config.tool_names() == ["files/read"]
    assert config.mcp_servers[0].remote_name("files/read") == "read"
    with pytest.raises(ConfigError, match="exactly one"):
        parse_tools_config(
            {"mcp_servers": [{"name": "x", "tools": [{"name": "a", "mutating": False}]}]},
            {},
            source="f",
        )


async def test_build_reads_secrets_from_the_environment_only() -> None:
    config = parse_tools_config(_doc(), {}, source="f")
    with pytest.raises(ConfigError, match="CRM_TOKEN is not set"):
        build_tools(config, None, {}, python_tools=ToolRegistry())
    env = {"CRM_TOKEN": "s3cret", "ANTHROPIC_API_KEY": "ak"}
    async with httpx.AsyncClient() as client:
        tools = build_tools(config, client, env, python_tools=ToolRegistry())
        providers = build_providers(config, client, env)
    crm = tools["crm_lookup"]
    assert isinstance(crm, HttpTool)
    assert crm._headers == {"Authorization": "Bearer s3cret"}
    assert "s3cret" not in repr(crm.__dict__.get("url"))
    assert crm.label is not None and crm.label.sensitivity is Sensitivity.CONFIDENTIAL
    assert isinstance(providers["local"], OpenAIProvider)
    assert isinstance(providers["claude"], AnthropicProvider)


def test_tool_decorator_registers_with_its_declaration() -> None:
    registry = ToolRegistry()

    @tool(mutating=False, timeout_s=2, trust="untrusted", registry=registry)
    def weather(city: str) -> dict[str, str]:
        return {"city": city}

    registered = registry["weather"]
    assert registered.decl == EffectDecl("weather", mutating=False, timeout_s=2, in_process=True)
    assert registered.label is not None and registered.label.trust is Trust.UNTRUSTED
    with pytest.raises(ConfigError, match="already registered"):
        tool("weather", registry=registry)(lambda: None)


async def _noop(ctx: Any, input: Any) -> None:
    return None


def test_admission_refuses_a_capability_whose_tool_or_model_is_not_offered() -> None:
    spec = AgentSpec(
        "quote",
        _noop,
        effects={
            "charge": EffectDecl("charge", recovery=Recovery.RECONCILE, probe="get_charge"),
        },
        models=frozenset({"claude"}),
    )
    config = parse_tools_config(_doc(), {}, source="f")
    offer = offer_of(config, ToolRegistry())
    reason = spec.unavailable(offer.tools, offer.models)
    assert reason == "quote needs tool(s) charge, get_charge, which the executor does not offer"
    assert spec.unavailable({"charge", "get_charge"}, {"claude"}) is None
    assert spec.unavailable({"charge", "get_charge"}, {"openai"}) == (
        "quote needs model provider(s) claude, which the executor does not offer"
    )

    from runplane.core import AgentRegistry

    caps = capabilities_from(AgentRegistry([spec]), offer)
    assert caps["quote"].unavailable == reason
    assert Refusal.UNAVAILABLE.value == "unavailable"
    assert CapabilitySpec().unavailable is None


def test_admission_offer_reads_names_without_secrets_or_urls() -> None:
    # The example billing config, with no variable set: admission needs only the names.
    offer = load_offer(ROOT / "examples" / "tools" / "billing.yaml", {})
    assert {"fetch_invoice", "charge_card", "get_charge"} <= offer.tools
    assert offer.models == {"openai"}


async def test_anthropic_adapter_speaks_the_messages_api() -> None:
    from runplane.fakes._http import LoopbackServer, Request, Response
    from runplane.providers import PeerCallError

    seen: list[Request] = []

    def route(req: Request) -> Response:
        seen.append(req)
        if req.headers.get("x-api-key") != "ak":
            return Response(401, {"type": "error", "error": {"message": "bad key"}})
        return Response(
            200,
            {
                "content": [{"type": "text", "text": "hello "}, {"type": "text", "text": "there"}],
                "usage": {"input_tokens": 7, "output_tokens": 2},
            },
        )

    server = LoopbackServer(route)
    server.start()
    try:
        provider = AnthropicProvider(name="claude", base_url=server.url, model="c-1", api_key="ak")
        prompt = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
        gen = await provider.generate("default", prompt, {"temperature": 0})
        wrong = AnthropicProvider(name="claude", base_url=server.url, model="c-1", api_key="x")
        with pytest.raises(PeerCallError) as info:
            await wrong.generate("c-2", "hi", {})
    finally:
        server.stop()
    assert (gen.text, gen.tokens_in, gen.tokens_out) == ("hello there", 7, 2)
    assert seen[0].path == "/v1/messages"
    assert seen[0].headers.get("anthropic-version") == "2023-06-01"
    assert seen[0].body == {
        "model": "c-1",
        "max_tokens": 1024,
        "system": "be brief",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0,
    }
    assert (info.value.status, info.value.retryable) == (401, False)


def test_the_example_tools_are_the_default_only_with_the_example_agents() -> None:
    from runplane.config import Settings

    assert Settings.from_env({}).tools_config == str(ROOT / "examples" / "tools" / "billing.yaml")
    assert Settings.from_env({"RUNPLANE_AGENT_MODULES": "my.agents"}).tools_config is None
    own = {"RUNPLANE_AGENT_MODULES": "my.agents", "RUNPLANE_TOOLS_CONFIG": "/etc/t.yaml"}
    assert Settings.from_env(own).tools_config == "/etc/t.yaml"
