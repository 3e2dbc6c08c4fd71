"""A Pydantic AI agent, unchanged, run durably inside a runplane agent: ``DurableAgent``.

    support_agent = Agent("openai:gpt-4o", name="support", instructions="...")

    @support_agent.tool_plain
    def crm_lookup(customer_id: str) -> dict: ...

    durable = DurableAgent(
        support_agent,
        effects=[EffectDecl("crm_lookup", mutating=False, recovery=Recovery.RETRY)],
    )

    @agent("support", tools=durable.tools, effects=durable.effects, models=[durable.provider])
    async def support(ctx: StepCtx, input: dict) -> dict:
        result = await durable.run(ctx, input["request"])
        return {"answer": result.output}

Pydantic AI's own loop drives the run (its graph, validation, retries, output types); every
side effect it would perform is a journaled runplane effect instead, as its own durable
engines (Temporal, DBOS) do it — a wrapper ``Model`` and a wrapper toolset:

* **Model requests** are ``generation`` effects (``ctx.generate``) on the provider this module
  registers for the agent (``pydantic_ai.<name>``, in ``runplane.providers.MODELS``, served
  by the stock executor beside the configured ones): the request is the conversation
  (``ModelMessagesTypeAdapter``'s JSON, the framework's own timestamps left out so a replay
  builds the same bytes), the model settings and the request parameters; the executor
  performs the framework's own ``Model.request`` and records its answer as a ``Generation``
  — text, the proposed tool calls with the model's call ids, usage. The agent side hands
  Pydantic AI the ``ModelResponse`` rebuilt from that record, first run and replay alike, so
  a replay calls nobody and sees what the first run saw. What a ``Generation`` does not hold
  (thinking parts, provider details, native tool parts) does not reach the framework.
* **Tool calls** (function tools, and any toolset's tools declared in ``effects``, MCP servers
  included) are ``tool`` effects (``ctx.tool``) under each tool's declaration: every tool is
  registered as a runplane ``@tool`` (``runplane.providers.TOOLS``) whose performer validates
  the arguments and calls the agent's own toolset in the executor (a function that already
  is a runplane ``@tool`` stays that tool, as declared there). Each call carries the
  model's call id (option ``proposal``), so the sink gate finds the recorded generation that
  proposed it and labels its arguments exactly (``engine.sinkgate``): a value copied from an
  untrusted tool's result into a protected field is refused (``SinkRefused``), never
  performed, and Pydantic AI's model reads the refusal as the tool's result. A tool the
  deployment policy (or its declaration) marks ``needs_approval`` parks the run on a
  worklist task (``ctx.approve_call``) before it is made; who must approve is journaled once
  per run (``pydantic_ai:<name>:tools``), so a replay asks whom it asked.

**How it runs.** An agent coroutine may await only runplane effects, and Pydantic AI needs an
event loop, so each ``run`` drives the framework on a thread of its own: the wrapper model and
toolset hand each request to the agent coroutine, which performs it as an effect and hands the
journaled value back. The framework computes between effects and performs nothing (the agent
waits for its next request, bounded, as for any agent code between effects); its tool calls
are made one at a time, in the order its tasks ask — the model's — so the journal's order is
the same every run (reads are not fanned out as the agent loop fans them). An evicted run
unwinds the framework's run and its thread; the next era replays it from the start.

**Non-determinism.** The run id and conversation id are the runplane run's id; the framework's
timestamps are left out of what is journaled and the response's is the logical clock
(``ctx.now``). Not routed through the context: the framework's own clock and ids elsewhere
(``now_utc``, ``uuid7`` in messages it builds), which therefore never reach a journaled
request. A toolset's ``get_tools`` and ``__aenter__`` run on the agent side: an MCP server's
connection and listing are not journaled effects (its calls are, once declared in
``effects``). The framework's own streaming (``run_stream``) is refused: the process that
would read it is not the one watching. Each model request is a generation like the agent
loop's, so its tokens reach the run's watchers on ``runs.stream`` (``runplane runs watch``,
``GET /runs/{id}/stream``) as they arrive, wherever the executor streams generations.

**Versions.** Tested with ``pydantic-ai-slim`` ``TESTED`` (the ``runplane[pydantic-ai]`` extra);
importing this module with another installed, or none, is a ``ConfigError`` at start-up (the
executor imports the agent modules first), never a failure in the middle of a run.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version

from runplane.errors import ConfigError

TESTED = ">=2.68,<3"
_LOWEST, _BEYOND = (2, 68), (3, 0)


def check_version(installed: str) -> None:
    """``ConfigError`` unless ``installed`` (a ``pydantic-ai-slim`` version) is in ``TESTED``."""
    found = re.match(r"(\d+)\.(\d+)", installed)
    numbers = None if found is None else (int(found.group(1)), int(found.group(2)))
    if numbers is None or not _LOWEST <= numbers < _BEYOND:
        raise ConfigError(
            f"runplane.contrib.pydantic_ai is tested with pydantic-ai-slim{TESTED}, "
            f"{installed} is installed: pip install 'runplane[pydantic-ai]'"
        )


def _installed() -> str:
    try:
        return version("pydantic-ai-slim")
    except PackageNotFoundError:
        raise ConfigError(
            "runplane.contrib.pydantic_ai needs pydantic-ai-slim: "
            "pip install 'runplane[pydantic-ai]'"
        ) from None


check_version(_installed())

# The framework is imported only once its version is known to fit (above).
import asyncio  # noqa: E402
import queue  # noqa: E402
import threading  # noqa: E402
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence  # noqa: E402
from dataclasses import dataclass, replace  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any, Generic, TypeVar  # noqa: E402

from pydantic import TypeAdapter  # noqa: E402
from pydantic_ai import Agent, RunContext  # noqa: E402
from pydantic_ai.agent import AgentRunResult  # noqa: E402
from pydantic_ai.exceptions import ModelRetry, UserError  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models import Model, ModelRequestParameters, infer_model  # noqa: E402
from pydantic_ai.models.wrapper import WrapperModel  # noqa: E402
from pydantic_ai.settings import ModelSettings  # noqa: E402
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset  # noqa: E402
from pydantic_ai.toolsets.abstract import ToolsetTool  # noqa: E402
from pydantic_ai.usage import RequestUsage, RunUsage  # noqa: E402
from pydantic_core import to_jsonable_python  # noqa: E402

from runplane.core import EffectDecl, Generation, StepCtx  # noqa: E402
from runplane.core.loop import offered, perform_calls  # noqa: E402
from runplane.core.policy import ApprovalRule  # noqa: E402
from runplane.core.turns import ToolCall  # noqa: E402
from runplane.errors import TerminalError  # noqa: E402
from runplane.providers import MODELS, TOOLS, ModelRegistry, ToolRegistry, tool  # noqa: E402

__all__ = [
    "TESTED",
    "DurableAgent",
    "PydanticAIProvider",
    "check_version",
    "generation_of",
    "request_json",
    "response_of",
]

OutputT = TypeVar("OutputT")

_PARAMETERS: TypeAdapter[ModelRequestParameters] = TypeAdapter(ModelRequestParameters)
# The framework stamps each message and part with its own clock: left out of what is
# journaled (a replay builds the same request), filled in again where it is read back.
_STAMPS = frozenset({"timestamp"})
# How long the agent waits for the framework to ask for its next effect: it only computes
# in between (every wait on the world is an effect), so this bounds a hung framework.
_STEP_TIMEOUT_S = 60.0


# -- the journaled shapes ------------------------------------------------------------------


def request_json(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """The conversation as journaled: the framework's JSON without its own timestamps."""
    dumped: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    out = []
    for message in dumped:
        kept = {k: v for k, v in message.items() if k not in _STAMPS}
        if isinstance(kept.get("parts"), list):
            kept["parts"] = [
                {k: v for k, v in part.items() if k not in _STAMPS}
                if isinstance(part, dict)
                else part
                for part in kept["parts"]
            ]
        out.append(kept)
    return out


