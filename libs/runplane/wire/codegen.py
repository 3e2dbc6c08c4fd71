"""Generate ``_records.py`` from ``schemas/*.avsc``: ``python -m runplane.wire.codegen``.

The schemas are the source of truth; the generated module mirrors them as frozen dataclasses
(one per Avro record) and ``enum.StrEnum`` classes (one per Avro enum, values = symbols). It
also embeds each named type's *self-contained* schema JSON (every referenced named type
inlined at its first use), so the installed package needs no ``schemas/`` folder (the Docker
image ships only ``libs/``) and every fingerprint and registry subject is computed from a
schema that stands on its own.

``tests/unit/test_wire_codegen.py`` regenerates in memory and fails when the file is stale.
"""

from __future__ import annotations

import copy
import json
import keyword
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastavro.schema import UnknownType, parse_schema

from runplane.errors import SchemaError

SCHEMA_DIR = Path(__file__).resolve().parents[3] / "schemas"
OUTPUT = Path(__file__).resolve().parent / "_records.py"

PRIMITIVES: Mapping[str, str] = {
    "null": "None",
    "boolean": "bool",
    "int": "int",
    "long": "int",
    "float": "float",
    "double": "float",
    "bytes": "bytes",
    "string": "str",
}

Json = Any  # an Avro schema fragment as loaded from JSON

# Fields whose Avro string is a value type of ours, validated where it is built and decoded
# (``runplane.wire._validate``): by field name, the one place that says so.
TYPED_STRINGS: Mapping[str, str] = {"tenant": "TenantId"}


@dataclass(frozen=True)
class NamedType:
    """A record or enum found anywhere in the schema files (top level or inline)."""

    fullname: str
    schema: Mapping[str, Json]  # as written, with the namespace made explicit

    @property
    def short(self) -> str:
        return self.fullname.rsplit(".", 1)[-1]

    @property
    def is_enum(self) -> bool:
        return bool(self.schema["type"] == "enum")


