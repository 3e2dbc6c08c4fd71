"""Pure parts of the O(1) wait (the Mark) and of warming a fresh broker (when to stop, when
to skip). The waits themselves run against Kafka in tests/integration/test_client_wait.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.runs.client import Client, Mark
from runplane.stack._warm import _settled, after_start
from runplane.wire import AdmissionOutcome, AdmissionReply


def test_a_mark_has_one_non_negative_end_per_partition() -> None:
    assert Mark((0, 5, 12)).ends == (0, 5, 12)
    with pytest.raises(ValueError):
        Mark(())
    with pytest.raises(ValueError):
        Mark((3, -1))


def _reply(outcome: AdmissionOutcome) -> AdmissionReply:
    return AdmissionReply(admission_key="k", outcome=outcome, run_id="r-1", replied_ms=1)


def test_only_a_run_admitted_after_the_mark_is_bounded_by_it() -> None:
    mark = Mark((7,))
    assert Client.floor_for(_reply(AdmissionOutcome.ADMITTED), mark) is mark
    # A duplicate's run was admitted before the mark: its snapshots may lie below it.
    assert Client.floor_for(_reply(AdmissionOutcome.DUPLICATE), mark) is None
    assert Client.floor_for(_reply(AdmissionOutcome.ADMITTED), None) is None


@given(st.lists(st.floats(min_value=0.1, max_value=1000), min_size=2))
def test_warming_stops_only_once_latency_stops_falling(windows: list[float]) -> None:
    assert _settled(windows) == (windows[-1] >= 0.95 * windows[-2])


def test_warming_needs_two_windows() -> None:
    assert not _settled([]) and not _settled([5.0])
    assert not _settled([100.0, 20.0]) and _settled([20.0, 19.5])


def test_only_a_broker_up_just_started_is_warmed(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing listens on port 9: were it tried, warming would fail and say so.
    assert after_start("127.0.0.1:9", "already running", None) == "already running"
    monkeypatch.setenv("RUNPLANE_STACK_WARM_S", "0")
    assert after_start("127.0.0.1:9", "started in 3.0s", None) == "started in 3.0s"
