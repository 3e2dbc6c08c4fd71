"""The base of every generated wire record, and the schema-driven conversions.

Each generated class declares its fields as annotations; *how* a field is checked and
converted is read from the class's Avro schema (the source of truth, which also knows what a
type hint cannot: an ``int`` is 32 bits, a ``long`` 64). The plan per class is compiled
lazily on first use, so importing ``runplane.wire`` parses nothing.

Construction, ``from_dict`` and decoding all run through ``Record.__post_init__``: an invalid
value is a ``WireError`` wherever it comes from.

Speed: constructing records is the executor's hot path (about nine per effect step), so each
class's checks, its ``to_dict`` and its ``from_dict`` are compiled once, on first use, into
straight-line functions (``_compile_check``, ``_compile_to_dict``, ``_compile_build``). Every
field first takes an inline test that is true only when the codec's ``check`` would return the
value unchanged (an exact ``str`` that is ASCII, an exact ``int`` in range, …); anything else
goes through the very same ``check`` call with the same path as before, so what is accepted,
what is normalised and every error message stay those of the codecs. ``from_dict`` does the same with ``from_plain``
(``_build_reference`` is the written-out form; tests hold them together).

The codec of each Avro type (checks, conversions, the source text they compile to) is in
``runplane.wire._codecs``; this module turns a class's schema into a plan of those codecs and
compiles it.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from runplane.errors import SchemaError
from runplane.wire._codecs import (
    _PRIMITIVES,
    Codec,
    _array,
    _compile,
    _enum,
    _fail,
    _from_identity,
    _map,
    _optional,
    _same,
    _Source,
)
from runplane.wire._validate import VALIDATORS

R = TypeVar("R", bound="Record")


class Record:
    """A wire record: a frozen dataclass generated from one Avro record schema."""

    __slots__ = ()
    avro_name: ClassVar[str]

    def __post_init__(self) -> None:
        check = _CHECKS.get(type(self))
        if check is None:
            check = _compile_check(type(self))
        check(self)

    @classmethod
    def avro_schema_json(cls) -> str:
        """This record's self-contained Avro schema (JSON text); parsed by fastavro, it is
        ``runplane.wire.parsed_schema(cls)``."""
        return _SCHEMAS[cls.avro_name]


# The generated types, handed over by ``_records`` when it is imported (it subclasses Record,
# so this module cannot import it): each record's schema and class by Avro name, the enums.
_SCHEMAS: dict[str, str] = {}
_RECORD_TYPES: dict[str, type[Record]] = {}
_ENUM_TYPES: list[type[enum.StrEnum]] = []


def register(
    schemas: Mapping[str, str],
    records: tuple[type[Record], ...],
    enums: tuple[type[enum.StrEnum], ...],
) -> None:
    """Called once, by the generated ``_records`` module, with every type it defines."""
    _SCHEMAS.update(schemas)
    _RECORD_TYPES.update({c.avro_name: c for c in records})
    _ENUM_TYPES.extend(enums)


def generated_records() -> Mapping[str, type[Record]]:
    """Every generated record class by Avro full name."""
    return _RECORD_TYPES


@dataclass(frozen=True, slots=True)
class Plan:
    fields: tuple[tuple[str, Codec], ...]
    names: frozenset[str]


_PLANS: dict[type[Record], Plan] = {}
_CHECKS: dict[type[Record], Callable[[Record], None]] = {}
_TO_DICTS: dict[type[Record], Callable[[Record], dict[str, Any]]] = {}


def _record(cls: type[Record]) -> Codec:
    def check(v: Any, path: str) -> Any:
        if not isinstance(v, cls):
            raise _fail(path, f"a {cls.__name__}", v)
        return v

    def to_plain(v: Any) -> Any:
        return to_dict(v)

    def from_plain(v: Any, path: str) -> Any:
        if isinstance(v, cls):
            return v
        return _build(cls, v, path)

    def fast(v: str, src: _Source) -> str:
        return f"{v}.__class__ is {src.ref(cls)}"

    def plain(v: str, src: _Source) -> str:
        return f"{src.ref(to_dict)}({v})"

    def canon(v: str, src: _Source) -> str:
        nested = _canonical_source(cls, frozenset(), src)
        return f"{src.ref(nested)}({v})"

    # No test: the nested build raises exactly what _build raises, so the call is the value.
    # Its path argument is filled in by _compile_build (it knows the field's name).

    return Codec(check, to_plain, from_plain, fast, _same, plain, canon)


def _types_by_name() -> dict[str, type[Any]]:
    out: dict[str, type[Any]] = dict(_RECORD_TYPES)
    namespace = next(iter(_RECORD_TYPES)).rsplit(".", 1)[0]
    for e in _ENUM_TYPES:
        # Enum classes carry no Avro name; every named type shares the one namespace, which
        # the codegen guarantees by refusing duplicate short names.
        out[f"{namespace}.{e.__name__}"] = e
    return out


def _codec(node: Any, namespace: str, types: Mapping[str, type[Any]]) -> Codec:
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return _PRIMITIVES[node]
        full = node if "." in node else f"{namespace}.{node}"
        target = types[full]
        return _enum(target) if issubclass(target, enum.StrEnum) else _record(target)
    if isinstance(node, list):
        branches = [b for b in node if b != "null"]
        return _optional(_codec(branches[0], namespace, types))
    kind = node["type"]
    if kind in ("record", "enum"):
        name = node["name"]
        ns = node.get("namespace", namespace)
        return _codec(name if "." in name else f"{ns}.{name}", ns, types)
    if kind == "array":
        return _array(_codec(node["items"], namespace, types))
    if kind == "map":
        return _map(_codec(node["values"], namespace, types))
    return _codec(kind, namespace, types)


def _plan(cls: type[Record]) -> Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        schema = json.loads(cls.avro_schema_json())
        namespace = cls.avro_name.rsplit(".", 1)[0]
        types = _types_by_name()
        fields = tuple((f["name"], _codec(f["type"], namespace, types)) for f in schema["fields"])
        plan = Plan(fields, frozenset(name for name, _ in fields))
        _PLANS[cls] = plan
    return plan


def _compile_check(cls: type[Record]) -> Callable[[Record], None]:
    """One function running every field's check of ``cls`` in schema order, then the hook.

    Same order, same ``check`` calls and paths as a loop over the plan: only values the
    inline test proves valid skip the call. Frozen: normalising (list -> tuple, symbol ->
    enum, the private copy of a map) must bypass ``__setattr__``.
    """
    src = _Source()
    setattr_ = src.ref(object.__setattr__)
    lines = ["def check(self):"]
    for name, codec in _plan(cls).fields:
        path = repr(f"{cls.__name__}.{name}")
        call = f"{src.ref(codec.check)}(v, {path})"
        lines.append(f"    v = self.{name}")
        slow = [f"c = {call}", "if c is not v:", f"    {setattr_}(self, {name!r}, c)"]
        if codec.fast is None:
            lines += [f"    {ln}" for ln in slow]
            continue
        test = codec.fast("v", src)
        value = codec.fast_value("v", src)
        if value == "v":
            lines.append(f"    if not {test}:")
        else:
            lines += [
                f"    if {test}:",
                f"        {setattr_}(self, {name!r}, {value})",
                "    else:",
            ]
        lines += [f"        {ln}" for ln in slow]
    hook = VALIDATORS.get(cls.avro_name)
    lines.append(f"    {src.ref(hook)}(self)" if hook is not None else "    return None")
    check: Callable[[Record], None] = _compile("\n".join(lines), "check", src)
    _CHECKS[cls] = check
    return check


def _compile_to_dict(cls: type[Record]) -> Callable[[Record], dict[str, Any]]:
    src = _Source()
    fields = _plan(cls).fields
    lines = ["def to_dict(r):"]
    items = []
    for i, (name, codec) in enumerate(fields):
        lines.append(f"    _f{i} = r.{name}")
        items.append(f"{name!r}: {codec.plain(f'_f{i}', src)}")
    lines.append(f"    return {{{', '.join(items)}}}")
    fn: Callable[[Record], dict[str, Any]] = _compile("\n".join(lines), "to_dict", src)
    _TO_DICTS[cls] = fn
    return fn


def to_dict(record: Record) -> dict[str, Any]:
    """The record as its Avro-mapped dict: nested records as dicts, arrays as lists, enums as
    their symbols, nulls kept. This is what the serde writes and what the journal hashes.

    Containers in the result are always exact ``dict``/``list``, keys ``str``."""
    fn = _TO_DICTS.get(type(record))
    if fn is None:
        fn = _compile_to_dict(type(record))
    return fn(record)


_CANONICAL: dict[tuple[type[Record], frozenset[str], Any, Any], Callable[[Record], str]] = {}


def canonical_encoder(
    cls: type[Record],
    *,
    encode_str: Callable[[str], str],
    encode_float: Callable[[float], str],
    exclude: frozenset[str] = frozenset(),
) -> Callable[[Record], str]:
    """A function giving the canonical JSON text of ``to_dict(record)`` without ``exclude``'s
    keys, compiled for ``cls`` — the journal hashes records on every step.

    The canonical rules live with the caller (``runplane.core.canonical``): it passes its leaf
    encoders for strings (keys, enum symbols and string values) and floats; integers are
    ``int.__repr__``, nulls ``null``, booleans ``true``/``false``, objects have their keys
    sorted by code point and arrays keep their order, as those rules say. The structure comes
    from the schema, so no value is inspected for its type. A ``bytes`` value (no canonical
    form) raises ``TypeError``, as the canonical encoder of ``to_dict`` would.
    """
    key = (cls, exclude, encode_str, encode_float)
    fn = _CANONICAL.get(key)
    if fn is None:
        src = _Source({"str": encode_str, "float": encode_float})
        fn = _canonical_source(cls, exclude, src)
        _CANONICAL[key] = fn
    return fn


def _canonical_source(
    cls: type[Record], exclude: frozenset[str], src: _Source
) -> Callable[[Record], str]:
    encode_str = src.namespace[src.leaves["str"]]
    fields = sorted((name, codec) for name, codec in _plan(cls).fields if name not in exclude)
    parts: list[str] = []
    lines = ["def canonical(r):"]
    for i, (name, codec) in enumerate(fields):
        lines.append(f"    _f{i} = r.{name}")
        # Keys are constants: encoded once, here, by the same string encoder.
        parts.append(repr(("{" if i == 0 else ",") + encode_str(name) + ":"))
        parts.append(codec.canon(f"_f{i}", src))
    parts.append(repr("}" if fields else "{}"))
    lines.append(f"    return ''.join([{', '.join(parts)}])")
    fn: Callable[[Record], str] = _compile("\n".join(lines), "canonical", src)
    return fn


_BUILDERS: dict[type[Record], Callable[[Any, str], Any]] = {}


def _build(cls: type[R], data: Any, path: str) -> R:
    builder = _BUILDERS.get(cls)
    if builder is None:
        builder = _compile_build(cls)
    record: R = builder(data, path)
    return record


def _compile_build(cls: type[Record]) -> Callable[[Any, str], Any]:
    """``_build_reference`` for ``cls`` as one function: same checks in the same order, same
    ``from_plain`` calls (with the same paths) wherever the inline test does not hold."""
    src = _Source()
    plan = _plan(cls)
    name = cls.__name__
    fail, schema_error = src.ref(_fail), src.ref(SchemaError)
    lines = [
        "def build(data, path):",
        f"    if not isinstance(data, {src.ref(Mapping)}):",
        f"        raise {fail}(path, {f'an object for {name}'!r}, data)",
        f"    if not {src.ref(plan.names)}.issuperset(data):",
        f"        unknown = set(data) - {src.ref(plan.names)}",
        f"        raise {schema_error}(f'{{path}}: unknown fields {{sorted(map(str, unknown))}} for {name}')",
        "    kw = {}",
    ]
    for field_name, codec in plan.fields:
        lines += [f"    if {field_name!r} in data:", f"        v = data[{field_name!r}]"]
        if codec.from_plain is _from_identity:
            lines.append(f"        kw[{field_name!r}] = v")
            continue
        path = f"(path + {'.' + field_name!r} if path else {field_name!r})"
        call = f"{src.ref(codec.from_plain)}(v, {path})"
        if codec.unplain is None:
            lines.append(f"        kw[{field_name!r}] = {call}")
        else:
            test, value = codec.unplain("v", src)
            lines.append(f"        kw[{field_name!r}] = {value} if {test} else {call}")
    lines += [
        "    try:",
        f"        return {src.ref(cls)}(**kw)",
        "    except TypeError as exc:  # a required field is missing",
        f"        raise {schema_error}(f'{{path or {src.ref(name)}}}: {{exc}}') from exc",
    ]
    builder: Callable[[Any, str], Any] = _compile("\n".join(lines), "build", src)
    _BUILDERS[cls] = builder
    return builder


def _build_reference(cls: type[R], data: Any, path: str) -> R:
    """What a compiled builder does, written out (the tests hold the two together)."""
    if not isinstance(data, Mapping):
        raise _fail(path, f"an object for {cls.__name__}", data)
    plan = _plan(cls)
    unknown = set(data) - plan.names
    if unknown:
        raise SchemaError(f"{path}: unknown fields {sorted(map(str, unknown))} for {cls.__name__}")
    kwargs: dict[str, Any] = {}
    for name, codec in plan.fields:
        if name in data:
            value = data[name]
            # Primitives need no conversion (the constructor checks them).
            kwargs[name] = (
                value
                if codec.from_plain is _from_identity
                else codec.from_plain(value, f"{path}.{name}" if path else name)
            )
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required field is missing
        raise SchemaError(f"{path or cls.__name__}: {exc}") from exc


def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
    """Build ``cls`` from its Avro-mapped dict (the inverse of ``to_dict``).

    Missing fields take their schema defaults; unknown fields and invalid values raise
    ``WireError`` naming the field.
    """
    return _build(cls, data, "")
