"""The runs UI's overview: the numbers it folds from run summaries and the SVG it draws, and
the list's status styles (a cancelled run is not drawn as a failure)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from runplane.journal.summary import CostTotals, RunSummary
from runplane.wire import RunStatus
from services.journal.ui_overview import (
    by_capability,
    cost_chart,
    duration_chart,
    percentile,
    status_chart,
    status_class,
    status_slots,
)


def _run(i: int, status: RunStatus, took: int | None, cap: str = "refund", units: float = 0.0):  # type: ignore[no-untyped-def]
    start = 1_700_000_000_000 + i * 60_000
    return RunSummary(
        f"r-{i}",
        status=status,
        capability=cap,
        started_ms=start,
        ended_ms=None if took is None else start + took,
        cost=CostTotals(10, 5, units),
    )


@given(st.lists(st.integers(min_value=0, max_value=10**9), min_size=1))
def test_a_percentile_is_one_of_the_values_and_p50_is_at_most_p99(values: list[int]) -> None:
    p50, p99 = percentile(values, 50), percentile(values, 99)
    assert p50 in values and p99 in values and min(values) <= p50 <= p99 <= max(values)


def test_nearest_rank_percentiles() -> None:
    values = list(range(1, 101))
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (
        50,
        99,
        100,
    )
    assert percentile([7], 99) == 7


@given(
    st.lists(
        st.tuples(st.integers(0, 10**7), st.sampled_from(list(RunStatus))), min_size=1, max_size=60
    ),
    st.integers(1, 30),
)
def test_every_started_run_lands_in_exactly_one_slot(
    runs: list[tuple[int, RunStatus]], slots: int
) -> None:
    summaries = [RunSummary(f"r-{i}", status=s, started_ms=ms) for i, (ms, s) in enumerate(runs)]
    cut = status_slots(summaries, slots)
    assert len(cut) == slots and sum(s.total for s in cut) == len(runs)
    for slot in cut:
        for status in RunStatus:
            inside = sum(1 for ms, s in runs if s is status and slot.start_ms <= ms < slot.end_ms)
            assert slot.counts.get(status, 0) == inside


def test_durations_and_cost_per_capability() -> None:
    runs = [_run(i, RunStatus.COMPLETED, 1000 * (i + 1), units=0.5) for i in range(10)]
    runs += [_run(20, RunStatus.RUNNING, None), _run(21, RunStatus.FAILED, 60_000, cap="triage")]
    refund, triage = by_capability(runs)
    assert (refund.capability, refund.runs, refund.ended) == ("refund", 11, 10)
    assert (refund.p50_ms, refund.p99_ms) == (5000, 10_000)  # the running run has no duration
    assert refund.cost.units == 5.0 and refund.cost.tokens_in == 110
    assert (triage.p50_ms, triage.p99_ms) == (60_000, 60_000)
    durations = duration_chart([refund, triage])
    assert "refund p50 5.0 s" in durations and "refund p99 10.0 s" in durations
    assert "triage p99 1 min 0 s" in durations
    assert "5 units · 110/55 tokens" in cost_chart([refund, triage])


def test_the_status_chart_draws_one_segment_per_status_per_slot() -> None:
    runs = [_run(0, RunStatus.COMPLETED, 10), _run(0, RunStatus.FAILED, 10)]
    runs += [_run(5, RunStatus.CANCELLED, 10)]
    svg = status_chart(status_slots(runs, 6))
    assert svg.startswith("<svg") and "<script" not in svg and "style=" not in svg
    statuses = re.findall(r'data-status="([A-Z_]+)"', svg)
    assert sorted(statuses) == ["CANCELLED", "COMPLETED", "FAILED"]
    assert '<rect class="s-bad" data-status="FAILED"' in svg
    assert '<rect class="s-cancelled" data-status="CANCELLED"' in svg


def test_labels_are_escaped_in_the_svg() -> None:
    runs = [_run(0, RunStatus.COMPLETED, 10, cap="<script>x</script>", units=1.0)]
    stats = by_capability(runs)
    for svg in (duration_chart(stats), cost_chart(stats)):
        assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_a_cancelled_run_has_its_own_style_not_a_failures_nor_a_waits() -> None:
    cancelled = status_class(RunStatus.CANCELLED)
    assert cancelled == "cancelled"
    assert cancelled not in {status_class(RunStatus.FAILED), status_class(RunStatus.PARKED)}
    assert status_class(RunStatus.FAILED) == status_class(RunStatus.QUARANTINED) == "bad"
    assert status_class(None) == ""


def test_the_overview_counts_only_the_callers_tenant() -> None:
    from dataclasses import replace

    from starlette.testclient import TestClient

    from runplane.journal.index import RunFilter
    from runplane.serving.auth import Principals, token_digest
    from services.journal.api import build_api

    ours = [_run(i, RunStatus.COMPLETED, 1000, cap="refund", units=1.0) for i in range(3)]
    theirs = [replace(_run(9, RunStatus.FAILED, 5, cap="secret-payroll"), tenant="other")]

    class Index:
        def list(self, f: RunFilter) -> list[RunSummary]:
            return [s for s in [*ours, *theirs] if f.matches(s)][: f.limit]

    class NoKafka:
        def __getattr__(self, name: str) -> object:
            raise AssertionError("the overview reads the index only")

    readers = Principals.from_data(
        [{"name": "ada", "token_sha256": token_digest("t-ada"), "roles": ["clerk"]}]
    )
    app = build_api(lambda: Index(), NoKafka(), readers)  # type: ignore[arg-type,return-value]
    http = TestClient(app, cookies={"runplane_runs_token": "t-ada"})
    page = http.get("/ui/overview")
    assert page.status_code == 200, page.text
    assert "refund" in page.text and "3 units" in page.text
    assert "secret-payroll" not in page.text and 'data-status="FAILED"' not in page.text
    assert TestClient(app).get("/ui/overview").status_code == 401  # signed out
