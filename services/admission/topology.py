"""The admission service's topics in and out, and its consumer group."""

from __future__ import annotations

from runplane.config import Settings

SERVICE = "admission"

INPUT = "admission"  # AdmissionRequest from emitters, RunStatusUpdate from the executor
# The dedup table it is the single writer of, co-partitioned with the input (key = admission key).
TABLES = {"claims": "admission.claims"}
OUTPUTS = (
    "admission.claims",  # AdmissionClaim
    "journal",  # RunAdmitted, seq 0 (key = run id)
    "runs.inbox",  # StartRun (key = run id)
    "admission.replies",  # AdmissionReply (key = admission key)
    "queues.commands",  # EnterQueue (a queued capability's run), LeaveQueue (its end)
    "deadletter",
)


def group_id(settings: Settings) -> str:
    # The prefix keeps deployments (and tests with their own prefix) in separate groups.
    return f"{settings.topic_prefix}{SERVICE}"
