"""What a model is told of a tool: its description and the JSON Schema of its arguments.

A ``@tool`` function describes itself: its docstring is the description (a Google-style
``Args:`` section gives each parameter its own), its signature the schema. The schema is
pydantic's (already a dependency, and the reference for turning Python annotations into JSON
Schema: ``Annotated[int, Field(ge=1, description=...)]``, ``Literal``, dataclasses and models
all work), with the noise a model pays tokens for left out (titles). ``idempotency_key`` is the
runtime's to pass, never the model's, so it is not offered. An HTTP or MCP tool's schema is
declared (the tools config, or the MCP server's listed ``inputSchema``) and checked here to be
a JSON Schema of an object.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema
import pydantic
from pydantic.json_schema import GenerateJsonSchema

from runplane.errors import ConfigError

# Parameters the runtime fills in; a model is not offered them.
_RUNTIME_PARAMS = frozenset({"idempotency_key"})
_SECTION = re.compile(r"^(Args|Arguments|Parameters):\s*$")
_PARAM = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class _NoTitles(GenerateJsonSchema):
    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def function_schema(name: str, fn: Callable[..., Any]) -> tuple[str, dict[str, Any]]:
    """``(description, input schema)`` of the tool function ``fn``, from its docstring and
    signature; a parameter pydantic cannot describe is a ``ConfigError`` naming it."""
    description, documented = _docstring(inspect.getdoc(fn) or "")
    try:
        # A callable's TypeAdapter is its call schema: the arguments, as pydantic reads them.
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(fn)  # type: ignore[arg-type]
        schema = adapter.json_schema(schema_generator=_NoTitles)
    except (pydantic.PydanticUserError, TypeError, NameError) as exc:
        raise ConfigError(
            f"tool {name}: its signature cannot be described as a JSON Schema ({exc}); "
            "declare it: @tool(input_schema={...})"
        ) from exc
    schema.pop("title", None)
    properties = {
        k: v for k, v in (schema.get("properties") or {}).items() if k not in _RUNTIME_PARAMS
    }
    for param, text in documented.items():
        if param in properties and "description" not in properties[param]:
            properties[param] = {"description": text, **properties[param]}
    schema["properties"] = properties
    required = [r for r in schema.get("required") or () if r not in _RUNTIME_PARAMS]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    return description, schema


def docstring_description(fn: Callable[..., Any]) -> str:
    """The description of a tool function: its docstring without the ``Args:`` section."""
    return _docstring(inspect.getdoc(fn) or "")[0]


def _docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (the docstring without its ``Args:`` section) and each documented
    parameter's text: a section's lines at its first indent name a parameter, deeper ones
    continue its text; the section ends at the next unindented line."""
    kept: list[str] = []
    params: dict[str, str] = {}
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        if not _SECTION.match(lines[i].strip()):
            kept.append(lines[i])
            i += 1
            continue
        i += 1
        indent: int | None = None
        current: str | None = None
        while i < len(lines) and (not lines[i].strip() or lines[i][:1].isspace()):
            line = lines[i]
            i += 1
            if not line.strip():
                continue
            depth = len(line) - len(line.lstrip())
            indent = depth if indent is None else indent
            match = _PARAM.match(line.strip())
            if depth == indent and match:
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(kept).strip(), params


def declared_schema(name: str, schema: Any) -> dict[str, Any]:
    """A declared input schema, checked: a valid JSON Schema whose type is ``object``."""
    if not isinstance(schema, Mapping):
        raise ConfigError(f"tool {name}: input_schema must be a mapping (a JSON Schema)")
    if schema.get("type") != "object":
        raise ConfigError(f"tool {name}: input_schema must describe an object (type: object)")
    try:
        jsonschema.validators.validator_for(schema).check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        raise ConfigError(f"tool {name}: input_schema is not a JSON Schema: {exc.message}") from exc
    return dict(schema)
