"""Carrying out one live call (a tool or a model) and handing its outcome to the loop.

The loop launches ``Performer.perform`` as an asyncio task per call; the outcome is queued
as a ``Completion`` on ``Performer.completions`` for the loop to apply to the run's runtime on its next turn (a stale one
— the run moved, was evicted or rebuilt meanwhile — is dropped there: its journal decides).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import Context

from runplane.core import Generation, LiveCall, ModelProvider, Outcome, Runtime, Tool
from runplane.errors import TerminalError
from runplane.providers import StreamingProvider
from runplane.serving.tracing import current_headers, effect_span
from runplane.wire import Label, StreamKind
from services.executor.live import CallPolicy, CallStatus, LiveCallRunner, LiveOutcome
from services.executor.metrics import executor_metrics
from services.executor.streaming import AttemptStream, RunStreams


@dataclass(frozen=True)
class Completion:
    """A finished live call, waiting for the loop to hand it to its runtime."""

    session_id: str
    runtime: Runtime
    call: LiveCall
    outcome: LiveOutcome
    # The effect's span as Kafka headers (tracing.py): the records of its outcome carry it.
    trace: list[tuple[str, bytes]] | None = None


class Performer:
    """Performs live calls with the runner's policy and queues their completions."""

    def __init__(
        self,
        *,
        tools: Mapping[str, Tool],
        providers: Mapping[str, ModelProvider],
        max_inflight: int,
        call_timeout_s: float,
        streams: RunStreams | None = None,
    ) -> None:
        self._tools = dict(tools)
        self._providers = dict(providers)
        self._runner = LiveCallRunner(max_inflight)
        self._call_timeout_s = call_timeout_s
        self._streams = streams  # None: nothing is streamed, generations arrive whole
        # Finished calls, in the order they finished: the loop drains them on its thread.
        self.completions: deque[Completion] = deque()
        self._metrics = executor_metrics()
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}

    async def perform(
        self, run_id: str, runtime: Runtime, call: LiveCall, parent: Context | None = None
    ) -> None:
        """Perform ``call`` (in a span under ``parent``, the step that requested it, when the
        step is traced) and queue its completion."""
        attributes = {"runplane.run_id": run_id, "runplane.family": call.family}
        with effect_span(f"{call.family} {call.target}", parent, attributes):
            trace = current_headers() if parent is not None else None
            await self._perform(run_id, runtime, call, trace)

    async def _perform(
        self, run_id: str, runtime: Runtime, call: LiveCall, trace: list[tuple[str, bytes]] | None
    ) -> None:
        policy = CallPolicy(
            timeout_s=min(call.timeout_s, self._call_timeout_s),
            max_attempts=call.retry.max_attempts,
            initial_backoff_s=call.retry.initial_backoff_s,
            backoff_multiplier=call.retry.multiplier,
            max_backoff_s=call.retry.max_backoff_s,
            # A retry-declared effect is safe to repeat even when in doubt.
            mutating=call.mutating and call.recovery.value != "retry",
            # A reconciling mutation's doubt is probed after this instant: no attempt of it
            # may still be outstanding then (the core derives it from the announce's stamp).
            deadline_ms=call.deadline_ms,
        )
        outcome = await self._runner.run(lambda: self._call_once(call), policy)
        calls, seconds = self._live_metrics(call.family, outcome.status.value)
        calls.inc()
        seconds.observe(outcome.elapsed_s)
        self.completions.append(Completion(run_id, runtime, call, outcome, trace or None))

    def _live_metrics(self, family: str, verdict: str) -> tuple[Any, Any]:
        # labels() locks and looks the child up on every call; the label sets are few.
        key = (family, verdict)
        children = self._children.get(key)
        if children is None:
            children = (
                self._metrics.live_calls.labels(family, verdict),
                self._metrics.live_call_seconds.labels(family),
            )
            self._children[key] = children
        return children

    async def _call_once(self, call: LiveCall) -> Any:
        # One attempt, so one attempt on the run's stream: a retry is told apart.
        live = (
            None
            if self._streams is None
            else self._streams.attempt(call.session_id, call.era, call.call_seq)
        )
        if call.family == "generation":
            return await self._generate(call, live)
        if live is None:
            return await self._use_tool(call)
        live.emit(StreamKind.TOOL_CALL_STARTED, {"name": call.name, "family": call.family})
        try:
            value = await self._use_tool(call)
        except Exception as exc:
            live.emit(
                StreamKind.TOOL_CALL_FINISHED,
                {"name": call.name, "ok": False, "error": type(exc).__name__},
            )
            raise
        live.emit(StreamKind.TOOL_CALL_FINISHED, {"name": call.name, "ok": True})
        return value

    async def _generate(self, call: LiveCall, live: AttemptStream | None) -> Generation:
        request = call.request
        provider = self._providers.get(call.target)
        if provider is None:
            raise TerminalError(f"no model provider named {call.target!r}")
        args = (
            str(request.get("model", "")),
            request.get("prompt"),
            dict(request.get("params") or {}),
        )
        if live is None:
            return await provider.generate(*args)
        live.emit(StreamKind.TURN_STARTED, {"provider": call.target, "model": args[0]})
        if isinstance(provider, StreamingProvider):
            gen = await provider.stream(*args, live.delta)
        else:
            gen = await provider.generate(*args)
            if gen.text:
                live.emit(StreamKind.TEXT_DELTA, {"text": gen.text})
        for index, proposed in enumerate(gen.tool_calls):
            live.emit(StreamKind.TOOL_CALL_PROPOSED, {"index": index, **proposed.to_json()})
        return gen

    async def _use_tool(self, call: LiveCall) -> Any:
        request = call.request
        tool = self._tools.get(call.target)
        if tool is None:
            raise TerminalError(f"no tool named {call.target!r}")
        # The core derives the key (the agent's, or one from the call's first announce) so
        # that a probe and a later era use the very same one.
        return await tool.call(
            dict(request.get("args") or {}), idempotency_key=call.idempotency_key
        )


def to_outcome(out: LiveOutcome, label: Label | None = None) -> Outcome:
    """The core's Outcome for a live call's collapsed result (a model's cost kept apart)."""
    if out.status is CallStatus.OK:
        value = out.value
        cost = None
        if isinstance(value, Generation):
            cost = value.cost()
            value = value.to_json()
        return Outcome.success(value, attempts=out.attempts, cost=cost, label=label)
    return Outcome.failure(
        out.error_type or "Error",
        out.error_message or "",
        retryable=out.retryable,
        attempts=out.attempts,
    )
