"""Where values come from: argument sources, step lists, outputs and prompt templates. Pure.

A source is ``{from: input|generation|<earlier step id>, path: $.a.b[0]}`` or
``{const: <JSON>}``; a template interpolates ``{{ input.a.b }}`` only. Each parser reports
its problems to the :class:`Checker` and returns what it could build.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runplane.core.manifest._model import (
    PLACEHOLDER,
    RESERVED_SOURCES,
    STEP_ID,
    Checker,
    Source,
    ToolStep,
    join_path,
    type_name,
)
from runplane.core.plan import parse_path


def check_input_path(
    c: Checker, path: str, parts: tuple[str | int, ...], schema: Mapping[str, Any] | None
) -> None:
    """A path into the input names a declared property when the schema closes the object."""
    if not parts or schema is None or schema.get("additionalProperties") is not False:
        return
    props = schema.get("properties")
    if isinstance(props, Mapping) and parts[0] not in props:
        c.add(
            path,
            f"input has no property {parts[0]!r} (declared: {', '.join(sorted(props)) or 'none'})",
        )


def template(c: Checker, value: Any, path: str, schema: Mapping[str, Any] | None) -> str | None:
    text = c.string(value, path)
    if text is None:
        return None
    for match in PLACEHOLDER.finditer(text):
        expr = match.group(1)
        parts = (
            parse_path("$" + expr[len("input") :])
            if expr == "input" or expr.startswith(("input.", "input["))
            else None
        )
        if parts is None:
            c.add(
                path,
                f"placeholder {match.group(0)!r}: only {{{{ input }}}} and {{{{ input.a.b[0] }}}} are allowed",
            )
        else:
            check_input_path(c, path, parts, schema)
    if "{{" in PLACEHOLDER.sub("", text) or "}}" in PLACEHOLDER.sub("", text):
        c.add(path, "unbalanced '{{' or '}}'")
    return text


def parse_source(
    c: Checker, value: Any, path: str, known: Sequence[str], schema: Mapping[str, Any] | None
) -> Source | None:
    if isinstance(value, Mapping) and "const" in value:
        if len(value) != 1:
            for key in value:
                if key != "const":
                    c.add(
                        join_path(path, str(key)),
                        f"unknown field {str(key)!r} beside const (a constant is {{const: value}} alone)",
                    )
            return None
        return Source("const", (), value["const"])
    s = c.fields(value, path, ("from",), ("path",))
    if s is None or "from" not in s:
        return None
    root = s["from"]
    if root not in known:
        later = "" if not isinstance(root, str) else f" (sources here: {', '.join(known)})"
        c.add(f"{path}.from", f"{root!r} is not a source available here{later}")
        return None
    parts = parse_path(s.get("path", "$"))
    if parts is None:
        c.add(f"{path}.path", f"{s.get('path')!r} is not a path like $ or $.a.b[0]")
        return None
    if root == "input":
        check_input_path(c, f"{path}.path", parts, schema)
    if root == "generation" and parts and parts[0] != "text":
        c.add(f"{path}.path", "the generation has one field: $.text")
        return None
    return Source(str(root), parts)


def parse_steps(
    c: Checker,
    value: Any,
    path: str,
    tools: set[str],
    roots: tuple[str, ...],
    schema: Mapping[str, Any] | None,
    ids: list[str],
) -> tuple[ToolStep, ...]:
    if not isinstance(value, list):
        c.add(path, f"must be a list, got {type_name(value)}")
        return ()
    steps: list[ToolStep] = []
    known = list(roots)
    for i, item in enumerate(value):
        at = f"{path}[{i}]"
        s = c.fields(item, at, ("id", "tool"), ("args",))
        if s is None:
            continue
        step_id = c.string(s.get("id"), f"{at}.id", STEP_ID, "step id") if "id" in s else None
        if step_id is not None and (step_id in RESERVED_SOURCES or step_id in known):
            c.add(
                f"{at}.id",
                f"{step_id!r} is {'reserved' if step_id in RESERVED_SOURCES else 'already used by an earlier step'}",
            )
            step_id = None
        tool = c.string(s.get("tool"), f"{at}.tool") if "tool" in s else None
        if tool is not None and tool not in tools:
            c.add(
                f"{at}.tool",
                f"tool {tool!r} is not declared in spec.tools (declared: {', '.join(sorted(tools)) or 'none'})",
            )
            tool = None
        args: dict[str, Source] = {}
        raw_args = s.get("args", {})
        if not isinstance(raw_args, Mapping):
            c.add(
                f"{at}.args",
                f"must be a mapping of argument name to source, got {type_name(raw_args)}",
            )
        else:
            for arg, src in raw_args.items():
                parsed = parse_source(c, src, f"{at}.args.{arg}", known, schema)
                if parsed is not None:
                    args[str(arg)] = parsed
        if step_id is not None:
            known.append(step_id)  # later steps may use this one's output, never earlier ones
            if tool is not None:
                steps.append(ToolStep(step_id, tool, args))
    # A step refused for its tool still names a source (no second, cascading refusal).
    ids.extend(known[len(roots) :])
    return tuple(steps)


def parse_output(
    c: Checker, value: Any, steps: set[str], schema: Mapping[str, Any] | None
) -> Mapping[str, Source] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        c.add(
            "spec.execution.output",
            f"must be a non-empty mapping of name to source, got {type_name(value)}",
        )
        return None
    known = ["input", *sorted(steps)]
    out: dict[str, Source] = {}
    for key, src in value.items():
        parsed = parse_source(c, src, f"spec.execution.output.{key}", known, schema)
        if parsed is not None:
            out[str(key)] = parsed
    return out
