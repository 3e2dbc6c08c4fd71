"""A manifest's values (what validation produces), its error, and the checker that collects
every problem of a document in one pass. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from runplane.core.agents import Durability, EffectDecl
from runplane.core.plan import Plan
from runplane.errors import ConfigError

API_VERSION: Final = "runplane/v1"
KINDS: Final = ("generate", "generate-then-approve", "tool-sequence", "plan", "agent-loop")
RESERVED_SOURCES: Final = frozenset({"input", "generation", "const"})
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
STEP_ID = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
DURATION_MS: Final = {"minutes": 60_000, "hours": 3_600_000, "days": 86_400_000}
MODEL_PARAMS: Final = frozenset({"temperature", "max_tokens"})


@dataclass(frozen=True, order=True)
class Problem:
    """One reason a manifest is refused: where (a dotted path into the document) and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '(document)'}: {self.message}"


class ManifestError(ConfigError):
    """A manifest that does not validate; ``problems`` lists every reason, in document order."""

    def __init__(self, problems: Sequence[Problem], origin: str = "manifest") -> None:
        self.problems = tuple(problems)
        self.origin = origin
        super().__init__(f"{origin}: " + "; ".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class Source:
    """Where an argument comes from: ``root`` is ``input``, ``generation``, an earlier step id,
    or ``const`` (then ``value`` is the constant); ``path`` the keys/indexes below it."""

    root: str
    path: tuple[str | int, ...] = ()
    value: Any = None

    def describe(self) -> str:
        return self.root + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in self.path)


@dataclass(frozen=True)
class ToolStep:
    id: str
    tool: str
    args: Mapping[str, Source]


@dataclass(frozen=True)
class Approval:
    role: str
    approvals: int = 1
    expires_in_ms: int | None = None
    on_expiry: str = "fail"
    allow_unattended: bool = False
    escalate_to: str | None = None
    question: str | None = None
    # The obligation the approval registers on the run's case: ``expires_in`` as declared (a
    # one-unit rule) on this calendar; the task expires when the obligation is due.
    expires_rule: Mapping[str, int] | None = None
    calendar: str = "wall"


@dataclass(frozen=True)
class Model:
    provider: str
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoopSpec:
    """Kind ``agent-loop``: the model chooses among ``tools`` (declared in ``spec.tools``)
    under ``instructions`` (a template over the input) until it answers or a budget ends it;
    ``mode="planned"``: it writes the plan over them first (``ctx.planned_loop``)."""

    instructions: str
    tools: tuple[str, ...]
    turns: int | None = None
    tool_calls: int | None = None
    tokens: int | None = None
    memory: bool = False  # ``memory: case``: notes kept on the case after approval
    mode: str = "free"


@dataclass(frozen=True)
class Manifest:
    """A validated manifest (build it with ``parse_manifest``); ``doc`` is the document."""

    name: str
    durability: Durability
    kind: str
    digest: str
    doc: Mapping[str, Any]
    input_schema: Mapping[str, Any] | None = None
    tools: tuple[EffectDecl, ...] = ()
    model: Model | None = None
    prompt: str | None = None
    steps: tuple[ToolStep, ...] = ()
    output: Mapping[str, Source] | None = None
    approval: Approval | None = None
    plan: Plan | None = None  # kind "plan" (_plan.py)
    loop: LoopSpec | None = None  # kind "agent-loop"

    @property
    def approve_before(self) -> int:
        """For tool-sequence with approval: the index of the step the task opens before."""
        mutating = {d.name for d in self.tools if d.mutating}
        return next((i for i, s in enumerate(self.steps) if s.tool in mutating), len(self.steps))


class Checker:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def fields(
        self, value: Any, path: str, required: Iterable[str], optional: Iterable[str] = ()
    ) -> dict[str, Any] | None:
        """``value`` as a mapping with only the allowed keys (unknown and missing ones reported)."""
        if not isinstance(value, Mapping):
            self.add(path, f"must be a mapping, got {type_name(value)}")
            return None
        required, optional = tuple(required), tuple(optional)
        allowed = (*required, *optional)
        for key in value:
            if key not in allowed:
                self.add(
                    join_path(path, str(key)),
                    f"unknown field {str(key)!r} (expected one of: {', '.join(allowed)})",
                )
        for key in required:
            if key not in value:
                self.add(path, f"missing required field {key!r}")
        return {str(k): v for k, v in value.items() if k in allowed}

    def string(
        self, value: Any, path: str, pattern: re.Pattern[str] | None = None, what: str = ""
    ) -> str | None:
        if not isinstance(value, str) or not value.strip():
            self.add(path, f"must be a non-empty string, got {type_name(value)}")
            return None
        if pattern is not None and not pattern.match(value):
            self.add(path, f"{value!r} is not a valid {what} (must match {pattern.pattern})")
            return None
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        if not isinstance(value, bool):
            self.add(path, f"must be true or false, got {type_name(value)}")
            return None
        return value

    def integer(self, value: Any, path: str, minimum: int) -> int | None:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            self.add(path, f"must be an integer >= {minimum}, got {value!r}")
            return None
        return value

    def choice(self, value: Any, path: str, choices: Sequence[str]) -> str | None:
        if value not in choices:
            self.add(path, f"must be one of {', '.join(choices)}, got {value!r}")
            return None
        return str(value)


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def join_path(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else key)
