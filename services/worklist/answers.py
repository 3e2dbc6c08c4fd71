"""What a task asks, read safely (pure): the run's proposed answer and an operator task's call.

Split from ``decide.py`` (which re-exports it). JSON a person sends (an operator's observed
result) or a run proposes is refused past :data:`MAX_JSON_DEPTH` levels of nesting: deeper
documents cannot be parsed or re-encoded without recursion limits (a 500 in the API, a crash
in a reader), and no real result needs them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from runplane.wire import TaskKind, TaskRecord

__all__ = [
    "MAX_JSON_DEPTH",
    "OperatorCall",
    "answer_value",
    "json_too_deep",
    "operator_call",
    "parse_json",
]

MAX_JSON_DEPTH = 64


def json_too_deep(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` nests lists/objects more than ``limit`` levels (iteratively: a deep
    value must not exhaust the stack while it is being measured)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[object]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children)
    return False


def _nesting(text: str) -> int:
    """The deepest bracket nesting of JSON ``text``, outside strings (a cheap pre-check so the
    recursive parser never sees a document that would exhaust the stack)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_json(text: str, limit: int = MAX_JSON_DEPTH) -> object:
    """``json.loads`` that refuses (ValueError) documents nested deeper than ``limit``."""
    if _nesting(text) > limit:
        raise ValueError(f"JSON nested deeper than {limit} levels")
    try:
        return json.loads(text)
    except RecursionError as exc:  # belt and braces: the pre-check should make this unreachable
        raise ValueError(f"JSON nested too deeply: {exc}") from None


def answer_value(task: TaskRecord) -> object:
    """The run's proposed answer as JSON, or the raw text when it is not JSON (or is nested
    too deeply to show safely)."""
    try:
        return parse_json(task.task.answer_json)
    except ValueError:
        return task.task.answer_json


@dataclass(frozen=True)
class OperatorCall:
    """What an operator task asks about: the call in doubt (from the core's answer_json,
    ``{"effect": name, "request": {...}}``; a tool's request carries ``args`` and the
    ``idempotency_key`` the peer knows the call by)."""

    name: str
    args: object
    idempotency_key: str | None


def operator_call(task: TaskRecord) -> OperatorCall | None:
    """The call in doubt of an OPERATOR task; None for approvals or an unexpected answer."""
    if task.task.kind is not TaskKind.OPERATOR:
        return None
    value = answer_value(task)
    if not isinstance(value, dict) or not isinstance(value.get("effect"), str):
        return None
    request = value.get("request")
    if isinstance(request, dict) and "args" in request:
        key = request.get("idempotency_key")
        return OperatorCall(value["effect"], request["args"], key if isinstance(key, str) else None)
    return OperatorCall(value["effect"], request, None)
