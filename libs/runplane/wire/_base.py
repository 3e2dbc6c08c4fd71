"""The base of every generated wire record, and the schema-driven conversions.

Each generated class declares its fields as annotations; *how* a field is checked and
converted is read from the class's Avro schema (the source of truth, which also knows what a
type hint cannot: an ``int`` is 32 bits, a ``long`` 64). The plan per class is compiled
lazily on first use, so importing ``runplane.wire`` parses nothing.

Construction, ``from_dict`` and decoding all run through ``Record.__post_init__``: an invalid
value is a ``WireError`` wherever it comes from.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from runplane.errors import SchemaError, WireError

R = TypeVar("R", bound="Record")

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


class Record:
    """A wire record: a frozen dataclass generated from one Avro record schema."""

    __slots__ = ()
    avro_name: ClassVar[str]

    def __post_init__(self) -> None:
        for name, codec in _plan(type(self)).fields:
            value = getattr(self, name)
            checked = codec.check(value, f"{type(self).__name__}.{name}")
            if checked is not value:
                # Frozen: normalising (list -> tuple, symbol -> enum) must bypass __setattr__.
                object.__setattr__(self, name, checked)
        from runplane.wire._validate import VALIDATORS

        hook = VALIDATORS.get(self.avro_name)
        if hook is not None:
            hook(self)

    @classmethod
    def avro_schema_json(cls) -> str:
        """This record's self-contained Avro schema (JSON text)."""
        from runplane.wire._records import SCHEMAS

        return SCHEMAS[cls.avro_name]

    @classmethod
    def avro_schema(cls) -> Any:
        """This record's schema as parsed by fastavro (parsed once, on first use)."""
        from runplane.wire._serde import parsed_schema

        return parsed_schema(cls)


@dataclass(frozen=True, slots=True)
class Codec:
    """How one Avro type is checked at construction and mapped to and from plain values.

    ``check`` validates and normalises a constructor argument; ``to_plain`` gives the
    Avro-mapped value (dicts, lists, enum symbols as str); ``from_plain`` builds the typed
    value back from one (what fastavro returns, or parsed JSON).
    """

    check: Callable[[Any, str], Any]
    to_plain: Callable[[Any], Any]
    from_plain: Callable[[Any, str], Any]


@dataclass(frozen=True, slots=True)
class Plan:
    fields: tuple[tuple[str, Codec], ...]
    names: frozenset[str]


_PLANS: dict[type[Record], Plan] = {}


def _fail(path: str, what: str, value: Any) -> WireError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return SchemaError(f"{path}: expected {what}, got {shown}")


def _identity(value: Any) -> Any:
    return value


def _from_identity(value: Any, path: str) -> Any:
    return value


def _int_codec(bounds: tuple[int, int], what: str) -> Codec:
    lo, hi = bounds

    def check(v: Any, path: str) -> Any:
        if isinstance(v, bool) or not isinstance(v, int):
            raise _fail(path, what, v)
        if not lo <= v <= hi:
            raise SchemaError(f"{path}: {v} is outside the range of an Avro {what}")
        return v

    return Codec(check, _identity, _from_identity)


def _check_float(v: Any, path: str) -> Any:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _fail(path, "a number", v)
    # NaN and infinities have no canonical JSON form, so a record holding one could not be
    # hashed into the journal; refuse them at the boundary instead.
    if not math.isfinite(v):
        raise SchemaError(f"{path}: {v} is not a finite number")
    return float(v)


def _check_bool(v: Any, path: str) -> Any:
    if not isinstance(v, bool):
        raise _fail(path, "a boolean", v)
    return v


def _check_str(v: Any, path: str) -> Any:
    if not isinstance(v, str):
        raise _fail(path, "a string", v)
    if not v.isascii():
        # Avro strings are UTF-8: a lone surrogate could be built here but never written
        # (nor hashed canonically), so refuse it now rather than at produce time.
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise SchemaError(f"{path}: not encodable as UTF-8 ({exc.reason})") from exc
    return v


def _check_bytes(v: Any, path: str) -> Any:
    if isinstance(v, bytearray | memoryview):
        return bytes(v)
    if not isinstance(v, bytes):
        raise _fail(path, "bytes", v)
    return v


def _check_null(v: Any, path: str) -> Any:
    if v is not None:
        raise _fail(path, "null", v)
    return v


