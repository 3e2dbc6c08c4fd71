"""Tools declared in Python, where the agents are: ``@tool`` and the registry it fills.

    from runplane.providers import tool

    @tool(mutating=False, recovery="retry", timeout_s=5, sensitivity="confidential")
    async def lookup_customer(customer_id: str) -> dict: ...

Importing an agent module (``RUNPLANE_AGENT_MODULES``) registers its tools in ``TOOLS``, as
``@agent`` registers its agents in ``runplane.core.REGISTRY``; the stock executor
(``runplane serve executor``) serves them and admission counts them as offered. The tool's own
declaration is its :class:`~runplane.core.EffectDecl` (mutating, recovery, probe, timeout,
retry); an agent's declaration for the same name overrides it, as for any tool.

What a model is told of the tool when a loop offers it (``EffectDecl.description`` and
``input_schema``) comes from the function itself: its docstring and signature
(``runplane.providers._schema``), unless ``@tool(description=..., input_schema=...)`` says it.

A tool function does I/O by nature, so it is not put through the determinism lint: it runs
only live, and its result is journaled and served from the journal on replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from runplane.core.agents import EffectDecl, ModelProvider, Recovery, RetryPolicy
from runplane.errors import ConfigError
from runplane.providers._function_tool import FunctionTool
from runplane.providers._labels import source_label
from runplane.providers._schema import (
    declared_schema,
    docstring_description,
    function_schema,
)
from runplane.wire import Label

F = TypeVar("F", bound=Callable[..., Any])


class ToolRegistry(Mapping[str, FunctionTool]):
    """Tool name → the registered Python tool."""

    def __init__(self) -> None:
        self._tools: dict[str, FunctionTool] = {}

    def register(self, tool: FunctionTool) -> FunctionTool:
        existing = self._tools.get(tool.name)
        if existing is not None and _qualname(existing.fn) != _qualname(tool.fn):
            raise ConfigError(
                f"tool {tool.name!r} is already registered by {_qualname(existing.fn)}"
            )
        self._tools[tool.name] = tool  # the same function re-imported: replace
        return tool

    def __getitem__(self, name: str) -> FunctionTool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)


def _qualname(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


TOOLS = ToolRegistry()


class ModelRegistry(Mapping[str, ModelProvider]):
    """Provider name → a model provider registered in Python by an agent module (an adapter
    that performs a framework's own model class, ``runplane.contrib``), served by the stock
    executor beside the tools config's providers, as ``TOOLS`` is beside its tools."""

    def __init__(self) -> None:
        self._providers: dict[str, ModelProvider] = {}

    def register(self, provider: ModelProvider) -> ModelProvider:
        existing = self._providers.get(provider.name)
        if existing is not None and type(existing) is not type(provider):
            raise ConfigError(
                f"model provider {provider.name!r} is already registered by "
                f"{type(existing).__qualname__}"
            )
        self._providers[provider.name] = provider  # the same module re-imported: replace
        return provider

    def __getitem__(self, name: str) -> ModelProvider:
        return self._providers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._providers)

    def __len__(self) -> int:
        return len(self._providers)


MODELS = ModelRegistry()


def tool(
    name: str | None = None,
    *,
    mutating: bool = True,
    recovery: Recovery | str | None = None,
    probe: str | None = None,
    timeout_s: float = 30.0,
    retry: RetryPolicy | None = None,
    trust: str | None = None,
    sensitivity: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
    registry: ToolRegistry | None = None,
) -> Callable[[F], F]:
    """Register a sync or async function as the tool ``name`` (default: its own name).

    Undeclared means the conservative treatment, as everywhere: ``mutating=True`` and recovery
    ``requires_operator``. ``trust`` / ``sensitivity`` label what the tool returns (joined with
    the source label the engine applies, never lowering it). ``description`` /
    ``input_schema`` override what the docstring and the signature say.
    """
    target = TOOLS if registry is None else registry

    def register(fn: F) -> F:
        tool_name = name or fn.__name__
        if input_schema is None:
            said, schema = function_schema(tool_name, fn)
        else:
            said, schema = docstring_description(fn), declared_schema(tool_name, input_schema)
        decl = EffectDecl(
            tool_name,
            mutating=mutating,
            recovery=None if recovery is None else Recovery(recovery),
            probe=probe,
            timeout_s=timeout_s,
            retry=retry if retry is not None else RetryPolicy(),
            description=said if description is None else description,
            input_schema=schema,
        )
        label: Label | None = source_label(tool_name, trust=trust, sensitivity=sensitivity)
        target.register(FunctionTool(tool_name, fn, decl=decl, label=label))
        return fn

    return register