def _qualify(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def load_files(schema_dir: Path = SCHEMA_DIR) -> dict[str, Json]:
    """Every ``*.avsc`` in ``schema_dir``, keyed by the full name of its top-level type."""
    out: dict[str, Json] = {}
    for path in sorted(schema_dir.glob("*.avsc")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        out[_qualify(schema["name"], schema.get("namespace"))] = schema
    if not out:
        raise SchemaError(f"no .avsc files in {schema_dir}")
    return out


def parse_in_dependency_order(files: Mapping[str, Json]) -> list[str]:
    """Parse every file with fastavro, deferring files whose references are not parsed yet.

    Returns the file names in an order in which each one's references precede it; fastavro's
    own parser is the judge of validity, so a schema it refuses fails the codegen.
    """
    named: dict[str, Json] = {}
    pending = dict(files)
    order: list[str] = []
    while pending:
        progressed = False
        for name in list(pending):
            try:
                parse_schema(copy.deepcopy(pending[name]), named_schemas=named)
            except UnknownType:
                continue
            order.append(name)
            del pending[name]
            progressed = True
        if not progressed:
            raise SchemaError(f"unresolvable references in {sorted(pending)}")
    return order


def collect_named(files: Mapping[str, Json], order: Iterable[str]) -> dict[str, NamedType]:
    """Every record and enum, including those defined inline inside another record."""
    found: dict[str, NamedType] = {}

    def walk(node: Json, namespace: str | None) -> None:
        if isinstance(node, list):
            for branch in node:
                walk(branch, namespace)
        elif isinstance(node, dict):
            kind = node["type"]
            if kind in ("record", "enum", "error"):
                ns = node.get("namespace", namespace)
                full = _qualify(node["name"], ns)
                found[full] = NamedType(full, {**node, "namespace": full.rsplit(".", 1)[0]})
                if kind != "enum":
                    for f in node["fields"]:
                        walk(f["type"], full.rsplit(".", 1)[0])
            elif kind == "array":
                walk(node["items"], namespace)
            elif kind == "map":
                walk(node["values"], namespace)
            elif kind == "fixed":
                raise SchemaError("fixed types are not supported by the codegen")

    for name in order:
        walk(files[name], None)
    return found


def self_contained(name: str, named: Mapping[str, NamedType]) -> Json:
    """The schema of ``name`` with each referenced named type inlined once, at first use."""
    defined: set[str] = set()

    def expand(node: Json, namespace: str) -> Json:
        if isinstance(node, str):
            if node in PRIMITIVES:
                return node
            full = _qualify(node, namespace)
            if full in defined:
                return full
            return expand(dict(named[full].schema), namespace)
        if isinstance(node, list):
            return [expand(b, namespace) for b in node]
        kind = node["type"]
        if kind in ("record", "enum"):
            full = _qualify(node["name"], node.get("namespace", namespace))
            defined.add(full)
            out = dict(node)
            if kind == "record":
                ns = full.rsplit(".", 1)[0]
                out["fields"] = [{**f, "type": expand(f["type"], ns)} for f in node["fields"]]
            return out
        if kind == "array":
            return {**node, "items": expand(node["items"], namespace)}
        if kind == "map":
            return {**node, "values": expand(node["values"], namespace)}
        if isinstance(kind, str) and kind in PRIMITIVES:
            return node
        return {**node, "type": expand(kind, namespace)}

    return expand(dict(named[name].schema), named[name].fullname.rsplit(".", 1)[0])


# ---- Python rendering ------------------------------------------------------------------------


def _type_name(node: Json, namespace: str, named: Mapping[str, NamedType]) -> str:
    if isinstance(node, str):
        if node in PRIMITIVES:
            return PRIMITIVES[node]
        return named[_qualify(node, namespace)].short
    if isinstance(node, list):
        branches = [b for b in node if b != "null"]
        if len(branches) != 1 or len(node) != 2:
            raise SchemaError(f"only [null, X] unions are supported, got {node!r}")
        return f"{_type_name(branches[0], namespace, named)} | None"
    kind = node["type"]
    if kind in ("record", "enum"):
        return named[_qualify(node["name"], node.get("namespace", namespace))].short
    if kind == "array":
        return f"tuple[{_type_name(node['items'], namespace, named)}, ...]"
    if kind == "map":
        return f"dict[str, {_type_name(node['values'], namespace, named)}]"
    return _type_name(kind, namespace, named)


def _default(node: Json, value: Json, namespace: str, named: Mapping[str, NamedType]) -> str:
    """Python source for an Avro default (for a union, the default belongs to the first branch)."""
    if isinstance(node, list):
        node = node[0]
    if node == "null":
        return "None"
    if isinstance(node, str) and node not in PRIMITIVES:
        target = named[_qualify(node, namespace)]
        if not target.is_enum:
            raise SchemaError("record-typed defaults are not supported")
        return f"{target.short}.{value}"
    if isinstance(node, dict):
        return _complex_default(node, value, namespace, named)
    if node in ("float", "double"):
        return repr(float(value))
    if node == "bytes":
        return repr(value.encode("latin-1"))
    return repr(value)


def _complex_default(
    node: Json, value: Json, namespace: str, named: Mapping[str, NamedType]
) -> str:
    """``_default`` for a schema written as an object (array, map, enum, or an annotated type)."""
    kind = node["type"]
    if kind == "array":
        if value:
            raise SchemaError("non-empty array defaults are not supported")
        return "()"
    if kind == "map":
        if value:
            raise SchemaError("non-empty map defaults are not supported")
        return "field(default_factory=dict)"
    if kind == "enum":
        return f"{named[_qualify(node['name'], node.get('namespace', namespace))].short}.{value}"
    if kind == "record":
        raise SchemaError("record-typed defaults are not supported")
    return _default(kind, value, namespace, named)


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}#: {line}".rstrip() for line in text.splitlines()]


def _docstring(text: str | None, fallback: str) -> str:
    body = (text or fallback).replace('"""', "'''").replace("\\", "\\\\")
    return f'    """{body}"""'


def _tables(records: list[str], enums: list[str], named: dict[str, NamedType]) -> list[str]:
    """The module's tail: every schema, record and enum type, handed to ``_base`` at import
    (it cannot import the module that subclasses its ``Record``)."""
    out = [
        "",
        "# Each named record's schema with every referenced type inlined (what is fingerprinted",
        "# and registered); each parses on its own.",
        "SCHEMAS: dict[str, str] = {",
    ]
    for name in records:
        text = json.dumps(self_contained(name, named), separators=(",", ":"), ensure_ascii=False)
        out.append(f"    {name!r}: {text!r},")
    out += [
        "}",
        "",
        "RECORD_TYPES: tuple[type[Record], ...] = (",
        *[f"    {named[n].short}," for n in records],
        ")",
        "",
        "ENUM_TYPES: tuple[type[enum.StrEnum], ...] = (",
        *[f"    {named[n].short}," for n in enums],
        ")",
        "",
        "register(SCHEMAS, RECORD_TYPES, ENUM_TYPES)",
        "",
    ]
    return out


def render(schema_dir: Path = SCHEMA_DIR) -> str:
    files = load_files(schema_dir)
    order = parse_in_dependency_order(files)
    named = collect_named(files, order)
    enums = sorted(n for n, t in named.items() if t.is_enum)
    records = sorted(n for n, t in named.items() if not t.is_enum)
    shorts = [named[n].short for n in named]
    if len(set(shorts)) != len(shorts):
        raise SchemaError("two named types share a short name; the codegen needs unique ones")

    out: list[str] = [
        '"""Wire types generated from ``schemas/*.avsc``. DO NOT EDIT.',
        "",
        "Regenerate with ``python -m runplane.wire.codegen``; a unit test fails when this file is",
        "stale. Invariants beyond the schema live in ``runplane.wire._validate``.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import enum",
        "from dataclasses import dataclass, field",
        "from typing import ClassVar",
        "",
        "from runplane.wire._base import Record, register",
        "from runplane.wire._validate import TenantId",
        "",
        "__all__ = [",
        *[f'    "{named[n].short}",' for n in sorted(named, key=lambda n: named[n].short)],
        "]",
        "",
    ]
    for name in enums:
        t = named[name]
        out += ["", f"class {t.short}(enum.StrEnum):", _docstring(t.schema.get("doc"), t.short), ""]
        out += [f'    {s} = "{s}"' for s in t.schema["symbols"]]
        out.append("")
    for name in records:
        t = named[name]
        ns = name.rsplit(".", 1)[0]
        out += [
            "",
            "@dataclass(frozen=True, slots=True, kw_only=True)",
            f"class {t.short}(Record):",
            _docstring(t.schema.get("doc"), t.short),
            "",
            f'    avro_name: ClassVar[str] = "{name}"',
            "",
        ]
        for f in t.schema["fields"]:
            fname = f["name"]
            if keyword.iskeyword(fname):
                raise SchemaError(f"{name}.{fname} is a Python keyword")
            if "doc" in f:
                out += _comment(f["doc"], "    ")
            annotation = _type_name(f["type"], ns, named)
            if fname in TYPED_STRINGS and annotation in ("str", "str | None"):
                annotation = annotation.replace("str", TYPED_STRINGS[fname])
            line = f"    {fname}: {annotation}"
            if "default" in f:
                line += f" = {_default(f['type'], f['default'], ns, named)}"
            out.append(line)
        out.append("")
    out += _tables(records, enums, named)
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if args == ["--check"]:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is stale; run python -m runplane.wire.codegen", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
