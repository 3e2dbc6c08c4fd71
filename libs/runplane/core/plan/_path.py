"""JSON paths into a value: ``$``, ``$.a.b``, ``$.items[0].id``. Pure.

The one path syntax of runplane: plan source bindings and manifest argument sources both use
it (no filters, no wildcards, no expressions — a binding names exactly one value).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["MISSING", "PATH_PART", "format_path", "lookup", "parse_path"]

PATH_PART: Final = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]")


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def parse_path(text: Any) -> tuple[str | int, ...] | None:
    """``$``, ``$.a.b``, ``$.items[0].id`` → the parts; None when it is not such a path."""
    if not isinstance(text, str) or not text.startswith("$"):
        return None
    parts: list[str | int] = []
    pos = 1
    while pos < len(text):
        match = PATH_PART.match(text, pos)
        if match is None:
            return None
        parts.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        pos = match.end()
    return tuple(parts)


def format_path(parts: tuple[str | int, ...]) -> str:
    """The inverse of ``parse_path``."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def lookup(value: Any, parts: tuple[str | int, ...]) -> Any:
    """The value at ``parts`` inside ``value``, or ``MISSING`` (never an exception: a path that
    does not exist is the caller's positioned error to report)."""
    for part in parts:
        if isinstance(part, int) and isinstance(value, list) and 0 <= part < len(value):  # noqa: SIM114  (two branches: mypy narrows each index type)
            value = value[part]
        elif isinstance(part, str) and isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            return MISSING
    return value
