"""The worklist's metrics (process-wide prometheus-client metrics).

Counted when a command is handled; a batch that aborts is handled again after the rewind, so
under aborts counters can run slightly ahead of what was committed. The ``tasks`` topic is
the record; these are operational signals.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

TASKS_OPEN = Gauge(
    "runplane_tasks_open",
    "Tasks OPEN or CLAIMED on this instance's partitions, by the role that must act",
    ["role"],
)
DECISION_SECONDS = Histogram(
    "runplane_task_decision_seconds",
    "Time from a task's opening to its final decision (human or expiry)",
    ["outcome"],
    buckets=(1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600),
)
EXPIRIES = Counter(
    "runplane_task_expiries_total",
    "Expired tasks by what expiry did (EXPIRED_PROCEEDED, EXPIRED_FAILED, ESCALATED)",
    ["outcome"],
)
COMMANDS = Counter(
    "runplane_task_commands_total",
    "Task commands handled, by op and result (applied, unchanged, refused)",
    ["op", "result"],
)
API_REQUESTS = Counter(
    "runplane_worklist_api_actions_total",
    "Claim/release/decide requests answered by the API, by action and HTTP status",
    ["action", "status"],
)
