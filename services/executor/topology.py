"""The executor's topics in and out, and its consumer group."""

from __future__ import annotations

from runplane.config import Settings

SERVICE = "executor"

INPUT = "runs.inbox"
# Compacted tables co-partitioned with the input, restored on assignment (read to the end).
TABLES = ("sessions", "results")
OUTPUTS = (
    "journal",
    "results",
    "sessions",
    "cases.commands",
    "tasks.commands",
    "admission",
    "deadletter",
    "runs.inbox",  # a continue-as-new successor's StartRun; a commissioned child's result
    "runs.stream",  # runs' live events, produced outside the transactions (streaming.py)
    "runs.updates",  # answers to updates (UpdateAnswer), in the step's transaction
)


def group_id(settings: Settings) -> str:
    # The prefix keeps deployments (and tests with their own prefix) in separate groups.
    return f"{settings.topic_prefix}executor"
