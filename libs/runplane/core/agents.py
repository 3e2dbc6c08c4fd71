"""Agents, their effect declarations, and the registry the executor looks capabilities up in.

    @agent("refund", durability="replayable", effects=[EffectDecl("charge_card", mutating=True,
           recovery="reconcile", probe="get_charge")])
    async def refund(ctx: StepCtx, input: dict) -> dict: ...

Registering runs the determinism lint (``runplane.core.lint``) over the function: an agent
that reads the wall clock or opens a socket is refused at import time, not at 3 a.m.

Providers and tools are small interfaces the executor implements (an OpenAI-compatible HTTP
provider, HTTP tools); ``runplane.testing`` has in-memory ones. The core never calls them —
it only describes the call (``LiveCall``) — so it stays free of I/O.
"""

from __future__ import annotations

import enum
import importlib
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from runplane.core.lint import LintFailed, lint_function
from runplane.core.turns import ToolCall
from runplane.core.updates import QueryDecl, UpdateDecl
from runplane.core.versions import code_digest, resolve, version_key, version_problem
from runplane.errors import ConfigError, TerminalError
from runplane.wire import Cost

__all__ = [
    "REGISTRY",
    "AgentFn",
    "AgentRegistry",
    "AgentSpec",
    "Durability",
    "EffectDecl",
    "Generation",
    "ModelProvider",
    "Recovery",
    "RetryPolicy",
    "Tool",
    "UnknownCapability",
    "agent",
    "evictable",
    "import_agent_modules",
]

AgentFn = Callable[..., Awaitable[Any]]


class Durability(enum.StrEnum):
    """How much of a run survives a stop (docs/glossary.md, "durability")."""

    CHECKPOINTED = "checkpointed"  # restore from the last checkpoint in a new era
    REPLAYABLE = "replayable"  # additionally, generations are served from the result journal


class Recovery(enum.StrEnum):
    """What to do with a call found announced but not recorded on restore (in doubt).

    Every call is announced before it acts (``EffectDecl.announce_rides`` names the one
    exception): RECONCILE / REQUIRES_OPERATOR need the intention durable to reconcile what a
    crash may have left applied; a RETRY call that costs (a generation, an HTTP or MCP tool)
    needs it so a crash mid-call leaves the intention, the retry and the cost in the journal
    instead of a call paid twice without a trace.
    """

    RETRY = "retry"
    RECONCILE = "reconcile"  # run the declared probe (itself journaled) to learn what happened
    REQUIRES_OPERATOR = "requires_operator"  # park on an OPERATOR task; default for mutating


@dataclass(frozen=True)
class RetryPolicy:
    """Live retries (collapsed into one recorded outcome); never applied on replay."""

    max_attempts: int = 3
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if (
            self.initial_backoff_s < 0
            or self.max_backoff_s < self.initial_backoff_s
            or self.multiplier < 1
        ):
            raise ValueError("backoff must satisfy 0 <= initial <= max and multiplier >= 1")

    def backoff_s(self, attempt: int) -> float:
        """Delay before attempt ``attempt`` (2, 3, …)."""
        return min(
            self.max_backoff_s, self.initial_backoff_s * self.multiplier ** max(0, attempt - 2)
        )


@dataclass(frozen=True)
class EffectDecl:
    """What an agent (or a tool) declares about one effect, by tool name.

    Anything undeclared gets the conservative treatment: mutating, requires_operator.
    """

    name: str
    mutating: bool = True
    recovery: Recovery | None = None  # None: REQUIRES_OPERATOR if mutating else RETRY
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_s: float = 30.0
    probe: str | None = None  # tool answering "did this call happen?" (for RECONCILE)
    # Performed inside the executor's process (a ``@tool`` function). Said by the tool the
    # executor offers, never by an agent's declaration (``engine.tools.decl_for``).
    in_process: bool = False
    # What a model is told of the tool when a loop offers it (``core.turns.ToolSpec``): what
    # it does, and the JSON Schema of its arguments (None: an object with any properties).
    description: str = ""
    input_schema: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    # A person approves, rejects or edits each call a loop proposes to it before it is made
    # (``ctx.approve_call``; the deployment policy can ask the same per sink, ``needs_approval``).
    needs_approval: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("an effect declaration needs a name")
        if self.recovery is not None and not isinstance(self.recovery, Recovery):
            object.__setattr__(self, "recovery", Recovery(self.recovery))
        if self.effective_recovery is Recovery.RECONCILE and not self.probe:
            raise ValueError(f"effect {self.name!r}: recovery 'reconcile' needs a probe")
        if self.timeout_s <= 0:
            raise ValueError(f"effect {self.name!r}: timeout_s must be > 0")

    @property
    def effective_recovery(self) -> Recovery:
        if self.recovery is not None:
            return self.recovery
        return Recovery.REQUIRES_OPERATOR if self.mutating else Recovery.RETRY

    @property
    def announce_rides(self) -> bool:
        """May this call's announce ride in the commit of its outcome? Only an in-process
        call that changes nothing and is safe to repeat: it costs nothing and leaves the
        process not at all, so a crash that loses both loses nothing worth a trace. Every
        other call commits its announce before it acts."""
        return self.in_process and not self.mutating and self.effective_recovery is Recovery.RETRY