_PRIMITIVES: dict[str, Codec] = {
    "null": Codec(_check_null, _identity, _from_identity),
    "boolean": Codec(_check_bool, _identity, _from_identity),
    "int": _int_codec(_INT32, "int"),
    "long": _int_codec(_INT64, "long"),
    "float": Codec(_check_float, _identity, _from_identity),
    "double": Codec(_check_float, _identity, _from_identity),
    "bytes": Codec(_check_bytes, _identity, _from_identity),
    "string": Codec(_check_str, _identity, _from_identity),
}


def _optional(inner: Codec) -> Codec:
    def check(v: Any, path: str) -> Any:
        return None if v is None else inner.check(v, path)

    def to_plain(v: Any) -> Any:
        return None if v is None else inner.to_plain(v)

    def from_plain(v: Any, path: str) -> Any:
        return None if v is None else inner.from_plain(v, path)

    return Codec(check, to_plain, from_plain)


def _array(inner: Codec) -> Codec:
    def check(v: Any, path: str) -> Any:
        if not isinstance(v, list | tuple):
            raise _fail(path, "a list or tuple", v)
        items = tuple(inner.check(x, f"{path}[{i}]") for i, x in enumerate(v))
        # Keep the caller's tuple when nothing changed, so equal records stay cheap to build.
        if isinstance(v, tuple) and all(a is b for a, b in zip(items, v, strict=True)):
            return v
        return items

    def to_plain(v: Any) -> Any:
        return [inner.to_plain(x) for x in v]

    def from_plain(v: Any, path: str) -> Any:
        if not isinstance(v, list | tuple):
            raise _fail(path, "a list", v)
        return tuple(inner.from_plain(x, f"{path}[{i}]") for i, x in enumerate(v))

    return Codec(check, to_plain, from_plain)


def _map(inner: Codec) -> Codec:
    def check(v: Any, path: str) -> Any:
        if not isinstance(v, Mapping):
            raise _fail(path, "a mapping", v)
        out = {}
        for k, x in v.items():
            _check_str(k, f"{path} key")
            out[k] = inner.check(x, f"{path}[{k!r}]")
        # Always a private copy: the record is frozen, so a caller's later change to the dict
        # it passed in must not show through.
        return out

    def to_plain(v: Any) -> Any:
        return {k: inner.to_plain(x) for k, x in v.items()}

    def from_plain(v: Any, path: str) -> Any:
        if not isinstance(v, Mapping):
            raise _fail(path, "an object", v)
        return {k: inner.from_plain(x, f"{path}[{k!r}]") for k, x in v.items()}

    return Codec(check, to_plain, from_plain)


def _enum(cls: type[enum.StrEnum]) -> Codec:
    def check(v: Any, path: str) -> Any:
        if isinstance(v, cls):
            return v
        if isinstance(v, str):
            try:
                return cls(v)
            except ValueError:
                pass
        raise _fail(path, f"one of {[m.value for m in cls]}", v)

    def to_plain(v: Any) -> Any:
        return v.value

    return Codec(check, to_plain, check)


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

    return Codec(check, to_plain, from_plain)


def _types_by_name() -> dict[str, type[Any]]:
    from runplane.wire._records import ENUM_TYPES, RECORD_TYPES

    out: dict[str, type[Any]] = {c.avro_name: c for c in RECORD_TYPES}
    for e in ENUM_TYPES:
        # Enum classes carry no Avro name; every named type shares the one namespace, which
        # the codegen guarantees by refusing duplicate short names.
        out[f"{RECORD_TYPES[0].avro_name.rsplit('.', 1)[0]}.{e.__name__}"] = e
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
        fields = tuple(
            (f["name"], _codec(f["type"], namespace, types)) for f in schema["fields"]
        )
        plan = Plan(fields, frozenset(name for name, _ in fields))
        _PLANS[cls] = plan
    return plan


def to_dict(record: Record) -> dict[str, Any]:
    """The record as its Avro-mapped dict: nested records as dicts, arrays as lists, enums as
    their symbols, nulls kept. This is what the serde writes and what the journal hashes."""
    return {name: codec.to_plain(getattr(record, name)) for name, codec in _plan(type(record)).fields}


def _build(cls: type[R], data: Any, path: str) -> R:
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
            # Primitives need no conversion (the constructor checks them); skipping the call
            # is most of a decode's Python overhead.
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
