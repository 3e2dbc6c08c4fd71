"""The canonical JSON encoding that everything runplane hashes goes through.

Hashes (request witnesses, body digests, journal record hashes) must be recomputable by any
component, in any language, from the decoded value alone. So the bytes hashed are not "what
``json.dumps`` happened to produce" but this encoding, which follows RFC 8785 (JCS) with one
deliberate difference (integers):

- UTF-8 bytes; no BOM; no insignificant whitespace (``,`` and ``:`` only).
- Object keys are strings, sorted by Unicode code point (Python's ``sorted`` on ``str``).
  RFC 8785 sorts by UTF-16 code units; the two orders differ only between astral characters
  and U+E000..U+FFFF, which no key of ours contains.
- Strings: only ``"``, ``\\`` and the control characters U+0000..U+001F are escaped;
  ``\\b \\f \\n \\r \\t`` use their short forms, the others ``\\u00xx`` with lowercase hex.
  Everything else (including non-ASCII) is written as itself. Lone surrogates are refused
  (they have no UTF-8 encoding).
- ``true``, ``false``, ``null``.
- Integers (Python ``int``, not ``bool``) are written as integers, exactly, of any size —
  unlike JCS, which would round them through a double. 64-bit ids survive intact.
- Floats are written as ECMAScript's ``Number.prototype.toString`` does (JCS §3.2.2.3): the
  shortest digits that round-trip, ``1e+21`` / ``1e-7`` exponent forms, integral floats
  without a fraction (``2.0`` → ``2``). NaN and ±Infinity are refused.
- Arrays (``list`` or ``tuple``) keep their order.

Anything else (bytes, sets, objects) is refused with ``TypeError``/``ValueError``: a value
that cannot be hashed canonically must not be journaled.

``canonical_json_reference`` is the implementation of these rules, written out. Hashing is on
the executor's hot path, so ``canonical_json`` first tries the C encoder of the ``json``
module (sorted keys, ``,``/``:``, ``ensure_ascii=False``), but only on a *plain* value: one
built solely of exact ``dict`` (with exact ``str`` keys), ``list``, ``tuple``, ``str``, ``int``,
``bool``, ``None`` and some floats, at most ``_PLAIN_DEPTH`` containers deep. On such a value the two
produce the same text, by construction:

- strings and keys go through the same function (``encode_basestring``, C) in both;
- ``None``/``True``/``False`` are the same literals; an exact ``int`` is ``int.__repr__`` in both;
- a float is admitted only where ``repr`` is already the ECMAScript form (non-integral,
  1e-4 <= |x| < 1e16: see ``_repr_is_canonical``);
- an exact dict's pairs are its items in both, ordered by comparing the (distinct, exact str)
  keys, i.e. by code point; lists and tuples are their items in order.

What differs is excluded from the fast path: other floats (``json`` writes ``repr``: ``2.0``,
``1e+16``, ``1e-07``), non-str keys (``json`` converts them, we refuse them), and subclasses and other
mappings (whose iteration may be overridden). Every excluded value, and every value the C
encoder raises on, goes to the reference, so errors too are the reference's.
``tests/unit/test_canonical_fast.py`` compares the two over random values.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import math
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "canonical_bytes",
    "canonical_json",
    "canonical_json_reference",
    "encode_str",
    "format_float",
    "sha256_hex",
]

# Deeper values take the reference: its recursion, not ours, then decides whether they fail.
_PLAIN_DEPTH = 32
_LEAVES = frozenset({str, int, bool, type(None)})


def canonical_json(value: Any) -> str:
    """Return the canonical JSON text of ``value`` (see the module docstring)."""
    if _c_encode is not None:
        try:
            if _plain(value, 0):
                return "".join(_c_encode(value, 0))
        except (RecursionError, ValueError):
            # ValueError: an int past the str-conversion digit limit; the reference raises it.
            pass
    return canonical_json_reference(value)


def canonical_json_reference(value: Any) -> str:
    """The canonical JSON text of ``value``, computed by the rules written out (the spec)."""
    parts: list[str] = []
    _encode(value, parts)
    return "".join(parts)


def _plain(value: Any, depth: int) -> bool:
    """Whether ``value`` is plain (see the module docstring): exact JSON-native types only."""
    kind = type(value)
    if kind is dict:
        if depth >= _PLAIN_DEPTH:
            return False
        for key, item in value.items():
            if type(key) is not str:
                return False
            if type(item) not in _LEAVES and not _plain(item, depth + 1):
                return False
        return True
    if kind is list or kind is tuple:
        if depth >= _PLAIN_DEPTH:
            return False
        for item in value:
            if type(item) not in _LEAVES and not _plain(item, depth + 1):
                return False
        return True
    if kind is float:
        return _repr_is_canonical(value)
    return kind in _LEAVES


def _repr_is_canonical(value: float) -> bool:
    """Whether ``repr(value)`` (what the C encoder writes) is already its ECMAScript form.

    Both write the same shortest round-trip digits; they lay them out alike exactly when both
    use fixed notation and there is a fraction: repr is fixed for decimal exponents -4..15,
    ECMAScript for -6..20, and an integral float is ``2.0`` in one and ``2`` in the other.
    So: not integral and 1e-4 <= |value| < 1e16 (which also excludes NaN, the infinities and
    -0.0).
    """
    return 1e-4 <= abs(value) < 1e16 and not value.is_integer()


def _refuse(value: Any) -> Any:
    # Unreachable for a plain value; present because the C encoder requires a default.
    raise TypeError(f"not canonically encodable: {type(value).__name__}")


def _make_c_encoder() -> Callable[[Any, int], Any] | None:
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the _json accelerator: the reference only
        return None
    # (markers, default, encoder, indent, key_separator, item_separator, sort_keys, skipkeys,
    # allow_nan): no circular-reference markers (a plain value of bounded depth is a tree),
    # the same string encoder as the reference, no indent, "," and ":", sorted keys.
    try:
        encoder: Callable[[Any, int], Any] = make(
            None, _refuse, _encode_str, None, ":", ",", True, False, False
        )
    except TypeError:  # a private signature another Python version changed: the reference only
        return None
    return encoder


def canonical_bytes(value: Any) -> bytes:
    """Return the canonical JSON of ``value`` as UTF-8 bytes (what gets hashed)."""
    # "strict" surrogates: a lone surrogate has no UTF-8 form and is refused here.
    return canonical_json(value).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def _encode(value: Any, out: list[str]) -> None:
    # bool before int: bool is a subclass of int in Python.
    if isinstance(value, str):
        out.append(_encode_str(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(format_float(value))
    elif isinstance(value, Mapping):
        _encode_object(value, out)
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"not canonically encodable: {type(value).__name__}")


def _encode_object(value: Mapping[Any, Any], out: list[str]) -> None:
    for key in value:
        if not isinstance(key, str):
            raise TypeError(f"object keys must be strings, got {type(key).__name__}")
    out.append("{")
    for i, key in enumerate(sorted(value)):
        if i:
            out.append(",")
        out.append(_encode_str(key))
        out.append(":")
        _encode(value[key], out)
    out.append("}")


# The json module's non-ASCII string encoder escapes exactly the set RFC 8785 requires (",
# \, and U+0000..U+001F with short forms where they exist, lowercase \u00xx otherwise) and
# nothing more; it is the C implementation, which matters on the replay hot path.
_encode_str: Callable[[str], str] = json.encoder.encode_basestring
_c_encode = _make_c_encoder()

#: A string (or object key) as canonical JSON text, quotes included: the string rule above,
#: exported (unwrapped, it is C) for encoders compiled elsewhere (``runplane.wire.canonical_encoder``).
encode_str: Callable[[str], str] = _encode_str


def format_float(value: float) -> str:
    """Format a finite float as ECMAScript ``Number.prototype.toString`` does."""
    if not math.isfinite(value):
        raise ValueError("NaN and Infinity have no canonical JSON form")
    if value == 0.0:
        return "0"  # also for -0.0, as ECMAScript does
    sign = "-" if value < 0 else ""
    digits, point = _shortest_digits(abs(value))
    k = len(digits)
    if k <= point <= 21:
        body = digits + "0" * (point - k)
    elif 0 < point <= 21:
        body = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        body = "0." + "0" * (-point) + digits
    else:
        exp = point - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{'+' if exp >= 0 else '-'}{abs(exp)}"
    return sign + body


def _shortest_digits(value: float) -> tuple[str, int]:
    """Shortest round-trip digits d1..dk and n with value = 0.d1..dk × 10**n."""
    # Python's repr is the shortest round-trip representation (David Gay / Ryu style), the
    # same digit string ECMAScript requires; only the layout differs, which we redo above.
    text = repr(value)
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text) if exp_text else 0
    whole, _, frac = mantissa.partition(".")
    if frac == "0":
        frac = ""
    digits = (whole + frac).lstrip("0")
    leading_zeros = len(whole + frac) - len((whole + frac).lstrip("0"))
    point = len(whole) + exponent - leading_zeros
    digits = digits.rstrip("0")
    return digits, point
