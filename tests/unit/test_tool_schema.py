"""What a model is told of a tool: schemas from a ``@tool``'s signature and docstring, from the
tools config and from an MCP server's listing, and ``tool_spec`` offering them."""

from __future__ import annotations

import inspect
import keyword
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

from runplane.core.agents import EffectDecl
from runplane.core.turns import ToolSpec, tool_spec
from runplane.errors import ConfigError
from runplane.providers import ToolRegistry, parse_tools_config, tool
from runplane.providers._mcp import _described


def _registered(fn: Any, **kwargs: Any) -> EffectDecl:
    registry = ToolRegistry()
    tool(mutating=False, registry=registry, **kwargs)(fn)
    return registry[fn.__name__].decl


async def crm_lookup(
    customer_id: str,
    fields: list[Literal["name", "email"]] | None = None,
    *,
    limit: Annotated[int, Field(ge=1, description="at most this many")] = 5,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """Look a customer up in the CRM.

    Args:
        customer_id: the CRM's id,
            as printed on the ticket.
        fields (list): which fields to return.
        limit: ignored here, the Field's description wins.
    """
    return {}


def test_a_tool_function_describes_itself() -> None:
    spec = tool_spec(_registered(crm_lookup))
    assert spec.description == "Look a customer up in the CRM."
    props = spec.parameters["properties"]
    assert set(props) == {"customer_id", "fields", "limit"}  # the runtime's key is not offered
    assert props["customer_id"] == {
        "description": "the CRM's id, as printed on the ticket.",
        "type": "string",
    }
    assert props["fields"]["description"] == "which fields to return."
    assert props["limit"]["description"] == "at most this many"
    assert props["limit"]["minimum"] == 1
    assert spec.parameters["required"] == ["customer_id"]
    assert "title" not in spec.parameters and "title" not in props["customer_id"]
    jsonschema.validate({"customer_id": "c-1", "fields": ["email"]}, spec.parameters)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"customer_id": "c-1", "fields": ["password"]}, spec.parameters)


def test_declared_description_and_schema_win() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    decl = _registered(crm_lookup, description="Find someone.", input_schema=schema)
    assert (decl.description, decl.input_schema) == ("Find someone.", schema)
    assert _registered(crm_lookup, input_schema=schema).description.startswith("Look a customer")


def test_an_undescribable_signature_is_a_config_error_naming_the_tool() -> None:
    class Opaque:
        pass

    def takes_opaque(thing: Opaque) -> None: ...

    with pytest.raises(ConfigError, match=r"takes_opaque.*input_schema"):
        _registered(takes_opaque)
    with pytest.raises(ConfigError, match="describe an object"):
        _registered(crm_lookup, input_schema={"type": "string"})
    with pytest.raises(ConfigError, match="not a JSON Schema"):
        _registered(crm_lookup, input_schema={"type": "object", "properties": 3})


_TYPES: dict[Any, st.SearchStrategy[Any]] = {
    int: st.integers(),
    str: st.text(max_size=5),
    bool: st.booleans(),
    float: st.floats(allow_nan=False, allow_infinity=False),
    list[int]: st.lists(st.integers(), max_size=3),
}
_WRONG: dict[Any, Any] = {int: "x", str: 3, bool: "yes", float: "1.5", list[int]: {"a": 1}}


@st.composite
def signatures(draw: st.DrawFn) -> tuple[list[tuple[str, Any, bool]], dict[str, Any]]:
    names = draw(
        st.lists(
            st.text(alphabet="abcdefghij", min_size=1, max_size=6).filter(
                lambda n: not keyword.iskeyword(n)
            ),
            unique=True,
            max_size=5,
        )
    )
    params = [(n, draw(st.sampled_from(list(_TYPES))), draw(st.booleans())) for n in names]
    args = {n: draw(_TYPES[t]) for n, t, optional in params if not optional or draw(st.booleans())}
    return params, args


@settings(deadline=None, max_examples=60)  # pydantic builds a schema per example
@given(signatures())
def test_any_signature_becomes_a_schema_its_calls_satisfy(
    drawn: tuple[list[tuple[str, Any, bool]], dict[str, Any]],
) -> None:
    params, args = drawn

    def fn(**kwargs: Any) -> None: ...

    fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                n,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=t,
                default=_default(t) if optional else inspect.Parameter.empty,
            )
            for n, t, optional in params
        ]
        + [inspect.Parameter("idempotency_key", inspect.Parameter.KEYWORD_ONLY, default=None)]
    )
    fn.__annotations__ = {n: t for n, t, _ in params}
    schema = dict(tool_spec(_registered(fn)).parameters)
    assert set(schema["properties"]) == {n for n, _, _ in params}
    assert set(schema.get("required", ())) == {n for n, _, optional in params if not optional}
    jsonschema.validate(args, schema)
    for n, t, _ in params:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**args, n: _WRONG[t]}, schema)


def _default(t: Any) -> Any:
    return [] if t == list[int] else t()


def test_the_tools_config_declares_what_a_model_is_told() -> None:
    schema = {"type": "object", "properties": {"invoice_id": {"type": "string"}}}
    doc = {
        "tools": [
            {
                "name": "fetch_invoice",
                "method": "GET",
                "url": "http://127.0.0.1:1/invoices/{invoice_id}",
                "mutating": False,
                "description": "An invoice's amount.",
                "input_schema": schema,
            }
        ],
        "mcp_servers": [
            {
                "name": "files",
                "url": "http://127.0.0.1:1/mcp",
                "tools": [{"name": "read", "mutating": False}],
            }
        ],
    }
    config = parse_tools_config(doc, {}, source="t.yaml")
    decl = config.tools[0].declared.decl
    assert tool_spec(decl) == ToolSpec("fetch_invoice", "An invoice's amount.", schema)
    assert config.mcp_servers[0].tools[0].decl.input_schema is None  # the server's, later
    bad = {**doc["tools"][0], "input_schema": {"type": "array"}}
    with pytest.raises(ConfigError, match=r"fetch_invoice.*object"):
        parse_tools_config({"tools": [bad]}, {}, source="t.yaml")


def test_an_mcp_tool_is_described_by_its_listing_unless_the_config_says() -> None:
    listed = {
        "name": "read",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    plain = _described(EffectDecl("files/read", mutating=False), listed)
    assert (plain.description, plain.input_schema) == ("Read a file.", listed["input_schema"])
    own = EffectDecl("files/read", description="Mine.", input_schema={"type": "object"})
    assert (_described(own, listed).description, _described(own, listed).input_schema) == (
        "Mine.",
        {"type": "object"},
    )
    broken = _described(EffectDecl("files/read"), {**listed, "input_schema": {"type": "string"}})
    assert broken.input_schema is None
    assert tool_spec(broken).parameters == {"type": "object"}  # offered open, not as "no args"
