"""Results retention bookkeeping in the executor's partition state (pure parts)."""

from __future__ import annotations

import pytest

from runplane.core.repair import RepairKind, RepairOrder, scrub
from runplane.wire import RunStatus, SessionSnapshot
from services.executor.state import PartitionState, _expiring

pytestmark = pytest.mark.unit


def _snap(sid: str, status: RunStatus, updated_ms: int = 1_000) -> SessionSnapshot:
    return SessionSnapshot(
        session_id=sid,
        capability="c",
        status=status,
        era=0,
        next_seq=3,
        last_hash="a" * 64,
        admission_key="k",
        tenant="t",
        initiator="i",
        input_json="{}",
        started_ms=0,
        updated_ms=updated_ms,
    )


def test_an_ended_run_expires_at_its_time_and_a_resumed_one_never() -> None:
    part = PartitionState()
    for sid, due in (("a", 10), ("b", 20)):
        part.results_of(sid)[(0, 0)] = object()  # type: ignore[assignment]
        part.end(
            sid, RunStatus.COMPLETED, snapshot=_snap(sid, RunStatus.COMPLETED), retain_until_ms=due
        )
    part.end(
        "nobodies",
        RunStatus.COMPLETED,
        snapshot=_snap("nobodies", RunStatus.COMPLETED),
        retain_until_ms=5,
    )
    part.end("forever", RunStatus.COMPLETED)  # retention off
    assert [e.erased.session_id for e in part.expiring] == ["a", "b"]
    assert part.due(9, 10) == []
    part.keep("b")
    [item] = part.due(100, 10)
    assert (item.erased.session_id, item.slots) == ("a", ((0, 0),))
    assert not part.expiring


def test_a_restore_queues_ended_runs_by_due_time_and_skips_erased_and_live_ones() -> None:
    erased = scrub(_snap("e", RunStatus.FAILED), RepairOrder(RepairKind.ERASE, "ops"), 0)
    snaps = {
        "late": _snap("late", RunStatus.COMPLETED, updated_ms=50),
        "early": _snap("early", RunStatus.QUARANTINED, updated_ms=10),
        "live": _snap("live", RunStatus.PARKED),
        "e": erased,
    }
    slots = {sid: [(0, 1), (0, 0)] for sid in snaps}
    queue = _expiring(snaps, slots, retention_ms=100)
    assert [(e.erased.session_id, e.due_ms, e.slots) for e in queue] == [
        ("early", 110, ((0, 0), (0, 1))),
        ("late", 150, ((0, 0), (0, 1))),
    ]
    assert not _expiring(snaps, slots, retention_ms=None)
