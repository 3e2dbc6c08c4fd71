"""A mutating tool whose recovery is ``reconcile`` must carry the call's idempotency key to its
peer, or it is refused when registered (``runplane.providers._keyed``): a probe cannot see a
request still in flight, so only the peer's dedupe by key keeps a repeated call to one effect."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runplane.cli import app
from runplane.core.agents import AgentSpec, EffectDecl, Recovery
from runplane.errors import ConfigError
from runplane.providers import (
    FunctionTool,
    HttpTool,
    McpSession,
    McpTool,
    ToolRegistry,
    parse_tools_config,
    refuse_unkeyed,
    tool,
)
from runplane.providers._keyed import REASON, needs_key

RECONCILE = EffectDecl("charge", mutating=True, recovery=Recovery.RECONCILE, probe="get_charge")


def _charge(amount: int) -> dict[str, int]:
    return {"amount": amount}


def _keyed_charge(amount: int, idempotency_key: str | None = None) -> dict[str, Any]:
    return {"amount": amount, "key": idempotency_key}


def test_a_reconciling_function_tool_without_a_key_parameter_is_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError) as refused:
        FunctionTool("charge", _charge, decl=RECONCILE)
    message = str(refused.value)
    assert REASON in message and "tool charge" in message and "idempotency_key" in message
    assert "\n" not in message  # one line


def test_the_tool_decorator_refuses_it_at_registration_and_registers_nothing() -> None:
    registry = ToolRegistry()
    with pytest.raises(ConfigError, match="reconcile needs an idempotency key"):
        tool("charge", recovery="reconcile", probe="get_charge", registry=registry)(_charge)
    assert "charge" not in registry


@pytest.mark.parametrize(
    "decl",
    [
        EffectDecl("charge", mutating=True, recovery=Recovery.REQUIRES_OPERATOR),
        EffectDecl("charge", mutating=True, recovery=Recovery.RETRY),
        EffectDecl("charge", mutating=True),  # undeclared recovery: requires_operator
        EffectDecl("charge", mutating=False, recovery=Recovery.RECONCILE, probe="get_charge"),
    ],
)
def test_what_does_not_reconcile_a_mutation_needs_no_key(decl: EffectDecl) -> None:
    assert not needs_key(decl)
    assert FunctionTool("charge", _charge, decl=decl).carries_key is False


async def test_a_function_taking_the_key_reconciles_and_gets_the_key() -> None:
    keyed = FunctionTool("charge", _keyed_charge, decl=RECONCILE)
    assert keyed.carries_key is True
    assert await keyed.call({"amount": 3}, idempotency_key="run/0/2") == {
        "amount": 3,
        "key": "run/0/2",
    }


def test_an_http_tool_carries_the_key_in_its_header() -> None:
    config = parse_tools_config(
        {
            "tools": [
                {
                    "name": "charge",
                    "method": "POST",
                    "url": "http://billing/charges",
                    "mutating": True,
                    "recovery": "reconcile",
                    "probe": "get_charge",
                }
            ]
        },
        {},
        source="t.yaml",
    )
    spec = config.tools[0]
    http = HttpTool(spec.name, spec.method, spec.url, decl=spec.declared.decl)
    assert http.carries_key is True and needs_key(http.decl)


def _session(properties: dict[str, Any]) -> tuple[Any, McpSession]:
    config = parse_tools_config(
        {
            "mcp_servers": [
                {
                    "name": "notes",
                    "url": "http://notes/mcp",
                    "tools": [
                        {
                            "name": "append_note",
                            "mutating": True,
                            "recovery": "reconcile",
                            "probe": "notes/find_note",
                        }
                    ],
                }
            ]
        },
        {},
        source="t.yaml",
    )
    server = config.mcp_servers[0]
    listed = {
        "append_note": {
            "name": "append_note",
            "description": "",
            "input_schema": {"type": "object", "properties": properties},
            "output_schema": None,
        }
    }
    return server, McpSession(server, object(), listed)


def test_an_mcp_tool_whose_listed_schema_takes_no_key_is_refused_at_start_up() -> None:
    server, session = _session({"note_id": {"type": "string"}})
    with pytest.raises(ConfigError) as refused:
        McpTool(server, server.tools[0], session)
    assert REASON in str(refused.value) and "notes/append_note" in str(refused.value)
    server, session = _session({"note_id": {"type": "string"}, "idempotency_key": {}})
    assert McpTool(server, server.tools[0], session).carries_key is True


async def _noop(ctx: Any, input: Any) -> None:
    return None


def test_an_agent_declaring_reconcile_over_a_tool_that_drops_the_key_is_refused() -> None:
    offered = {"charge": FunctionTool("charge", _charge, decl=EffectDecl("charge"))}
    spec = AgentSpec("pay", _noop, effects={"charge": RECONCILE})
    with pytest.raises(ConfigError, match="agent pay declares tool charge"):
        refuse_unkeyed(offered, [spec])
    keyed = {"charge": FunctionTool("charge", _keyed_charge, decl=EffectDecl("charge"))}
    refuse_unkeyed(keyed, [spec])  # the key reaches the peer: accepted
    refuse_unkeyed({}, [spec])  # not offered here: admission refuses such a run, not start-up


def test_policy_check_names_the_refused_tool_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "unkeyed_tools_mod.py").write_text(
        "from runplane.providers import tool\n"
        "@tool(recovery='reconcile', probe='get_charge')\n"
        "def charge(amount: int) -> dict:\n"
        "    return {'amount': amount}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "unkeyed_tools_mod", raising=False)
    result = CliRunner().invoke(app, ["policy", "check", "--agents", "unkeyed_tools_mod"])
    assert result.exit_code == 2, result.output
    assert "reconcile needs an idempotency key" in result.output
    assert "Traceback" not in result.output
