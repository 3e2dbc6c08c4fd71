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
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import math
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["canonical_bytes", "canonical_json", "format_float", "sha256_hex"]

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def canonical_json(value: Any) -> str:
    """Return the canonical JSON text of ``value`` (see the module docstring)."""
    parts: list[str] = []
    _encode(value, parts)
    return "".join(parts)


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