@dataclass(frozen=True)
class Generation:
    """What a model call returned (the recorded value of a ``generation`` effect).

    ``tool_calls``: the calls the model proposed in this turn (``core.turns``), in its order;
    ``stop_reason``: why it stopped, in the provider-neutral words ``end``, ``tool_calls``,
    ``max_tokens`` (None: not reported). Both are left out of the JSON when empty, so a plain
    text generation records what it did before tools existed."""

    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    cost_units: float = 0.0
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str | None = None

    def cost(self) -> Cost:
        """What the call cost, as its record journals it (budgets and cost read it there)."""
        return Cost(tokens_in=self.tokens_in, tokens_out=self.tokens_out, units=self.cost_units)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_units": self.cost_units,
        }
        if self.tool_calls:
            out["tool_calls"] = [c.to_json() for c in self.tool_calls]
        if self.stop_reason is not None:
            out["stop_reason"] = self.stop_reason
        return out

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Generation:
        return cls(
            text=str(value["text"]),
            tokens_in=int(value.get("tokens_in", 0)),
            tokens_out=int(value.get("tokens_out", 0)),
            cost_units=float(value.get("cost_units", 0.0)),
            tool_calls=tuple(ToolCall.from_json(c) for c in value.get("tool_calls") or ()),
            stop_reason=None if value.get("stop_reason") is None else str(value["stop_reason"]),
        )


