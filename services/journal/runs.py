"""One run read for the API and the UI: the index first, then a bounded scan of Kafka.

Reading a run from Kafka costs a scan of its session's partition, so every reader of one run
goes through :class:`Runs`: a run the index does not know is 404 without touching Kafka (an id
is not a licence to scan), the scan starts at the run's indexed start time (less a clock-skew
margin) instead of the partition's beginning, and at most ``max_scans`` scans run at once — one
more is answered 503 with ``Retry-After`` rather than queued behind them. The API's routes and
the runs UI (which the API mounts) both build on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from fastapi import HTTPException

from runplane.journal.index import RunIndex
from runplane.journal.summary import RunSummary
from runplane.runs.read import RunHistory
from runplane.serving.auth import DEFAULT_TENANT, Principal, PrincipalSource
from runplane.wire import CaseRecord, SessionSnapshot

# A run's records carry the producing host's clock; the index's start time is the admitting
# host's. Scanning from a little before it tolerates skew between the two (and LogAppendTime
# topics) at the price of a few minutes of extra records.
SCAN_MARGIN_MS = 10 * 60 * 1000
DEFAULT_MAX_SCANS = 4


class RunReader(Protocol):
    """Reads one run straight from Kafka (``runplane.runs.read``; a fake in tests of the API alone).

    ``since_ms``: read the run's partitions from the first record at or after this instant
    (None: from the beginning)."""

    def history(self, run_id: str, *, bodies: bool, since_ms: int | None = None) -> RunHistory: ...

    def case(self, case_id: str) -> CaseRecord | None:
        """The case's latest record (``runplane.runs.read.read_case``), None when there is none."""
        ...

    def snapshot(self, run_id: str) -> SessionSnapshot | None:
        """The run's latest snapshot (``runplane.runs.repair.read_snapshot``): its input, and
        its output or error, for the run page's panes. None when there is none."""
        ...


def scan_since(summary: RunSummary) -> int | None:
    """Where a scan for ``summary``'s records may start (None: the partition's beginning)."""
    if summary.started_ms is None:
        return None
    return max(0, summary.started_ms - SCAN_MARGIN_MS)


class ScanLimit:
    """At most ``n`` partition scans at once; one more is refused (503), not queued."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError("at least one concurrent scan is required")
        self._slots = threading.BoundedSemaphore(n)

    @contextmanager
    def slot(self) -> Iterator[None]:
        if not self._slots.acquire(blocking=False):
            raise HTTPException(
                503,
                "too many journal reads in progress; try again shortly",
                headers={"Retry-After": "1"},
            )
        try:
            yield
        finally:
            self._slots.release()


@dataclass(frozen=True)
class Runs:
    """What the routes share: the index, the Kafka reader, the principals, the scan limit."""

    index: Callable[[], RunIndex | None]
    reader: RunReader
    readers: PrincipalSource
    scans: ScanLimit

    def run_index(self) -> RunIndex:
        idx = self.index()
        if idx is None:
            raise HTTPException(503, "the run index is disabled on this instance")
        return idx

    def known(self, run_id: str, who: Principal) -> RunSummary:
        """The indexed run, if ``who``'s tenant owns it; else 404 (as for an unknown id).

        Only runs the index knows are read from Kafka: an unknown id costs one Redis GET,
        never a partition scan. A run admitted a moment ago may not be indexed yet (404 until
        the audit stream reaches the index, typically well under a second).
        """
        summary = self.run_index().get(run_id)
        if summary is None or (summary.tenant or DEFAULT_TENANT) != who.tenant:
            raise HTTPException(404, f"no run {run_id!r} (not in the run index)")
        return summary

    def history(
        self, run_id: str, who: Principal, *, bodies: bool
    ) -> tuple[RunSummary, RunHistory]:
        """The run's summary and its records (and bodies) from Kafka, within the scan limit."""
        summary = self.known(run_id, who)
        with self.scans.slot():
            history = self.reader.history(run_id, bodies=bodies, since_ms=scan_since(summary))
        if not history.records:
            raise HTTPException(404, f"no journal records for run {run_id!r}")
        return summary, history

    def case(self, summary: RunSummary) -> CaseRecord | None:
        """The case of a run the caller was shown (``known`` checked the tenant), read from
        ``cases`` within the scan limit; None when the run has no case or it is not there."""
        if summary.case_id is None:
            return None
        with self.scans.slot():
            return self.reader.case(summary.case_id)

    def snapshot(self, summary: RunSummary) -> SessionSnapshot | None:
        """The latest snapshot of a run the caller was shown (``known`` checked the tenant),
        read from ``sessions`` within the scan limit: bodies — only for a reader of bodies."""
        with self.scans.slot():
            return self.reader.snapshot(summary.run_id)
