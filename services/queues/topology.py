"""The queue service's topics in and out, and its consumer group."""

from __future__ import annotations

from runplane.config import Settings

SERVICE = "queues"

INPUT = "queues.commands"  # EnterQueue from admission (a queued run), LeaveQueue (its end)
# The compacted table it is the single writer of, co-partitioned with the input (key = queue).
TABLE = "queues"
TABLES = {TABLE: TABLE}
OUTPUTS = (
    "queues",  # QueueRecord
    "runs.inbox",  # the StartRun of a run whose turn came (key = run id)
    "deadletter",
)


def group_id(settings: Settings) -> str:
    # The prefix keeps deployments (and tests with their own prefix) in separate groups.
    return f"{settings.topic_prefix}{SERVICE}"
