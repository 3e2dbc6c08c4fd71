"""runplane: durable AI agents and business workflows on Apache Kafka.

This is the front door: agent authors and services import from here, never from the
private modules. ``tests/unit/test_exports.py`` pins ``__all__``.

    from runplane import StepCtx, agent, EffectDecl, Recovery, days, hours

    @agent("refund", durability="replayable",
           effects=[EffectDecl("charge_card", recovery=Recovery.RECONCILE, probe="get_charge")])
    async def refund(ctx: StepCtx, input: dict) -> dict: ...

What is here is the agent author's surface: the decorator and registry, ``StepCtx`` and the
values it returns, effect declarations, durability levels, the provider and tool interfaces,
the calendar rule helpers, the errors an agent may catch, ``Settings`` and the error
hierarchy. The engine the executor drives (``Runtime``, ``Step``, ``Outcome``, the chain
functions) stays in ``runplane.core``; test helpers are in ``runplane.testing``.
"""

from __future__ import annotations

from runplane.config import Settings
from runplane.core import (
    REGISTRY,
    AgentRegistry,
    AgentSpec,
    ApprovalExpired,
    CaseConflict,
    CaseRefused,
    CaseState,
    Decision,
    Durability,
    EffectDecl,
    EffectError,
    Generation,
    LintFailed,
    ModelProvider,
    Recovery,
    RetryPolicy,
    StepCtx,
    Tool,
    UnknownCapability,
    agent,
    days,
    hours,
    minutes,
    working_days,
)
from runplane.errors import (
    CalendarError,
    ChainError,
    ConfigError,
    NonDeterminismError,
    RetryableError,
    RunplaneError,
    SchemaError,
    TerminalError,
    WireError,
)

__all__ = [
    "REGISTRY",
    "AgentRegistry",
    "AgentSpec",
    "ApprovalExpired",
    "CalendarError",
    "CaseConflict",
    "CaseRefused",
    "CaseState",
    "ChainError",
    "ConfigError",
    "Decision",
    "Durability",
    "EffectDecl",
    "EffectError",
    "Generation",
    "LintFailed",
    "ModelProvider",
    "NonDeterminismError",
    "Recovery",
    "RetryPolicy",
    "RetryableError",
    "RunplaneError",
    "SchemaError",
    "Settings",
    "StepCtx",
    "TerminalError",
    "Tool",
    "UnknownCapability",
    "WireError",
    "agent",
    "days",
    "hours",
    "minutes",
    "working_days",
]
