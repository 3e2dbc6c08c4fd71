"""JSON paths of the small form the gate and releases name fields by. Pure.

    $                 the whole document
    $.recipient       a member
    $.lines[0].memo   members and list indexes

Only this subset: a protected field is one concrete place in the JSON an effect sends, never a
pattern — a wildcard would let a rule silently cover a field its author did not think of.
``unwrap`` takes the explicit wrappers (``Labeled``, ``Released``) out of a value an agent hands
to an effect and says where each one was, so the bytes sent and the bytes checked are one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from runplane.errors import RunplaneError

__all__ = ["InvalidPath", "get", "leaves", "parse", "under", "unwrap"]

_STEP: Final = re.compile(r"\.([A-Za-z_][A-Za-z0-9_\-]*)|\[(\d+)\]")


class InvalidPath(RunplaneError, ValueError):
    """A path outside the supported subset (``$``, ``.member``, ``[index]``)."""


def parse(path: str) -> tuple[str | int, ...]:
    """``"$.a[0].b"`` → ``("a", 0, "b")``."""
    if not path.startswith("$"):
        raise InvalidPath(f"a JSON path starts with '$': {path!r}")
    steps: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _STEP.match(path, pos)
        if m is None:
            raise InvalidPath(f"unsupported JSON path {path!r} at {pos}")
        steps.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    return tuple(steps)


def get(doc: Any, path: str) -> Any:
    """The value at ``path``, or ``None`` when the document has no such place."""
    node = doc
    for step in parse(path):
        in_list = isinstance(step, int) and isinstance(node, list) and 0 <= step < len(node)
        in_map = isinstance(step, str) and isinstance(node, Mapping) and step in node
        if not (in_list or in_map):
            return None
        node = node[step]
    return node


def leaves(doc: Any, prefix: str = "$") -> Iterator[tuple[str, Any]]:
    """Every scalar of ``doc`` (str, number, bool, null) with its path, in document order.
    An empty list or object is a leaf of its own (it is sent, so it is checked)."""
    if isinstance(doc, Mapping) and doc:
        for key in doc:
            yield from leaves(doc[key], f"{prefix}.{key}")
    elif isinstance(doc, list | tuple) and doc:
        for i, item in enumerate(doc):
            yield from leaves(item, f"{prefix}[{i}]")
    else:
        yield prefix, doc


def under(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` or inside it (``$.a[0]`` is under ``$.a``)."""
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


def unwrap(doc: Any, wrappers: type, prefix: str = "$") -> tuple[Any, dict[str, Any]]:
    """``doc`` with every instance of ``wrappers`` replaced by its ``.value`` (recursively),
    and ``{path: wrapper}`` for each one found. Mappings become dicts and tuples lists, as
    canonical JSON would send them; with no wrapper inside, ``doc`` itself comes back untouched
    (so a request without wrappers keeps exactly the witness it always had). Every tool call
    goes through here: the scan for a wrapper is the fast path, the rebuild the rare one."""
    if not _contains(doc, wrappers):
        return doc, {}
    found: dict[str, Any] = {}
    plain = _unwrap(doc, wrappers, prefix, found)
    return plain, found


_SCALARS: Final = (str, int, float, bool, type(None))


def _contains(doc: Any, wrappers: type) -> bool:
    # Exact type checks first, no ABCs: this runs on every tool call's arguments.
    kind = type(doc)
    if kind is dict:
        items: Any = doc.values()
    elif kind is list or kind is tuple:
        items = doc
    elif kind in _SCALARS:
        return False
    elif isinstance(doc, wrappers):
        return True
    elif isinstance(doc, Mapping):
        items = doc.values()
    else:
        return False
    return any(type(v) not in _SCALARS and _contains(v, wrappers) for v in items)


def _unwrap(doc: Any, wrappers: type, path: str, found: dict[str, Any]) -> Any:
    if isinstance(doc, wrappers):
        found[path] = doc
        return _unwrap(getattr(doc, "value"), wrappers, path, found)  # noqa: B009 (typed: object)
    if isinstance(doc, Mapping):
        return {k: _unwrap(v, wrappers, f"{path}.{k}", found) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [_unwrap(v, wrappers, f"{path}[{i}]", found) for i, v in enumerate(doc)]
    return doc
