"""The runs UI's pure pieces: which facts link to other runs, the time filters, escaping."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runplane.core.chain import Draft, seal
from runplane.web import e
from runplane.wire import JournalKind
from services.journal.ui import _linked_runs, _local_from_ms, _ms_from_local, run_href


def _record(seq: int, attrs: dict[str, str]):  # type: ignore[no-untyped-def]
    return seal(Draft("r-1", seq, 0, JournalKind.RUN_ADMITTED, 1_000, attrs=attrs), "0" * 64)


def test_facts_naming_runs_become_links_once_each() -> None:
    records = [
        _record(0, {"parent_run": "r-p", "capability": "x"}),
        _record(1, {"child_run": "r-c", "parent_run": "r-p"}),
    ]
    assert _linked_runs(records) == [("parent_run", "r-p"), ("child_run", "r-c")]


@given(st.integers(min_value=0, max_value=4_000_000_000_000))
def test_the_time_filter_round_trips_to_the_minute(ms: int) -> None:
    back = _ms_from_local(_local_from_ms(ms))
    assert back is not None and 0 <= ms - back < 60_000


def test_a_malformed_time_filter_is_ignored() -> None:
    assert _ms_from_local("yesterday") is None and _ms_from_local("") is None


@given(st.text())
def test_run_links_cannot_break_out_of_their_attribute(run_id: str) -> None:
    href = e(run_href(run_id))
    assert '"' not in href and "<" not in href and href.startswith("/ui/runs/")
