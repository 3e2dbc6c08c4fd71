"""``run_agent``: an Agents SDK ``Agent`` run by the SDK's ``Runner`` inside a runplane agent,
every model turn and every tool call a journaled runplane effect (the package docstring)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    Handoff,
    Model,
    ModelProvider,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RunConfig,
    Runner,
    RunResult,
    Tool,
    TResponseInputItem,
    Usage,
)
from agents.agent_output import AgentOutputSchemaBase
from agents.models.chatcmpl_converter import Converter
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.tool_context import ToolContext
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from runplane.contrib.openai_agents._loop import Bridge, Job, StepLoop
from runplane.core.agents import Generation
from runplane.core.canonical import canonical_json
from runplane.core.ctx import StepCtx
from runplane.core.effect import Effect, Op
from runplane.core.loop import CallRecord, offered, perform_calls
from runplane.core.loop import Handoff as Commission
from runplane.core.policy import ApprovalRule
from runplane.core.turns import Message, Role, ToolCall, ToolSpec, messages_to_json
from runplane.errors import ConfigError

__all__ = ["run_agent"]

MENU = "openai_agents:tools"  # the journaled observe of what the run offers (and who approves)


@dataclass(frozen=True)
class _Turn:
    """A model turn the SDK asked for: ``ctx.generate``'s arguments."""

    model: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]


@dataclass
class _Run:
    """What one ``run_agent`` knows while the SDK runs: the journaled offer, the turns so far
    and the last one (the calls it proposed, by position, for the loop's records)."""

    ctx: StepCtx
    provider: str
    commissions: dict[str, Commission]
    mutating: dict[str, bool] = field(default_factory=dict)
    asks: dict[str, ApprovalRule] = field(default_factory=dict)
    turns: int = 0
    last: Generation | None = None
    bridge: Bridge | None = field(default=None, repr=False)

    async def perform(self, jobs: Sequence[Job]) -> None:
        """The jobs the SDK waits for, as runplane effects: a model turn is a generation; the
        tool calls of a turn are performed as the agent loop performs them (``loop.perform_calls``:
        a person asked first where the policy says so, reads fanned out, mutations one at a
        time in the model's order, each with the model's call id for the gate's exact labels),
        each answered with the result or the error the model reads."""
        calls = [j for j in jobs if isinstance(j.what, ToolCall)]
        for job in jobs:
            if isinstance(job.what, _Turn):
                await self._generate(job)
        if calls:
            await self._call(calls)

    async def _generate(self, job: Job) -> None:
        turn: _Turn = job.what
        try:
            g: Generation = await self.ctx.generate(
                self.provider, turn.model, turn.messages, **turn.params
            )
        except Exception as exc:  # recorded failures, a policy budget: the SDK's run fails
            job.future.set_exception(exc)
            return
        self.turns += 1
        self.last = g
        job.future.set_result(g)

    async def learn(self, names: Sequence[str], handoffs: Sequence[Commission] = ()) -> None:
        """What the run offers ``names`` (mutating, who approves; ``loop.offered``), one
        journaled observe, so a replay or a restore under a changed policy asks whom it asked
        — at the start for the agents the SDK can reach, later for a tool first met behind an
        SDK ``Handoff`` object's target."""
        request: dict[str, Any] = {"observe": MENU, "tools": list(names)}
        if handoffs:
            request["handoffs"] = {h.tool: h.capability for h in handoffs}
        ctx = self.ctx
        menu = await Effect(
            "observe", MENU, request, Op.OBSERVE, {"fn": lambda: offered(ctx, names, handoffs)}
        )
        self.mutating.update({k: bool(v) for k, v in menu["mutating"].items()})
        self.asks.update({k: ApprovalRule(**v) for k, v in menu.get("approval", {}).items()})

    async def _call(self, jobs: Sequence[Job]) -> None:
        unknown = [n for n in dict.fromkeys(j.what.name for j in jobs) if n not in self.mutating]
        if unknown:
            await self.learn(unknown)
        proposed = {c.id: at for at, c in enumerate(self.last.tool_calls if self.last else ())}
        at_of = {id(j): proposed.get(j.what.id, len(proposed) + i) for i, j in enumerate(jobs)}
        calls = [(at_of[id(job)], job.what) for job in jobs]
        made = await perform_calls(
            self.ctx, self.turns, calls, self.mutating, self.asks, self.commissions
        )
        records = {r.position: r for r in made}
        for job in jobs:
            job.future.set_result(records[at_of[id(job)]])


