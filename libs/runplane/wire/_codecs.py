"""The field codecs: how each Avro type is checked, normalised and mapped to and from plain
values, and the pieces of source text the compiled per-class functions are made of.

``runplane.wire._base`` composes these into a class's plan (one codec per schema field) and
compiles its check, ``to_dict``, ``from_dict`` and canonical encoder from them. Nothing here
knows a record class: the codec of a nested record lives in ``_base``, beside the compiled
functions it calls.
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runplane.errors import SchemaError, WireError

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


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
# (test, value) source builders: see ``Codec.unplain``.
_Unplain = Callable[[str, _Source], tuple[str, str]]


def _same(v: str, src: _Source) -> str:
    return v


def _no_canon(v: str, src: _Source) -> str:
    # A codec added without one: a bug of the wire package, found by its tests.
    raise TypeError("this codec has no canonical encoder")


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
    unplain: _Unplain | None = None


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

    def plain(v: str, src: _Source) -> str:
        x = src.fresh()
        inner_plain = inner.plain(x, src)
        return f"list({v})" if inner_plain == x else f"[{inner_plain} for {x} in {v}]"

    def canon(v: str, src: _Source) -> str:
        x = src.fresh()
        return f"('[' + ','.join([{inner.canon(x, src)} for {x} in {v}]) + ']')"

    return Codec(
        check,
        to_plain,
        from_plain,
        _array_fast(inner),
        _same,
        plain,
        canon,
        _container_unplain(inner, "list", "tuple"),
    )


def _array_fast(inner: Codec) -> _Src | None:
    """An exact tuple whose items all pass unchanged is returned as is by check."""
    inner_fast = inner.fast
    if inner_fast is None or inner.fast_value is not _same:
        return None

    def fast(v: str, src: _Source) -> str:
        x = src.fresh()
        return f"({v}.__class__ is tuple and all([{inner_fast(x, src)} for {x} in {v}]))"

    return fast


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

    def fast_value(v: str, src: _Source) -> str:
        return f"dict({v})"

    return Codec(
        check,
        to_plain,
        from_plain,
        _map_fast(inner),
        fast_value,
        plain,
        canon,
        _container_unplain(inner, "dict", "dict"),
    )


def _map_fast(inner: Codec) -> _Src | None:
    """An exact dict of ASCII str keys and unchanged values: check's private copy is then
    exactly dict(v) (same pairs, same order)."""
    inner_fast = inner.fast
    if inner_fast is None or inner.fast_value is not _same:
        return None

    def fast(v: str, src: _Source) -> str:
        k, x = src.fresh(), src.fresh()
        return (
            f"({v}.__class__ is dict and all([{k}.__class__ is str and {k}.isascii() and "
            f"{inner_fast(x, src)} for {k}, {x} in {v}.items()]))"
        )

    return fast


def _container_unplain(inner: Codec, plain: str, typed: str) -> _Unplain | None:
    """A container of plain items: from_plain is ``typed`` of the items unchanged — a list's
    tuple, a dict's copy — for exactly the ``plain`` class parsed JSON gives."""
    if inner.from_plain is not _from_identity:
        return None

    def unplain(v: str, src: _Source) -> tuple[str, str]:
        return f"{v}.__class__ is {plain}", f"{typed}({v})"

    return unplain


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


def _compile(source: str, name: str, src: _Source) -> Any:
    namespace = dict(src.namespace)
    exec(compile(source, f"<runplane.wire compiled {name}>", "exec"), namespace)
    return namespace[name]