def generation_of(response: ModelResponse) -> Generation:
    """What is recorded of a model's answer: its text, its tool calls (the model's ids, in its
    order), its usage. Parts of other kinds (thinking, native tools) are not kept."""
    text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
    calls = tuple(
        ToolCall(p.tool_call_id, p.tool_name, p.args_as_dict())
        for p in response.parts
        if isinstance(p, ToolCallPart)
    )
    return Generation(
        text=text,
        tokens_in=response.usage.input_tokens,
        tokens_out=response.usage.output_tokens,
        tool_calls=calls,
        stop_reason="tool_calls" if calls else "end",
    )


def response_of(generation: Generation, model_name: str, at_ms: int) -> ModelResponse:
    """The ``ModelResponse`` the framework is handed for a recorded generation, stamped with
    the logical clock: the same on the first run and on every replay."""
    parts: list[ModelResponsePart] = []
    if generation.text:
        parts.append(TextPart(generation.text))
    parts.extend(
        ToolCallPart(c.name, dict(c.arguments), tool_call_id=c.id) for c in generation.tool_calls
    )
    return ModelResponse(
        parts=parts,
        usage=RequestUsage(input_tokens=generation.tokens_in, output_tokens=generation.tokens_out),
        model_name=model_name,
        timestamp=datetime.fromtimestamp(at_ms / 1000, tz=UTC),
    )


