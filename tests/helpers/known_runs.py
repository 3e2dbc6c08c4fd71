"""A run index that knows the runs a test or benchmark tells it of: what the journal API
looks a run up in before it serves the run's page or stream, without the audit loop and the
Redis indexer (``services.journal.indexer``) in the way."""

from __future__ import annotations

from runplane.journal.index import RunFilter
from runplane.journal.summary import RunSummary


class KnownRuns:
    """``RunIndex``'s lookups over ``runs``; ``list`` lists them all, unfiltered."""

    def __init__(self) -> None:
        self.runs: dict[str, RunSummary] = {}

    def get(self, run_id: str) -> RunSummary | None:
        return self.runs.get(run_id)

    def list(self, f: RunFilter) -> list[RunSummary]:
        return list(self.runs.values())
