"""``runplane demo``: the whole platform on one machine, running the example agents end to end.

    from runplane.demo import DemoConfig, run_demo
    outcome = run_demo(DemoConfig(settings), reporter)   # raises DemoError naming the step

Brings up the local stack and topics, starts the loopback fakes (billing API, OpenAI-compatible
server) and ``runplane serve all`` in the background (pid files under the state dir, so
``runplane down`` stops them), emits the refund and triage runs through the emitter client,
approves the refund on the worklist as a demo principal (or waits for a person with
``manual``), and verifies every run's journal.
"""

from __future__ import annotations

from runplane.demo._flow import run_demo
from runplane.demo._plan import (
    APPROVER,
    INITIATOR,
    PUBLISHED_TOKENS,
    DemoOutcome,
    DemoPorts,
    DemoPrincipal,
    DemoRequest,
    RunResult,
    demo_instance_id,
    demo_principals,
    demo_requests,
    platform_env,
    principals_yaml,
    published_principals,
    status_changes,
)
from runplane.demo._setup import (
    DemoConfig,
    DemoError,
    Emitter,
    Reporter,
    default_calendars_file,
    default_principals_file,
)

__all__ = [
    "APPROVER",
    "INITIATOR",
    "PUBLISHED_TOKENS",
    "DemoConfig",
    "DemoError",
    "DemoOutcome",
    "DemoPorts",
    "DemoPrincipal",
    "DemoRequest",
    "Emitter",
    "Reporter",
    "RunResult",
    "default_calendars_file",
    "default_principals_file",
    "demo_instance_id",
    "demo_principals",
    "demo_requests",
    "platform_env",
    "principals_yaml",
    "published_principals",
    "run_demo",
    "status_changes",
]