class _Model(Model):
    """The SDK's ``Model`` for a runplane provider: each ``get_response`` is one journaled
    generation (``ctx.generate``), performed by the executor's provider — its request the
    conversation in runplane's neutral shape, its recorded value a ``Generation`` whose
    ``tool_calls`` carry the model's call ids."""

    def __init__(self, run: _Run, name: str) -> None:
        self._run = run
        self._name = name

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        specs = [_spec(t) for t in tools] + [
            ToolSpec(h.tool_name, h.tool_description, h.input_json_schema).to_json()
            for h in handoffs
        ]
        said = [Message(Role.SYSTEM, system_instructions)] if system_instructions else []
        messages = said + _messages(input)
        params: dict[str, Any] = {}
        if specs:
            params["tools"] = specs
            params["tool_choice"] = _choice(model_settings.tool_choice)
        if model_settings.temperature is not None:
            params["temperature"] = model_settings.temperature
        if model_settings.max_tokens is not None:
            params["max_tokens"] = model_settings.max_tokens
        assert self._run.bridge is not None
        g: Generation = await self._run.bridge.ask(
            _Turn(self._name, messages_to_json(messages), params)
        )
        return _response(g)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise ConfigError(
            "runplane.contrib.openai_agents: streaming (Runner.run_streamed) is not supported"
        )


class _Provider(ModelProvider):
    """Every model name the agents use resolves to the run's runplane provider."""

    def __init__(self, run: _Run, default: str | None) -> None:
        self._run = run
        self._default = default

    def get_model(self, model_name: str | None) -> Model:
        name = model_name or self._default
        if not name:
            raise ConfigError("run_agent: the agent names no model; pass model=")
        return _Model(self._run, name)


def _spec(tool: Tool) -> dict[str, Any]:
    assert isinstance(tool, FunctionTool)  # _convert refuses every other kind
    return ToolSpec(tool.name, tool.description, tool.params_json_schema).to_json()


def _choice(choice: Any) -> Any:
    if choice is None or choice in ("auto", "required", "none"):
        return choice or "auto"
    if isinstance(choice, str):
        return {"name": choice}
    raise ConfigError(f"run_agent: tool_choice {choice!r} has no runplane equivalent")


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))


def _messages(input: str | list[TResponseInputItem]) -> list[Message]:
    """The SDK's input items as runplane's neutral conversation (through the SDK's own Chat
    Completions converter): content, the model's calls with their ids, the tool answers — no
    item ids, so a request is a function of what was said, the same on every replay."""
    out = []
    for m in Converter.items_to_messages(input):
        role, content = str(m["role"]), _text(m.get("content"))
        if role in ("system", "developer"):
            out.append(Message(Role.SYSTEM, content))
        elif role == "user":
            out.append(Message(Role.USER, content))
        elif role == "assistant":
            calls = tuple(
                ToolCall(
                    str(c["id"]),
                    str(c["function"]["name"]),
                    json.loads(c["function"]["arguments"] or "{}"),
                )
                for c in m.get("tool_calls") or ()  # type: ignore[attr-defined]
            )
            out.append(Message(Role.ASSISTANT, content, tool_calls=calls))
        elif role == "tool":
            out.append(Message(Role.TOOL, content, tool_call_id=str(m["tool_call_id"])))  # type: ignore[typeddict-item]
    return out


def _response(g: Generation) -> ModelResponse:
    """The recorded generation as the SDK's ``ModelResponse`` (fixed item ids: the SDK's own
    placeholder, so nothing random enters the conversation)."""
    output: list[Any] = []
    if g.text:
        output.append(
            ResponseOutputMessage(
                id=FAKE_RESPONSES_ID,
                content=[ResponseOutputText(text=g.text, type="output_text", annotations=[])],
                role="assistant",
                status="completed",
                type="message",
            )
        )
    for c in g.tool_calls:
        output.append(
            ResponseFunctionToolCall(
                id=FAKE_RESPONSES_ID,
                call_id=c.id,
                name=c.name,
                arguments=canonical_json(dict(c.arguments)),
                type="function_call",
            )
        )
    usage = Usage(
        requests=1,
        input_tokens=g.tokens_in,
        output_tokens=g.tokens_out,
        total_tokens=g.tokens_in + g.tokens_out,
    )
    return ModelResponse(output=output, usage=usage, response_id=None)


def _invoker(run: _Run, name: str) -> Any:
    """A function tool's ``on_invoke_tool``: the call, as the model proposed it, performed as
    a runplane tool effect (``_Run.perform``); the model reads the result as JSON, or the
    error (``SinkRefused: …``, ``CallRejected: …``) as the agent loop shows it."""

    async def invoke(tool_context: ToolContext[Any], arguments: str) -> str:
        try:
            args = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return f"InvalidArguments: {exc}"
        if not isinstance(args, dict):
            return "InvalidArguments: the arguments are a JSON object"
        assert run.bridge is not None
        record: CallRecord = await run.bridge.ask(ToolCall(tool_context.tool_call_id, name, args))
        if record.ok:
            return canonical_json(record.value)
        return f"{record.error_type}: {record.error}"

    return invoke


def _function_tool(run: _Run, tool: FunctionTool) -> FunctionTool:
    """The SDK's function tool, its body the runplane tool of the same name (the SDK's own
    timeout and approval are not used: the tool's declared timeout and recovery, and the
    deployment policy's approvals, apply)."""
    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.params_json_schema,
        on_invoke_tool=_invoker(run, tool.name),
        strict_json_schema=tool.strict_json_schema,
        is_enabled=tool.is_enabled,
        tool_input_guardrails=tool.tool_input_guardrails,
        tool_output_guardrails=tool.tool_output_guardrails,
    )


