"""The values of a tool-calling conversation, in one provider-neutral shape. Pure, no I/O.

A model turn is a ``generation`` effect whose prompt is a list of messages and whose params
may carry the tools the model may call (``ToolSpec``); its recorded value is a ``Generation``
whose ``tool_calls`` are what the model proposed. The providers translate this one shape to
their own protocol and back (OpenAI chat completions: ``tools``, ``tool_calls``, ``tool``
messages; Anthropic Messages: ``tools``, ``tool_use`` and ``tool_result`` blocks), so what is
journaled — the witness of a turn's request, the value of its answer — is the same whichever
provider served it.

The JSON forms (``to_json``) are what requests and recorded values hold: canonical, with
optional keys left out when empty, so a plain text conversation records exactly what it did
before tools existed.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "Describes",
    "Message",
    "Role",
    "StopReason",
    "ToolCall",
    "ToolChoice",
    "ToolSpec",
    "messages_from_json",
    "messages_to_json",
    "tool_choice_from_json",
    "tool_spec",
    "tools_from_json",
]


class Role(enum.StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class StopReason(enum.StrEnum):
    """Why a model turn stopped, in the providers' common words (``Generation.stop_reason``)."""

    END = "end"  # it answered (or stopped on a stop sequence, a refusal, a filter)
    TOOL_CALLS = "tool_calls"  # it proposed tool calls and waits for their results
    MAX_TOKENS = "max_tokens"  # it was cut off: the text (or a call) may be incomplete


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: its name, what it does, the JSON Schema of its arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a tool spec needs a name")
        if _object(self.parameters, f"tool {self.name!r} parameters").get("type") != "object":
            raise ValueError(f"tool {self.name!r}: parameters must be an object schema")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> ToolSpec:
        v = _object(value, "a tool spec")
        return cls(
            name=str(v["name"]),
            description=str(v.get("description", "")),
            parameters=_object(v.get("parameters", {"type": "object"}), "parameters"),
        )


@dataclass(frozen=True)
class ToolCall:
    """One call the model proposed: the provider's id for it, the tool, its arguments."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.id or not self.name:
            raise ValueError("a tool call needs an id and a tool name")
        _object(self.arguments, f"the arguments of tool call {self.id!r}")

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": dict(self.arguments)}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> ToolCall:
        v = _object(value, "a tool call")
        return cls(id=str(v["id"]), name=str(v["name"]), arguments=v.get("arguments", {}))


@dataclass(frozen=True)
class Message:
    """One message of a conversation. An assistant message may carry ``tool_calls``; a tool
    message answers one of them (``tool_call_id``), ``is_error`` when the call failed or was
    refused (the model reads why and may act on it)."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "role", Role(self.role))
        if self.tool_calls and self.role is not Role.ASSISTANT:
            raise ValueError("only an assistant message carries tool calls")
        if (self.role is Role.TOOL) != (self.tool_call_id is not None):
            raise ValueError("a tool message, and only a tool message, answers a tool_call_id")
        if self.is_error and self.role is not Role.TOOL:
            raise ValueError("only a tool message can be an error")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": str(self.role), "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_json() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.is_error:
            out["is_error"] = True
        return out

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Message:
        v = _object(value, "a message")
        content = v.get("content")
        if content is not None and not isinstance(content, str):
            # Said, not stringified: a list of content parts would reach the model as a repr.
            raise ValueError(f"a message's content is a string, got {type(content).__name__}")
        return cls(
            role=Role(str(v["role"])),
            content=content or "",
            tool_calls=tuple(ToolCall.from_json(c) for c in v.get("tool_calls") or ()),
            tool_call_id=None if v.get("tool_call_id") is None else str(v["tool_call_id"]),
            is_error=bool(v.get("is_error", False)),
        )


def messages_to_json(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [m.to_json() for m in messages]


def messages_from_json(prompt: Any) -> tuple[Message, ...]:
    """A generation's prompt as messages: a string is one user message."""
    if isinstance(prompt, str):
        return (Message(Role.USER, prompt),)
    if not isinstance(prompt, Sequence):
        raise ValueError(f"a prompt is a string or a list of messages, got {type(prompt).__name__}")
    return tuple(Message.from_json(m) for m in prompt)


class Describes(Protocol):
    """What a model may be told of a tool: ``EffectDecl`` has these (``core.agents``)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def input_schema(self) -> Mapping[str, Any] | None: ...


def tool_spec(decl: Describes) -> ToolSpec:
    """The tool as a loop offers it to a model: its declared description and input schema
    (no schema declared: an object with any properties, so the model is not told a falsehood
    such as "no arguments")."""
    schema = decl.input_schema
    return ToolSpec(
        name=decl.name,
        description=decl.description,
        parameters=dict(schema) if schema is not None else {"type": "object"},
    )


def tools_from_json(value: Any) -> tuple[ToolSpec, ...]:
    """A generation's ``tools`` param (a list of ``ToolSpec`` JSONs), names unique."""
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ValueError(f"tools must be a list of tool specs, got {type(value).__name__}")
    specs = tuple(ToolSpec.from_json(v) for v in value)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"tools: a tool is offered twice ({sorted(names)})")
    return specs


@dataclass(frozen=True)
class ToolChoice:
    """A generation's ``tool_choice`` param: ``auto`` (the model decides), ``none`` (answer
    in text), ``required`` (call at least one tool), or ``tool`` with ``name`` (call that)."""

    mode: str
    name: str | None = None


_CHOICES = frozenset({"auto", "none", "required"})


def tool_choice_from_json(value: Any, tools: Sequence[ToolSpec]) -> ToolChoice | None:
    """``None`` when not given; a name must be one of the offered ``tools``."""
    if value is None:
        return None
    if isinstance(value, str) and value in _CHOICES:
        return ToolChoice(value)
    if isinstance(value, Mapping) and set(value) == {"name"} and isinstance(value["name"], str):
        if value["name"] not in {t.name for t in tools}:
            raise ValueError(f"tool_choice names {value['name']!r}, which is not offered")
        return ToolChoice("tool", value["name"])
    raise ValueError(f'tool_choice is "auto", "none", "required" or {{"name": ...}}, not {value!r}')