@runtime_checkable
class ModelProvider(Protocol):
    """A model endpoint, registered by ``name`` (the ``provider`` of ``ctx.generate``)."""

    name: str

    async def generate(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation: ...


@runtime_checkable
class Tool(Protocol):
    """A tool, registered by ``name``. ``decl`` is its own declaration (mutating, recovery,
    probe, retry, timeout), used when the agent declares nothing for it."""

    name: str
    decl: EffectDecl

    async def call(self, args: Mapping[str, Any], *, idempotency_key: str | None) -> Any: ...


class UnknownCapability(TerminalError):
    """No agent is registered under that capability."""


@dataclass(frozen=True)
class AgentSpec:
    """A registered agent: its function, durability, input schema and effect declarations."""

    capability: str
    fn: AgentFn
    durability: Durability = Durability.REPLAYABLE
    input_schema: Mapping[str, Any] | None = None
    effects: Mapping[str, EffectDecl] = field(default_factory=dict)
    # Declarative agents (runplane.core.manifest): hex SHA-256 of the manifest, covering the
    # whole agent; None for coded agents (their code is not hashed).
    digest: str | None = None
    # The model providers (``ctx.generate``'s first argument) the agent calls, and tools it
    # calls on their own declaration (named here, not re-declared in ``effects``).
    models: frozenset[str] = frozenset()
    tools: frozenset[str] = frozenset()
    # The declared agent version (runplane.core.versions); None: unversioned.
    version: str | None = None
    # The updates it handles (each with its validator) and the queries it answers, by name
    # (runplane.core.updates).
    updates: Mapping[str, UpdateDecl] = field(default_factory=dict)
    queries: Mapping[str, QueryDecl] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.capability:
            raise ValueError("an agent needs a capability name")
        if self.version is not None and (problem := version_problem(self.version)):
            raise ValueError(problem)
        if not isinstance(self.durability, Durability):
            object.__setattr__(self, "durability", Durability(self.durability))
        object.__setattr__(self, "models", frozenset(self.models))
        object.__setattr__(self, "tools", frozenset(self.tools))

    def needs(self) -> tuple[frozenset[str], frozenset[str]]:
        """(tools, model providers) this agent declares it calls: its effect declarations
        and their probes, ``tools``, and ``models``."""
        probes = {d.probe for d in self.effects.values() if d.probe}
        return frozenset(self.effects) | frozenset(probes) | self.tools, self.models

    def unavailable(self, tools: Iterable[str], models: Iterable[str]) -> str | None:
        """Why an executor offering ``tools`` and ``models`` cannot run this agent, or None.

        Admission refuses such a run with this reason, instead of the run failing mid-way at
        its first call of what is missing (after, perhaps, a mutation and a human decision)."""
        need_tools, need_models = self.needs()
        missing_tools = sorted(need_tools - set(tools))
        missing_models = sorted(need_models - set(models))
        parts = []
        if missing_tools:
            parts.append(f"tool(s) {', '.join(missing_tools)}")
        if missing_models:
            parts.append(f"model provider(s) {', '.join(missing_models)}")
        if not parts:
            return None
        return f"{self.capability} needs {' and '.join(parts)}, which the executor does not offer"

    def input_problem(self, value: Any) -> str | None:
        """Why ``value`` is not a valid input for this agent, or None (admission refuses with it)."""
        if self.input_schema is None:
            return None
        import jsonschema  # at call time: only admission validates inputs

        try:
            jsonschema.validate(value, self.input_schema)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "input"
            return f"{where}: {exc.message}"
        return None

    def decl_for(self, tool: str) -> EffectDecl | None:
        return self.effects.get(tool)

    def code_digest(self) -> str | None:
        """The manifest's digest for a declarative agent, else the hex SHA-256 of the source
        of the module defining the function (computed when asked, not at registration)."""
        return self.digest if self.digest is not None else code_digest(self.fn)


class AgentRegistry(Mapping[str, AgentSpec]):
    """Capability name → AgentSpec. Services take one; ``REGISTRY`` is the default that
    ``@agent`` fills when the executor imports ``RUNPLANE_AGENT_MODULES``."""

    def __init__(self, specs: Iterable[AgentSpec] = ()) -> None:
        self._specs: dict[str, AgentSpec] = {}  # capability -> its newest version
        self._versions: dict[str, dict[str | None, AgentSpec]] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: AgentSpec, *, lint: bool = True) -> AgentSpec:
        """Add ``spec``; refuse agent code that fails the determinism lint (its function, and
        its updates' validators and its queries, which must be as pure: a lambda's source is
        a line of the decorator, not a function the lint can read, so it is not linted)."""
        if lint:
            pure: list[Callable[..., Any]] = [
                d.validate for d in spec.updates.values() if d.validate is not None
            ]
            pure += [d.fn for d in spec.queries.values()]
            findings = [
                finding
                for fn in (spec.fn, *pure)
                if getattr(fn, "__name__", "") != "<lambda>"
                for finding in lint_function(fn)
            ]
            if findings:
                raise LintFailed(findings)
        versions = self._versions.setdefault(spec.capability, {})
        if (None in versions) != (spec.version is None) and versions:
            raise ValueError(
                f"capability {spec.capability!r}: every registered version must declare one"
            )
        existing = versions.get(spec.version)
        if existing is not None and _qualname(existing.fn) != _qualname(spec.fn):
            raise ValueError(
                f"capability {spec.capability!r}"
                + ("" if spec.version is None else f" version {spec.version}")
                + f" is already registered by {_qualname(existing.fn)}"
            )
        versions[spec.version] = spec  # same function re-imported: replace
        self._specs[spec.capability] = self.spec_for(spec.capability, None)
        return spec

    def spec_for(self, capability: str, version: str | None) -> AgentSpec:
        """The spec serving a run of ``version`` (``runplane.core.versions.resolve``: itself,
        else the newest of its line; None → the newest). ``UnknownCapability`` when the
        capability is not registered, ``VersionNotDeployed`` when the line is not."""
        versions = self._versions.get(capability)
        if not versions:
            raise UnknownCapability(f"no agent registered for capability {capability!r}")
        if None in versions:  # unversioned: the one there is serves every run
            return versions[None]
        chosen = resolve([v for v in versions if v is not None], version)
        return versions[chosen]

    def versions(self, capability: str) -> tuple[AgentSpec, ...]:
        """Every registered version of ``capability``, oldest first."""
        specs = self._versions.get(capability, {}).values()
        return tuple(sorted(specs, key=lambda s: version_key(s.version or "0")))

    def agent(
        self,
        capability: str,
        *,
        durability: Durability | str = Durability.REPLAYABLE,
        input_schema: Mapping[str, Any] | None = None,
        effects: Iterable[EffectDecl] = (),
        models: Iterable[str] = (),
        tools: Iterable[str] = (),
        version: str | None = None,
        updates: Iterable[UpdateDecl] = (),
        queries: Iterable[QueryDecl] = (),
    ) -> Callable[[AgentFn], AgentFn]:
        """Decorator registering ``async def fn(ctx, input)`` under ``capability`` (and
        ``version``: several versions of one capability are served side by side); the
        ``updates`` it handles and the ``queries`` it answers (``runplane.core.updates``)."""

        def register(fn: AgentFn) -> AgentFn:
            spec = AgentSpec(
                capability=capability,
                fn=fn,
                durability=Durability(durability),
                input_schema=input_schema,
                effects={decl.name: decl for decl in effects},
                models=frozenset(models),
                tools=frozenset(tools),
                version=version,
                updates=_by_name(updates, "update"),
                queries=_by_name(queries, "query"),
            )
            self.register(spec)
            fn.__runplane_agent__ = spec  # type: ignore[attr-defined]
            return fn

        return register

    def spec(self, capability: str) -> AgentSpec:
        """The spec for ``capability``; ``UnknownCapability`` if none."""
        try:
            return self._specs[capability]
        except KeyError:
            raise UnknownCapability(f"no agent registered for capability {capability!r}") from None

    def __getitem__(self, capability: str) -> AgentSpec:
        return self._specs[capability]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


