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
"""

from __future__ import annotations

import enum
import itertools
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
        check = _CHECKS.get(type(self))
        if check is None:
            check = _compile_check(type(self))
        check(self)

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


class _Source:
    """Names for generated code: objects it refers to, and fresh local variable names."""

    def __init__(self, leaves: Mapping[str, Any] | None = None) -> None:
        self.namespace: dict[str, Any] = {}
        self._ids: dict[int, str] = {}
        self._counter = itertools.count()
        # For canonical encoders: the leaf encoders ("str", "float"), by the caller's rules.
        self.leaves: dict[str, str] = {k: self.ref(fn) for k, fn in (leaves or {}).items()}

    def ref(self, obj: Any) -> str:
        name = self._ids.get(id(obj))
        if name is None:
            name = f"_r{len(self._ids)}"
            self._ids[id(obj)] = name
            self.namespace[name] = obj
        return name

    def fresh(self) -> str:
        return f"_v{next(self._counter)}"


# Source builders: given the expression of a *simple name* and a _Source, return an expression.
_Src = Callable[[str, _Source], str]


def _same(v: str, src: _Source) -> str:
    return v


def _no_canon(v: str, src: _Source) -> str:
    raise NotImplementedError("this codec has no canonical encoder")  # a codec added without one


@dataclass(frozen=True, slots=True)
class Codec:
    """How one Avro type is checked at construction and mapped to and from plain values.

    ``check`` validates and normalises a constructor argument; ``to_plain`` gives the
    Avro-mapped value (dicts, lists, enum symbols as str); ``from_plain`` builds the typed
    value back from one (what fastavro returns, or parsed JSON).

    The compiled forms: ``fast`` builds an expression that is true only when ``check`` would
    accept the value and return ``fast_value`` of it (the value itself unless given) — the
    common case, tested inline with no call; ``None`` means always call ``check``. ``plain``
    builds the expression ``to_plain`` computes. ``canon`` builds the canonical JSON text of
    ``to_plain(v)`` from the caller's leaf encoders (see ``canonical_encoder``). ``unplain``
    builds (test, value): where test holds, ``from_plain`` would return value without
    raising; ``None`` means always call ``from_plain`` (or, for primitives, nothing to do).
    """

    check: Callable[[Any, str], Any]
    to_plain: Callable[[Any], Any]
    from_plain: Callable[[Any, str], Any]
    fast: _Src | None = None
    fast_value: _Src = _same
    plain: _Src = _same
    canon: _Src = _no_canon
    unplain: Callable[[str, _Source], tuple[str, str]] | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    fields: tuple[tuple[str, Codec], ...]
    names: frozenset[str]


_PLANS: dict[type[Record], Plan] = {}
_CHECKS: dict[type[Record], Callable[[Record], None]] = {}
_TO_DICTS: dict[type[Record], Callable[[Record], dict[str, Any]]] = {}


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

    def fast(v: str, src: _Source) -> str:
        # bool is a subclass of int: the exact-class test leaves it to ``check``, which refuses it.
        return f"({v}.__class__ is int and {lo} <= {v} <= {hi})"

    return Codec(check, _identity, _from_identity, fast, canon=_canon_int)


def _canon_int(v: str, src: _Source) -> str:
    # check admits int subclasses but never bool, so the reference writes int.__repr__.
    return f"{src.ref(int.__repr__)}({v})"


def _canon_str(v: str, src: _Source) -> str:
    return f"{src.leaves['str']}({v})"


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


def _no_canonical_form(v: Any) -> str:
    # Bytes have no JSON form; the canonical encoder of a plain dict refuses them the same way.
    raise TypeError(f"not canonically encodable: {type(v).__name__}")


def _check_null(v: Any, path: str) -> Any:
    if v is not None:
        raise _fail(path, "null", v)
    return v


def _fast_float(v: str, src: _Source) -> str:
    # float(x) of an exact float is x itself, so check returns the value unchanged.
    return f"({v}.__class__ is float and {src.ref(math.isfinite)}({v}))"


# check stores float(v), an exact float: the reference formats it with its float rule.
_FLOAT = Codec(
    _check_float,
    _identity,
    _from_identity,
    _fast_float,
    canon=lambda v, src: f"{src.leaves['float']}({v})",
)

_PRIMITIVES: dict[str, Codec] = {
    "null": Codec(
        _check_null,
        _identity,
        _from_identity,
        lambda v, src: f"{v} is None",
        canon=lambda v, src: "'null'",
    ),
    "boolean": Codec(
        _check_bool,
        _identity,
        _from_identity,
        lambda v, src: f"({v} is True or {v} is False)",
        canon=lambda v, src: f"('true' if {v} else 'false')",
    ),
    "int": _int_codec(_INT32, "int"),
    "long": _int_codec(_INT64, "long"),
    "float": _FLOAT,
    "double": _FLOAT,
    "bytes": Codec(
        _check_bytes,
        _identity,
        _from_identity,
        lambda v, src: f"{v}.__class__ is bytes",
        canon=lambda v, src: f"{src.ref(_no_canonical_form)}({v})",
    ),
    # A non-ASCII string takes the check (it must prove it encodes as UTF-8).
    "string": Codec(
        _check_str,
        _identity,
        _from_identity,
        lambda v, src: f"({v}.__class__ is str and {v}.isascii())",
        canon=_canon_str,
    ),
}


def _optional(inner: Codec) -> Codec:
    def check(v: Any, path: str) -> Any:
        return None if v is None else inner.check(v, path)

    def to_plain(v: Any) -> Any:
        return None if v is None else inner.to_plain(v)

    def from_plain(v: Any, path: str) -> Any:
        return None if v is None else inner.from_plain(v, path)

    inner_fast = inner.fast
    fast: _Src | None = None
    if inner_fast is not None and inner.fast_value is _same:
        fast = lambda v, src: f"({v} is None or {inner_fast(v, src)})"  # noqa: E731

    def plain(v: str, src: _Source) -> str:
        inner_plain = inner.plain(v, src)
        return v if inner_plain == v else f"(None if {v} is None else {inner_plain})"

    def canon(v: str, src: _Source) -> str:
        return f"('null' if {v} is None else {inner.canon(v, src)})"

    if inner.from_plain is _from_identity:
        # None or a plain value, both returned as they are: the identity, which _build skips.
        from_plain = _from_identity  # type: ignore[assignment]

    inner_unplain = inner.unplain
    unplain = None
    if inner_unplain is not None:

        def unplain(v: str, src: _Source) -> tuple[str, str]:
            test, value = inner_unplain(v, src)
            return f"({v} is None or {test})", f"(None if {v} is None else {value})"

    return Codec(check, to_plain, from_plain, fast, _same, plain, canon, unplain)


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

    inner_fast = inner.fast
    fast: _Src | None = None
    if inner_fast is not None and inner.fast_value is _same:
        # An exact tuple whose items all pass unchanged is returned as is by check.
        def fast(v: str, src: _Source) -> str:
            x = src.fresh()
            return f"({v}.__class__ is tuple and all([{inner_fast(x, src)} for {x} in {v}]))"

    def plain(v: str, src: _Source) -> str:
        x = src.fresh()
        inner_plain = inner.plain(x, src)
        return f"list({v})" if inner_plain == x else f"[{inner_plain} for {x} in {v}]"

    def canon(v: str, src: _Source) -> str:
        x = src.fresh()
        return f"('[' + ','.join([{inner.canon(x, src)} for {x} in {v}]) + ']')"

    unplain = None
    if inner.from_plain is _from_identity:
        # A list of plain items: from_plain's tuple of the items unchanged.
        def unplain(v: str, src: _Source) -> tuple[str, str]:
            return f"{v}.__class__ is list", f"tuple({v})"

    return Codec(check, to_plain, from_plain, fast, _same, plain, canon, unplain)


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

    inner_fast = inner.fast
    fast: _Src | None = None
    if inner_fast is not None and inner.fast_value is _same:
        # An exact dict of ASCII str keys and unchanged values: check's private copy is then
        # exactly dict(v) (same pairs, same order).
        def fast(v: str, src: _Source) -> str:
            k, x = src.fresh(), src.fresh()
            return (
                f"({v}.__class__ is dict and all([{k}.__class__ is str and {k}.isascii() and "
                f"{inner_fast(x, src)} for {k}, {x} in {v}.items()]))"
            )

    def plain(v: str, src: _Source) -> str:
        k, x = src.fresh(), src.fresh()
        inner_plain = inner.plain(x, src)
        # The stored value is always check's exact dict, so dict(v) is the comprehension.
        return (
            f"dict({v})"
            if inner_plain == x
            else f"{{{k}: {inner_plain} for {k}, {x} in {v}.items()}}"
        )

    # As the reference does: keys (str, by check) sorted, each with its value.
    def canon(v: str, src: _Source) -> str:
        k = src.fresh()
        item = inner.canon(f"{v}[{k}]", src)
        return f"('{{' + ','.join([{src.leaves['str']}({k}) + ':' + {item} for {k} in sorted({v})]) + '}}')"

    unplain = None
    if inner.from_plain is _from_identity:
        # An exact dict of plain values: from_plain's comprehension is a copy of it.
        def unplain(v: str, src: _Source) -> tuple[str, str]:
            return f"{v}.__class__ is dict", f"dict({v})"

    return Codec(
        check, to_plain, from_plain, fast, lambda v, src: f"dict({v})", plain, canon, unplain
    )


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

    def fast(v: str, src: _Source) -> str:
        return f"{v}.__class__ is {src.ref(cls)}"

    def plain(v: str, src: _Source) -> str:
        return f"{v}._value_"  # what .value returns, without the descriptor

    def canon(v: str, src: _Source) -> str:
        return f"{src.leaves['str']}({v}._value_)"

    # A symbol (exact str) that names a member: cls(v) is that member.
    members = {m.value: m for m in cls}

    def unplain(v: str, src: _Source) -> tuple[str, str]:
        table = src.ref(members)
        return f"({v}.__class__ is str and {v} in {table})", f"{table}[{v}]"

    return Codec(check, to_plain, check, fast, _same, plain, canon, unplain)


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
        fields = tuple((f["name"], _codec(f["type"], namespace, types)) for f in schema["fields"])
        plan = Plan(fields, frozenset(name for name, _ in fields))
        _PLANS[cls] = plan
    return plan


def _compile(source: str, name: str, src: _Source) -> Any:
    namespace = dict(src.namespace)
    exec(compile(source, f"<runplane.wire compiled {name}>", "exec"), namespace)
    return namespace[name]


def _compile_check(cls: type[Record]) -> Callable[[Record], None]:
    """One function running every field's check of ``cls`` in schema order, then the hook.

    Same order, same ``check`` calls and paths as a loop over the plan: only values the
    inline test proves valid skip the call. Frozen: normalising (list -> tuple, symbol ->
    enum, the private copy of a map) must bypass ``__setattr__``.
    """
    from runplane.wire._validate import VALIDATORS

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
