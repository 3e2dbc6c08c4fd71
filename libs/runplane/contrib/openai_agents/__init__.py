"""An OpenAI Agents SDK agent run durably inside a runplane agent: ``run_agent``.

    from agents import Agent, function_tool
    from runplane.contrib.openai_agents import run_agent

    @function_tool
    @tool(mutating=False, recovery="retry")          # runplane.providers.tool: the body
    def crm_lookup(customer_id: str) -> dict: ...

    support = Agent(name="support", instructions="...", tools=[crm_lookup, refund])

    @agent("support", tools=("crm_lookup", "refund"), models=["openai"])
    async def run(ctx: StepCtx, input: dict) -> dict:
        result = await run_agent(ctx, support, input["message"], model="gpt-4o-mini")
        return {"answer": result.final_output}

The SDK's ``Runner.run`` runs unchanged, on a deterministic event loop stepped by the runplane
agent (``_loop``), and everything it needs from the world is a runplane effect:

* **Model turns.** Every model the agents name resolves (``RunConfig(model_provider=...)``) to
  the run's runplane provider: each turn is one journaled ``generation`` (``ctx.generate``,
  announced before it is sent, its usage counted against the run's budgets), the conversation
  in runplane's neutral shape, the recorded ``Generation`` carrying the proposed calls with
  the model's call ids. A replay serves it and calls nobody.
* **Function tools.** A call is a runplane tool effect of the same name — its body the
  runplane tool (``@tool`` stacked under ``@function_tool``, an HTTP or MCP tool of the tools
  config), performed under its declared recovery. The calls of one turn are performed as the
  agent loop performs them (``runplane.core.loop``): a person asked first (``ctx.approve_call``)
  where the deployment policy or the tool's declaration says ``needs_approval``; reads fanned
  out, mutations one at a time in the model's order; each with the model's call id (option
  ``proposal``), so the sink gate labels its arguments exactly from the proposing turn. A
  refused, rejected or failed call is a tool error the model reads (``SinkRefused: ...``).
* **Handoffs.** ``handoffs=[Handoff("billing", ...)]`` (``runplane.core.loop.Handoff``) offers
  other runplane capabilities to the starting agent as tools: a call commissions a child run
  under the run's delegation narrowed to that capability. The SDK's own handoffs (another
  ``Agent``) stay in process, as the SDK runs them: the conversation goes on with that agent
  in this run, its turns and calls journaled like the first agent's.
* **Guardrails** are the SDK's, run as it runs them, in process; they must do no I/O (a
  guardrail that calls a model or a service would do so outside any effect).
* **Non-determinism.** The loop's clock is the run's logical clock; timers fire in virtual
  time; tracing is off (``tracing_disabled``: its exporter posts from a thread); the item
  ids the SDK keeps are its fixed placeholder; a request holds no SDK id. Threads
  (``asyncio.to_thread``, sync function tools' bodies) are refused, as are model objects
  (``OpenAIChatCompletionsModel(...)``: it would call the model itself), hosted and MCP tools
  on the agent, and the SDK's own tool approval — each a ``ConfigError`` naming what to do.

Not supported: the SDK's own streaming (``Runner.run_streamed``: each model turn is a
generation, whose tokens reach the run's watchers on ``runs.stream`` — ``runplane runs watch``,
``GET /runs/{id}/stream`` — as any generation's do), structured outputs sent as the provider's
``response_format`` (an ``output_type`` is still parsed from the final text by the SDK), the
SDK's sessions and ``RunState`` interruptions.

Importing this module checks the installed ``openai-agents`` against the tested range
(``SUPPORTED``): another version is a ``ConfigError`` at import — at the executor's start-up,
one line — never a failure mid-run.
"""

from __future__ import annotations

from importlib import metadata

from runplane.errors import ConfigError

DISTRIBUTION = "openai-agents"
# Tested on 0.20.0 and 0.24.0; a later 0.x minor line may break what the adapter uses (the
# SDK's Model, FunctionTool and Chat Completions converter), so it is refused until tested.
SUPPORTED = (0, 20), (0, 25)  # the same range as the extra in pyproject.toml


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def check_version(version: str | None) -> None:
    """``ConfigError`` unless ``version`` (None: not installed) is in ``SUPPORTED``."""
    low, high = SUPPORTED
    wanted = f">={'.'.join(map(str, low))},<{'.'.join(map(str, high))}"
    if version is None:
        raise ConfigError(
            f"runplane.contrib.openai_agents needs {DISTRIBUTION}{wanted}: "
            "pip install 'runplane[openai-agents]'"
        )
    if not low <= _release(version) < high:
        raise ConfigError(
            f"runplane.contrib.openai_agents supports {DISTRIBUTION}{wanted}, "
            f"found {version}: pip install 'runplane[openai-agents]'"
        )


def _installed() -> str | None:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


check_version(_installed())

from runplane.contrib.openai_agents._run import run_agent  # noqa: E402  # after the check

__all__ = ["DISTRIBUTION", "SUPPORTED", "check_version", "run_agent"]