# -- the executor side: the provider and the tool performers -------------------------------


class PydanticAIProvider:
    """A ``ModelProvider`` that performs the framework's own model (``Model.request``) on a
    journaled request (``request_json``, settings, request parameters) → ``Generation``.
    ``reply`` is the same, synchronous, for ``runplane.testing.Driver``."""

    def __init__(self, name: str, model: Model | str | None) -> None:
        self.name = name
        self._spec = model
        self._model: Model | None = None

    def model(self) -> Model:
        if self._model is None:
            if self._spec is None:
                raise ConfigError(f"{self.name}: the Pydantic AI agent names no model")
            self._model = infer_model(self._spec)
        return self._model

    async def generate(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        messages = ModelMessagesTypeAdapter.validate_python(prompt)
        # A TypedDict: its JSON is the settings (a value JSON cannot carry is not journaled).
        settings: ModelSettings | None = params.get("settings")
        parameters = _PARAMETERS.validate_python(params.get("parameters") or {})
        response = await self.model().request(messages, settings, parameters)
        return generation_of(response)

    def reply(self, model: str, prompt: Any, params: Mapping[str, Any]) -> Generation:
        return asyncio.run(self.generate(model, prompt, params))


def _performer(
    toolsets: Callable[[], Sequence[AbstractToolset[Any]]],
    context: Callable[[str], RunContext[Any]],
    name: str,
) -> Callable[..., Awaitable[Any]]:
    """The ``@tool`` function of the framework's tool ``name``: validate the journaled
    arguments as the framework would and call the agent's own toolset (entered for the call,
    so an MCP server's session is open) → the result as JSON."""

    async def perform(**args: Any) -> Any:
        rc = context(name)
        for toolset in toolsets():
            async with toolset:
                found = (await toolset.get_tools(rc)).get(name)
                if found is None:
                    continue
                validated = found.args_validator.validate_python(args)
                result = await toolset.call_tool(
                    name, validated, replace(rc, tool_call_id=None), found
                )
                return to_jsonable_python(result)
        raise TerminalError(f"the Pydantic AI agent has no tool {name!r}")

    return perform


# -- the agent side: the bridge between the framework's event loop and the agent --------------


@dataclass(frozen=True)
class _ModelAsk:
    model_name: str
    prompt: list[dict[str, Any]]
    settings: Any
    parameters: Any


@dataclass(frozen=True)
class _ToolAsk:
    name: str
    call_id: str | None
    args: dict[str, Any]


@dataclass(frozen=True)
class _Answer:
    """A tool effect's outcome for the framework: its JSON value, or the error it read."""

    ok: bool
    value: Any = None
    error_type: str = ""
    error: str = ""


@dataclass
class _Asked:
    ask: _ModelAsk | _ToolAsk
    future: asyncio.Future[Any]


@dataclass(frozen=True)
class _Done(Generic[OutputT]):
    result: AgentRunResult[OutputT] | None
    error: BaseException | None


class _Abandoned(Exception):
    """Thrown into the framework's pending request when the agent stops waiting (an
    eviction, a failed effect): its run unwinds and the thread ends."""


class _Bridge:
    """One framework run on its own thread and event loop. The framework asks (``ask``, on
    its thread) and waits; the agent takes each ask (``next``), performs it as an effect and
    answers (``answer``), until the run is done."""

    def __init__(self, main: Callable[[_Bridge], Awaitable[AgentRunResult[Any]]]) -> None:
        self._out: queue.Queue[_Asked | _Done[Any]] = queue.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: _Asked | None = None
        self._done = False
        # Held by each tool call while it is handed over: one at a time, in the order the
        # framework's tasks ask (the model's), across all of the agent's toolsets.
        self.serial: asyncio.Lock | None = None
        self._main = main
        self._thread = threading.Thread(target=self._run, name="runplane-pydantic-ai", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            result = asyncio.run(self._drive())
        except BaseException as exc:  # the run's outcome, handed to the agent to raise
            self._out.put(_Done(None, exc))
        else:
            self._out.put(_Done(result, None))

    async def _drive(self) -> AgentRunResult[Any]:
        self._loop = asyncio.get_running_loop()
        self.serial = asyncio.Lock()
        return await self._main(self)

    async def ask(self, ask: _ModelAsk | _ToolAsk) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._out.put(_Asked(ask, future))
        return await future

    def next(self) -> _Asked | _Done[Any]:
        try:
            message = self._out.get(timeout=_STEP_TIMEOUT_S)
        except queue.Empty:
            raise TerminalError(
                f"the Pydantic AI run asked for nothing in {_STEP_TIMEOUT_S:.0f} s"
            ) from None
        self._pending = message if isinstance(message, _Asked) else None
        self._done = isinstance(message, _Done)
        return message

    def answer(self, asked: _Asked, value: Any) -> _Asked | _Done[Any]:
        self._settle(asked, value, None)
        return self.next()

    def _settle(self, asked: _Asked, value: Any, error: BaseException | None) -> None:
        def settle() -> None:
            if asked.future.done():
                return
            if error is not None:
                asked.future.set_exception(error)
            else:
                asked.future.set_result(value)

        assert self._loop is not None  # an ask comes from inside the running loop
        self._loop.call_soon_threadsafe(settle)
        self._pending = None

    def close(self) -> None:
        """Unwind the framework's run if it still waits (every request it still makes is
        answered with ``_Abandoned``) and let the thread end; bounded, so an eviction never
        waits on a framework that will not stop (its daemon thread is left behind)."""
        while not self._done:
            if self._pending is not None:
                self._settle(self._pending, None, _Abandoned())
            try:
                self.next()
            except TerminalError:
                return
        self._thread.join(timeout=_STEP_TIMEOUT_S)


class _DurableModel(WrapperModel):
    """The agent's model, as the framework sees it during a durable run: each request is
    handed to the agent, which performs it as a generation effect."""

    def __init__(self, wrapped: Model, bridge: _Bridge) -> None:
        super().__init__(wrapped)
        self._bridge = bridge

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        ask = _ModelAsk(
            self.model_name,
            request_json(messages),
            to_jsonable_python(model_settings),
            _PARAMETERS.dump_python(model_request_parameters, mode="json"),
        )
        generation, at_ms = await self._bridge.ask(ask)
        return response_of(generation, self.model_name, at_ms)

    def request_stream(self, *args: Any, **kwargs: Any) -> Any:
        raise UserError("runplane.contrib.pydantic_ai: streaming (run_stream) is not durable")


@dataclass
class _DurableToolset(WrapperToolset[Any]):
    """One of the agent's toolsets, as the framework sees it during a durable run: each call
    is handed to the agent, which performs it as a tool effect — one at a time, in the order
    the framework asks (the model's), so the journal's order is the same every run."""

    bridge: _Bridge | None = None

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        assert self.bridge is not None and self.bridge.serial is not None
        async with self.bridge.serial:
            answer: _Answer = await self.bridge.ask(
                _ToolAsk(name, ctx.tool_call_id, to_jsonable_python(tool_args))
            )
        if answer.ok:
            return answer.value
        if answer.error_type == ModelRetry.__name__:  # the tool asked the model to try again
            raise ModelRetry(answer.error)
        return f"{answer.error_type}: {answer.error}"


# -- the adapter -------------------------------------------------------------------------------


def _function_tools(
    toolsets: Iterable[AbstractToolset[Any]],
) -> dict[str, tuple[EffectDecl, Callable[..., Any]]]:
    """Every function tool of ``toolsets``: what the model is told of it (its description and
    argument schema) and its function."""
    found: dict[str, tuple[EffectDecl, Callable[..., Any]]] = {}

    def visit(leaf: AbstractToolset[Any]) -> None:
        if isinstance(leaf, FunctionToolset):
            for name, t in leaf.tools.items():
                said = EffectDecl(
                    name,
                    description=t.description or "",
                    input_schema=t.function_schema.json_schema,
                )
                found[name] = (said, t.function)

    for toolset in toolsets:
        toolset.apply(visit)
    return found


class DurableAgent(Generic[OutputT]):
    """``agent`` made durable: ``await durable.run(ctx, prompt)`` inside a runplane agent →
    the framework's ``AgentRunResult`` (module docstring).

    ``effects``: each tool's declaration (mutating, recovery, retry, timeout, probe), by the
    framework's tool name — undeclared, a tool is mutating with recovery
    ``requires_operator``, as everywhere; a tool of a toolset other than a function toolset
    (an MCP server's) is offered only once declared here. ``untrusted``: tools whose results
    are what someone outside wrote. ``model``: the model to perform (default: the agent's).
    ``deps``: what the tools get as ``RunContext.deps`` in the executor (a per-run ``deps``
    passed to ``run`` reaches the framework's own code — instructions, validators — but not
    the tools, which run where the executor performs them). ``name``: the provider and
    journal name (default: the agent's ``name``). Registering its tools and its provider at
    construction is what lets the stock executor serve them (``RUNPLANE_AGENT_MODULES``)."""

    def __init__(
        self,
        agent: Agent[Any, OutputT],
        *,
        effects: Iterable[EffectDecl] = (),
        untrusted: Iterable[str] = (),
        model: Model | str | None = None,
        deps: Any = None,
        name: str | None = None,
        tools: ToolRegistry | None = None,
        models: ModelRegistry | None = None,
    ) -> None:
        self.name = name or agent.name or ""
        if not self.name:
            raise ConfigError("DurableAgent: the Pydantic AI agent needs a name (or name=)")
        self._agent = agent
        self._deps = deps
        self.provider = f"pydantic_ai.{self.name}"
        self._models = PydanticAIProvider(
            self.provider, model if model is not None else agent.model
        )
        declared = {d.name: d for d in effects}
        registry = TOOLS if tools is None else tools
        offered = _function_tools(agent.toolsets)
        distrusted = frozenset(untrusted)
        decls = []
        for tool_name in sorted({*offered, *declared}):
            said, fn = offered.get(tool_name, (EffectDecl(tool_name), None))
            decl = replace(
                declared.get(tool_name, EffectDecl(tool_name)),
                description=said.description,
                input_schema=said.input_schema,
            )
            decls.append(decl)
            if fn is not None and _registered(registry, tool_name, fn):
                continue  # a runplane @tool handed to the framework stays that tool
            perform = _performer(lambda: self._agent.toolsets, self._context, tool_name)
            # Tool names are the deployment's: the registry refuses one name for two different
            # functions, and takes the same function (another agent's, a re-import) again.
            perform.__module__ = getattr(fn, "__module__", __name__)
            perform.__qualname__ = getattr(fn, "__qualname__", f"{self.name}.{tool_name}")
            tool(
                tool_name,
                mutating=decl.mutating,
                recovery=decl.recovery,
                probe=decl.probe,
                timeout_s=decl.timeout_s,
                retry=decl.retry,
                trust="untrusted" if tool_name in distrusted else None,
                description=decl.description,
                input_schema=decl.input_schema,
                registry=registry,
            )(perform)
        self.effects: tuple[EffectDecl, ...] = tuple(decls)
        self.tools: tuple[str, ...] = tuple(d.name for d in decls)
        (MODELS if models is None else models).register(self._models)

    @property
    def model_provider(self) -> PydanticAIProvider:
        """The provider performing the agent's model (registered; a Driver test hands it in)."""
        return self._models

    def tool_functions(self) -> dict[str, Callable[..., Awaitable[Any]]]:
        """The performers by tool name, as ``fn(args, idempotency_key)`` (a Driver's ``tools``)."""
        return {
            name: _keyed(_performer(lambda: self._agent.toolsets, self._context, name))
            for name in self.tools
        }

    def _context(self, tool_name: str) -> RunContext[Any]:
        return RunContext(
            deps=self._deps, model=self._models.model(), usage=RunUsage(), tool_name=tool_name
        )

    async def run(self, ctx: StepCtx, prompt: Any, **options: Any) -> AgentRunResult[OutputT]:
        """Run the agent on ``prompt`` (``options``: the framework's ``Agent.run`` keyword
        arguments — ``deps``, ``message_history``, ``usage_limits``, ``model_settings``, …;
        the run and conversation ids are the runplane run's) → its ``AgentRunResult``.

        Every model request is a generation effect and every tool call a tool effect (module
        docstring); an error the framework raises (``UsageLimitExceeded``, an unexpected model
        answer) or a failed model request is raised here."""
        names = list(self.tools)
        menu = await ctx.observe(f"pydantic_ai:{self.name}:tools", lambda: offered(ctx, names))
        asks = {k: ApprovalRule(**v) for k, v in menu.get("approval", {}).items()}
        options = {"run_id": ctx.run_id, "conversation_id": ctx.run_id, **options}
        bridge = _Bridge(lambda b: self._framework_run(b, prompt, options))
        turn, proposed = 0, {}
        try:
            message = bridge.next()
            while isinstance(message, _Asked):
                ask = message.ask
                if isinstance(ask, _ModelAsk):
                    generation: Generation = await ctx.generate(
                        self.provider,
                        ask.model_name,
                        ask.prompt,
                        settings=ask.settings,
                        parameters=ask.parameters,
                    )
                    turn += 1
                    proposed = {c.id: c for c in generation.tool_calls}
                    message = bridge.answer(message, (generation, ctx.now()))
                else:
                    answer = await self._call(ctx, ask, proposed.get(ask.call_id or ""), asks, turn)
                    message = bridge.answer(message, answer)
        finally:
            bridge.close()
        if message.error is not None:
            raise message.error
        assert message.result is not None
        result: AgentRunResult[OutputT] = message.result
        return result

    async def _framework_run(
        self, bridge: _Bridge, prompt: Any, options: Mapping[str, Any]
    ) -> AgentRunResult[OutputT]:
        """The framework's own run, on the bridge's thread, with every effect handed over."""
        model = _DurableModel(self._models.model(), bridge)
        toolsets = [_DurableToolset(ts, bridge=bridge) for ts in self._agent.toolsets]
        with self._agent.override(model=model, tools=[], toolsets=toolsets):
            return await self._agent.run(prompt, **options)

    async def _call(
        self,
        ctx: StepCtx,
        ask: _ToolAsk,
        call: ToolCall | None,
        asks: Mapping[str, ApprovalRule],
        turn: int,
    ) -> _Answer:
        """One tool call the framework makes, as a tool effect: the model's proposal (its id
        and arguments, for the gate's exact labels) when the last turn proposed it, else the
        framework's arguments (labelled by matching); asked of a person first when it needs
        approval."""
        if call is None or call.name != ask.name:
            call = ToolCall(ask.call_id or f"{ask.name}@{turn}", ask.name, ask.args)
        # One call, made as the agent loop makes a mutation (the framework calls its tools
        # one by one): asked first when the offer says so, then ``ctx.tool`` with the model's
        # call id (option ``proposal``).
        [record] = await perform_calls(ctx, turn, [(0, call)], {call.name: True}, asks)
        return _Answer(record.ok, record.value, record.error_type or "", record.error or "")


def _registered(registry: ToolRegistry, name: str, fn: Callable[..., Any]) -> bool:
    """Is ``fn`` itself the runplane tool ``name`` already (a ``@tool`` function the agent's
    author gave the framework too)? Then the executor performs it as declared there."""
    existing = registry.get(name)
    return existing is not None and existing.fn is fn


def _keyed(perform: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def call(args: Mapping[str, Any], idempotency_key: str | None = None) -> Any:
        return await perform(**args)

    return call