def _commission_tool(run: _Run, c: Commission) -> FunctionTool:
    spec = c.spec()
    return FunctionTool(
        name=spec.name,
        description=spec.description,
        params_json_schema=dict(spec.parameters),
        on_invoke_tool=_invoker(run, spec.name),
        strict_json_schema=False,
    )


def _agents(agent: Agent[Any]) -> list[Agent[Any]]:
    """The agent and every agent it can hand off to in process (``Agent`` handoffs)."""
    seen: dict[int, Agent[Any]] = {}
    todo = [agent]
    while todo:
        a = todo.pop()
        if id(a) in seen:
            continue
        seen[id(a)] = a
        todo += [h for h in a.handoffs if isinstance(h, Agent)]
    return list(seen.values())


def _check(agent: Agent[Any]) -> list[str]:
    """What the run can make durable, else ``ConfigError`` → the function tools' names."""
    names: list[str] = []
    for a in _agents(agent):
        if a.model is not None and not isinstance(a.model, str):
            raise ConfigError(
                f"agent {a.name!r}: its model is a {type(a.model).__name__} object, which would "
                "call the model outside any runplane effect; name the model (a str) and let the "
                "executor's provider serve it"
            )
        if a.mcp_servers:
            raise ConfigError(
                f"agent {a.name!r}: MCP servers run as runplane tools — declare them in the "
                "tools config and offer their tools to the agent as function tools"
            )
        for t in a.tools:
            if not isinstance(t, FunctionTool):
                raise ConfigError(
                    f"agent {a.name!r}: tool {getattr(t, 'name', t)!r} is a "
                    f"{type(t).__name__}; only function tools run as runplane tool effects"
                )
            if t.needs_approval is not False:
                raise ConfigError(
                    f"agent {a.name!r}: tool {t.name!r} asks the SDK for approval; a durable run "
                    "asks through runplane: mark the tool needs_approval in the deployment "
                    "policy (or its runplane declaration)"
                )
            if t.name not in names:
                names.append(t.name)
    return names


def _convert(run: _Run, agent: Agent[Any], extra: list[FunctionTool]) -> Agent[Any]:
    """The agent graph with every function tool's body a runplane effect; ``extra`` (the
    commissions) offered by the starting agent. An SDK ``Handoff`` object's target is
    converted when the SDK asks for it."""
    done: dict[int, Agent[Any]] = {}

    def convert(a: Agent[Any], more: list[FunctionTool]) -> Agent[Any]:
        if id(a) in done:
            return done[id(a)]
        copy = a.clone()
        done[id(a)] = copy
        tools: list[Tool] = [_function_tool(run, t) for t in a.tools if isinstance(t, FunctionTool)]
        copy.tools = [*tools, *more]
        handoffs: list[Agent[Any] | Handoff[Any, Any]] = []
        for h in a.handoffs:
            if isinstance(h, Agent):
                handoffs.append(convert(h, []))
            else:
                handoffs.append(_handoff(h, lambda target: convert(target, [])))
        copy.handoffs = handoffs
        return copy

    return convert(agent, extra)


def _handoff(h: Handoff[Any, Any], convert: Any) -> Handoff[Any, Any]:
    original = h.on_invoke_handoff

    async def on_invoke(context: Any, arguments: str) -> Any:
        target = await original(context, arguments)
        _check(target)
        return convert(target)

    return replace(h, on_invoke_handoff=on_invoke)


async def run_agent(
    ctx: StepCtx,
    agent: Agent[Any],
    input: str | list[TResponseInputItem],
    *,
    provider: str = "openai",
    model: str | None = None,
    handoffs: Sequence[Commission] = (),
    context: Any = None,
    max_turns: int = 10,
) -> RunResult:
    """Run ``agent`` on ``input`` with the SDK's ``Runner`` → its ``RunResult``, durably.

    ``provider``: the runplane model provider that serves every model the agents name (the
    executor's ``models`` config, or the Driver's); ``model``: the model when an agent names
    none. ``handoffs``: other runplane capabilities offered to the starting agent as tools
    (``runplane.core.loop.Handoff``), a call to one a commission under the run's narrowed
    delegation. ``context`` / ``max_turns``: the SDK's own.
    """
    run = _Run(ctx, provider, {h.tool: h for h in handoffs})
    await run.learn(_check(agent), handoffs)
    loop = StepLoop(ctx.now() / 1000)  # type: ignore[abstract]  # the rest: never asked
    run.bridge = Bridge(loop)
    converted = _convert(run, agent, [_commission_tool(run, h) for h in handoffs])
    config = RunConfig(
        model=model,
        model_provider=_Provider(run, model),
        tracing_disabled=True,  # the SDK's tracer exports over HTTP from a thread: off
    )
    main = Runner.run(converted, input, context=context, max_turns=max_turns, run_config=config)
    result: RunResult = await run.bridge.drive(main, run.perform, lambda: ctx.now() / 1000)
    return result
