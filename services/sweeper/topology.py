"""The sweeper's topics in and out, and its consumer group."""

from __future__ import annotations

from runplane.config import Settings

SERVICE = "sweeper"

INPUT = "cases"  # CaseRecord: the obligations to watch (read_committed, from offset 0 on rebuild)
OUTPUT = "cases.commands"  # WarnDeadline, BreachDeadline (the cases service confirms them)
DEADLETTER = "deadletter"  # case records the sweeper cannot decode; refused schedule ticks
# Schedules (services.sweeper.schedules): read, fired to admission, progress recorded.
SCHEDULES = "schedules"  # Schedule, written by operators (runplane schedules)
SCHEDULES_FIRED = "schedules.fired"  # ScheduleFired: the sweeper is its single writer
ADMISSION = "admission"  # a tick's AdmissionRequest
REPLIES = "admission.replies"  # how admission answered a tick


def group_id(settings: Settings) -> str:
    # The prefix keeps deployments (and tests with their own prefix) in separate groups.
    return f"{settings.topic_prefix}{SERVICE}"
