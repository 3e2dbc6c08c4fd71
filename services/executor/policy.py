"""The deployment policy the executor binds every run to, and the sink gate's metric.

``RUNPLANE_POLICY`` names a YAML file (``runplane.core.policy``: sink declarations, what each
agent is granted, budgets). Read once at start-up; a file that does not parse is a
``ConfigError`` then, never a surprise at a run's first call. Unset: no deployment policy —
agents that declare sinks (``@sinks``) are still gated by their own declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, TypedDict

from prometheus_client import Counter

from runplane.core.agents import EffectDecl
from runplane.core.limits import Limits
from runplane.core.policy import Policy
from runplane.serving.policy import load_policy
from runplane.wire import JournalRecord
from services.executor.settings import ExecutorSettings

__all__ = ["EngineOptions", "count_refusal", "runtime_options"]


class EngineOptions(TypedDict):
    """What every runtime of one executor is built with (``Runtime.start`` / ``restore``)."""

    calendars: Any
    tools: Mapping[str, EffectDecl]
    limits: Limits
    policy: Policy | None  # the deployment policy (this module)


def runtime_options(
    settings: ExecutorSettings, calendars: Any, tools: Mapping[str, EffectDecl]
) -> EngineOptions:
    """The executor's runtime options, its deployment policy read once here (at start-up)."""
    return {
        "calendars": calendars,
        "tools": tools,
        "limits": settings.limits,
        "policy": load_policy(settings.policy_path),
    }


@cache
def _refusals() -> Counter:
    return Counter(
        "runplane_gate_refusals_total",
        "Outbound calls the sink gate refused, by sink and reason (gate.Reason).",
        ["sink", "reason"],
    )


def count_refusal(record: JournalRecord) -> None:
    """Count ``record`` when it is a gate refusal (its attrs say so)."""
    if record.attrs.get("gate") == "refused":
        _refusals().labels(record.attrs.get("sink", "?"), record.attrs.get("reason", "?")).inc()
