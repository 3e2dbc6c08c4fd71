"""Claim status follows the run's chain order, not executor wall clocks (review minor 2).

After a rebalance the run's new owner may have a clock behind the old owner's: its COMPLETED,
stamped earlier than the RUNNING before it, used to be dropped as stale — a duplicate request
was then told the run was still running, forever.
"""

from __future__ import annotations

from test_admission_handler import CAPS, NOW, POS, req

from runplane.wire import RunStatus, RunStatusUpdate
from services.admission.decide import Admitted, Ignored, StatusUpdated, decide


def _admitted() -> Admitted:
    first = decide(None, "k1", POS, req(), CAPS, NOW)
    assert isinstance(first, Admitted)
    return first


def _update(run_id: str, status: RunStatus, at: int, seq: int | None) -> RunStatusUpdate:
    return RunStatusUpdate(admission_key="k1", run_id=run_id, status=status, updated_ms=at, seq=seq)


def test_a_completion_stamped_by_a_slower_clock_still_wins() -> None:
    first = _admitted()
    running = decide(
        first.claim,
        "k1",
        POS,
        _update(first.claim.run_id, RunStatus.RUNNING, NOW + 5_000, 3),
        CAPS,
        NOW,
    )
    assert isinstance(running, StatusUpdated)
    # the new owner's clock is 4 s behind
    done = decide(
        running.claim,
        "k1",
        POS,
        _update(first.claim.run_id, RunStatus.COMPLETED, NOW + 1_000, 9),
        CAPS,
        NOW,
    )
    assert isinstance(done, StatusUpdated) and done.claim.status is RunStatus.COMPLETED
    assert done.claim.status_seq == 9 and done.claim.updated_ms == NOW + 5_000


def test_an_update_from_earlier_in_the_chain_is_stale_whatever_its_clock() -> None:
    first = _admitted()
    done = decide(
        first.claim, "k1", POS, _update(first.claim.run_id, RunStatus.COMPLETED, NOW, 9), CAPS, NOW
    )
    assert isinstance(done, StatusUpdated)
    late = decide(
        done.claim,
        "k1",
        POS,
        _update(first.claim.run_id, RunStatus.RUNNING, NOW + 60_000, 3),
        CAPS,
        NOW,
    )
    assert isinstance(late, Ignored)


def test_updates_without_a_seq_apply_in_arrival_order() -> None:
    first = _admitted()
    a = decide(
        first.claim,
        "k1",
        POS,
        _update(first.claim.run_id, RunStatus.RUNNING, NOW + 5_000, None),
        CAPS,
        NOW,
    )
    assert isinstance(a, StatusUpdated)
    b = decide(
        a.claim,
        "k1",
        POS,
        _update(first.claim.run_id, RunStatus.COMPLETED, NOW + 1, None),
        CAPS,
        NOW,
    )
    assert isinstance(b, StatusUpdated) and b.claim.status is RunStatus.COMPLETED
