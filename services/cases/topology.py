"""The cases service's topics in and out, and its consumer group."""

from __future__ import annotations

from runplane.config import Settings

SERVICE = "cases"

INPUT = "cases.commands"
# The compacted table it is the single writer of, co-partitioned with the input (key = case).
TABLE = "cases"
TABLES = {TABLE: TABLE}
OUTPUTS = (
    "cases",  # CaseRecord
    "runs.inbox",  # CaseReply to the asking run (key = reply_to session)
    "journal",  # the sealed sweep run of a breach (key = sweep run id)
    "admission",  # the follow-up run of a breach (key = its admission key)
    "tasks.commands",  # the worklist task of a warning, for the obligation's owner role
    "deadletter",
)


def group_id(settings: Settings) -> str:
    # The prefix keeps deployments (and tests with their own prefix) in separate groups.
    return f"{settings.topic_prefix}{SERVICE}"
