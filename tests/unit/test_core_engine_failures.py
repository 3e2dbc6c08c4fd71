"""A run ends in one place: the engine's failure steps for what the executor cannot serve.

The records and snapshots are pinned field by field to what the executor sealed by hand
before these steps existed, so moving the derivation did not move a byte.
"""

from __future__ import annotations

import dataclasses

from runplane.core.chain import Draft, run_start, seal
from runplane.core.engine import apply_step, fail_from_snapshot, fail_unstartable
from runplane.core.verify import verify_chain
from runplane.wire import (
    CloseTask,
    ErrorInfo,
    JournalKind,
    ParkedOn,
    ParkKind,
    RunStatus,
    RunStatusUpdate,
    SessionSnapshot,
    encode,
)


def _start():  # type: ignore[no-untyped-def]
    return run_start(
        "r-fail",
        capability="nobody",
        admission_key="k-1",
        tenant="t",
        initiator="alice",
        input_json='{"a":1}',
        now_ms=10,
    )


def test_an_unstartable_run_fails_at_seq_1_as_the_executor_sealed_it() -> None:
    admitted, start = _start()
    step = fail_unstartable(start, "no agent 'nobody'", now_ms=20)
    expected = seal(
        Draft(
            session_id="r-fail",
            seq=1,
            era=0,
            kind=JournalKind.RUN_FAILED,
            stamp_ms=20,
            attrs={"error_type": "UnknownCapability", "reason": "no agent 'nobody'"},
        ),
        start.admitted_hash,
    )
    assert step.records == (expected,)
    assert encode(step.records[0]) == encode(expected)
    assert step.end is RunStatus.FAILED and step.results == () and step.live_calls == ()
    assert step.commands == (
        RunStatusUpdate(
            admission_key="k-1",
            run_id="r-fail",
            status=RunStatus.FAILED,
            updated_ms=20,
            seq=1,
            tenant="t",  # admission finds the claim by (tenant, key)
        ),
    )
    snap = step.snapshot
    assert snap == SessionSnapshot(
        session_id="r-fail",
        capability="nobody",
        status=RunStatus.FAILED,
        era=0,
        next_seq=2,
        last_hash=expected.hash,
        case_id=None,
        admission_key="k-1",
        tenant="t",
        initiator="alice",
        input_json='{"a":1}',
        error=ErrorInfo(type="UnknownCapability", message="no agent 'nobody'", retryable=False),
        started_ms=start.admitted_ms,
        updated_ms=20,
    )
    assert verify_chain([admitted, *step.records], {}).ok


def _parked(kind: ParkKind) -> SessionSnapshot:
    admitted, start = _start()
    return SessionSnapshot(
        session_id="r-fail",
        capability="nobody",
        status=RunStatus.AWAITING_HUMAN,
        era=0,
        next_seq=1,
        last_hash=admitted.hash,
        parked_on=ParkedOn(kind=kind, ref="task-9", call_seq=0, era=0),
        admission_key="k-1",
        tenant="t",
        initiator="alice",
        input_json='{"a":1}',
        started_ms=start.admitted_ms,
        updated_ms=11,
    )


def test_failing_from_a_snapshot_continues_its_chain_and_withdraws_its_task() -> None:
    snap = _parked(ParkKind.TASK)
    step = fail_from_snapshot(snap, "boom " * 300, now_ms=30)
    (record,) = step.records
    assert (record.seq, record.prev_hash, record.kind) == (
        1,
        snap.last_hash,
        JournalKind.RUN_FAILED,
    )
    assert record.attrs == {"error_type": "ExecutorError", "reason": ("boom " * 300)[:500]}
    assert step.snapshot == dataclasses.replace(
        snap,
        status=RunStatus.FAILED,
        next_seq=2,
        last_hash=record.hash,
        parked_on=None,
        error=ErrorInfo(type="ExecutorError", message=("boom " * 300)[:1000], retryable=False),
        updated_ms=30,
    )
    assert step.commands[1] == CloseTask(task_id="task-9", reason="run FAILED", at_ms=30)


def test_a_run_parked_on_a_signal_has_no_task_to_withdraw() -> None:
    snap = _parked(ParkKind.SIGNAL)
    step = fail_from_snapshot(snap, "boom", now_ms=30)
    assert [type(c) for c in step.commands] == [RunStatusUpdate]


class _Sink:
    """A StepSink that writes down what it was handed, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    def put_records(self, records: tuple[object, ...]) -> None:
        self.seen += [("record", r) for r in records]

    def put_results(self, entries: tuple[object, ...]) -> None:
        self.seen += [("result", e) for e in entries]

    def put_commands(self, commands: tuple[object, ...]) -> None:
        self.seen += [("command", c) for c in commands]

    def put_snapshot(self, snapshot: object) -> None:
        self.seen.append(("snapshot", snapshot))

    def run_ended(self, status: object) -> None:
        self.seen.append(("ended", status))


def test_apply_step_is_one_order() -> None:
    """Records, commands, the snapshot, then the end; nothing added (a task the run was
    parked on is the ending step's own ``CloseTask``, test_ends_withdraw_every_task.py)."""
    _, start = _start()
    ended = fail_unstartable(start, "x", now_ms=20)
    sink = _Sink()
    assert apply_step(ended, sink)
    assert [what for what, _ in sink.seen] == ["record", "command", "snapshot", "ended"]
    assert sink.seen[1][1] == ended.commands[0]
    assert sink.seen[-1][1] is RunStatus.FAILED


def test_apply_step_of_a_step_that_changed_nothing_writes_no_snapshot() -> None:
    snap = _parked(ParkKind.SIGNAL)
    step = fail_from_snapshot(snap, "boom", now_ms=30)
    quiet = dataclasses.replace(step, records=(), commands=(), end=None)
    sink = _Sink()
    assert not apply_step(quiet, sink)
    assert sink.seen == []