def _by_name(decls: Iterable[UpdateDecl | QueryDecl], what: str) -> dict[str, Any]:
    named: dict[str, Any] = {}
    for decl in decls:
        if decl.name in named:
            raise ValueError(f"{what} {decl.name!r} is declared twice")
        named[decl.name] = decl
    return named


def _qualname(fn: AgentFn) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


REGISTRY = AgentRegistry()


def agent(
    capability: str,
    *,
    durability: Durability | str = Durability.REPLAYABLE,
    input_schema: Mapping[str, Any] | None = None,
    effects: Iterable[EffectDecl] = (),
    models: Iterable[str] = (),
    tools: Iterable[str] = (),
    registry: AgentRegistry | None = None,
    version: str | None = None,
    updates: Iterable[UpdateDecl] = (),
    queries: Iterable[QueryDecl] = (),
) -> Callable[[AgentFn], AgentFn]:
    """Register an agent in ``registry`` (default: ``REGISTRY``).

    The tools it calls are ``effects`` (declared here) and ``tools`` (names of tools that
    declare themselves: ``@tool``, the tools config); ``models`` the model providers it
    calls. Admission refuses its runs while the executor does not offer all of them.
    ``updates`` / ``queries``: what callers may ask a live run (``runplane.core.updates``)."""
    target = REGISTRY if registry is None else registry
    return target.agent(
        capability,
        durability=durability,
        input_schema=input_schema,
        effects=effects,
        models=models,
        tools=tools,
        version=version,
        updates=updates,
        queries=queries,
    )


def evictable(
    durability: Durability | str, idle_for_s: float, grace_s: float, outstanding: bool
) -> bool:
    """Whether a resident runtime may be evicted (docs/glossary.md, "resident, evicted, rebuilt").

    Replayable, silent for at least the idle grace, with nothing outstanding on its behalf →
    evict; it is rebuilt by replay (zero live calls) on its next message. Checkpointed →
    never: a restore would re-execute and re-bill everything since its last checkpoint.
    A runtime with a live call outstanding is never idle, whatever the clock says.
    """
    if Durability(durability) is Durability.CHECKPOINTED or outstanding:
        return False
    return idle_for_s >= grace_s


def import_agent_modules(
    modules: Iterable[str], registry: AgentRegistry | None = None
) -> AgentRegistry:
    """Import the agent modules (``Settings.agent_modules``, ``RUNPLANE_AGENT_MODULES``) and
    return the registry they register into (default: ``REGISTRY``).

    Admission and the executor both call this with the same setting, so admission admits
    exactly the capabilities the executor can run. A module that cannot be imported is a
    ``ConfigError`` at start-up, naming it. Modules are found on ``sys.path`` and in the
    current directory (the project's), so ``examples.quote`` needs no ``PYTHONPATH``.
    """
    # A console script's sys.path holds no project directory (`python -m` puts it first):
    # the agent modules of the directory a service or command starts in import without
    # PYTHONPATH. Appended, so an installed package of the same name still wins.
    modules, here = tuple(modules), os.getcwd()
    if modules and here not in sys.path and "" not in sys.path:
        sys.path.append(here)
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(f"RUNPLANE_AGENT_MODULES: cannot import {name!r}: {exc}") from exc
    return REGISTRY if registry is None else registry
