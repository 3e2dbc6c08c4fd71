"""The worklist service's topics in and out, its consumer group and its Redis keys."""

from __future__ import annotations

from runplane.config import Settings

SERVICE = "worklist"

INPUT = "tasks.commands"
# The compacted table it is the single writer of, co-partitioned with the input (key = task).
TABLE = "tasks"
TABLES = {TABLE: TABLE}
OUTPUTS = (
    "tasks",  # TaskRecord, every version
    "runs.inbox",  # TaskDecision to the run (key = session id)
    "deadletter",  # undecodable commands and refused ones, with the reason
)


def group_id(settings: Settings) -> str:
    # The prefix keeps deployments (and tests with their own prefix) in separate groups.
    return f"{settings.topic_prefix}{SERVICE}"


def redis_namespace(settings: Settings) -> str:
    """Prefix of the read model's Redis keys (one deployment or test per topic prefix)."""
    return f"{settings.topic_prefix}{SERVICE}:"
