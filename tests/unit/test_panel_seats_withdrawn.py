"""Every end withdraws every open seat of a panel (issue 25 item 2).

A run parked on a panel of people has one worklist task per seat; the run itself is parked on
the panel's ref, which is no task at all. Whatever ends the run — a quarantine (an inbox
request, or from outside), the executor failing it after its serving raised
(``fail_from_snapshot``), or an era carrying the panel while busy elsewhere — each seat still
open is closed (a ``CloseTask`` per seat task id), and no ``CloseTask`` names the panel's ref.
Driven through the engine's public API and ``apply_step``, the one order a step leaves the
engine in (the executor's and the Driver's).
"""

from __future__ import annotations

from typing import Any

from runplane.core import AgentRegistry, AgentSpec, Durability, Outcome, Runtime, StepCtx
from runplane.core.chain import run_start
from runplane.core.engine import Command, Step, apply_step, fail_from_snapshot
from runplane.wire import (
    CloseTask,
    DecisionOutcome,
    JournalRecord,
    OpenTask,
    ResultEntry,
    RunStatus,
    SessionSnapshot,
    StartRun,
    TaskDecision,
    Wake,
)


async def reviewed(ctx: StepCtx, input: Any) -> Any:
    outcome = await ctx.human_panel(
        "Pay out?", input, seats=["legal", "finance", "risk"], approve_at=2
    )
    return type(outcome).__name__


async def drafted(ctx: StepCtx, input: Any) -> Any:
    draft = await ctx.generate("p", "m", "draft")  # performed again by a restored era
    outcome = await ctx.human_panel("Send?", draft.text, seats=["a", "b", "c"], approve_at=2)
    return type(outcome).__name__


class _Sink:
    """Where a step goes: the commands it sends, the snapshot it leaves."""

    def __init__(self) -> None:
        self.commands: list[Command] = []
        self.snapshot: SessionSnapshot | None = None
        self.ended: RunStatus | None = None

    def put_records(self, records: tuple[JournalRecord, ...]) -> None:
        pass

    def put_results(self, entries: tuple[ResultEntry, ...]) -> None:
        pass

    def put_commands(self, commands: tuple[Command, ...]) -> None:
        self.commands.extend(commands)

    def put_snapshot(self, snapshot: SessionSnapshot) -> None:
        self.snapshot = snapshot

    def run_ended(self, status: RunStatus) -> None:
        self.ended = status

    def closed(self) -> list[str]:
        return sorted(c.task_id for c in self.commands if isinstance(c, CloseTask))


def _start(sid: str, capability: str) -> StartRun:
    _admitted, start = run_start(
        sid,
        capability=capability,
        admission_key=sid,
        tenant="t",
        initiator="ivan",
        input_json="{}",
        now_ms=1,
    )
    return start


def _parked_on_panel(sid: str) -> tuple[Runtime, SessionSnapshot, list[str]]:
    """A run parked on a three-seat panel, one seat decided: (runtime, snapshot, open seats)."""
    spec = AgentRegistry().register(AgentSpec("reviewed", reviewed), lint=False)
    rt, step = Runtime.start(spec, _start(sid, "reviewed"), now_ms=2)
    seats = sorted(c.task_id for c in step.commands if isinstance(c, OpenTask))
    assert len(seats) == 3 and step.snapshot.status is RunStatus.AWAITING_HUMAN
    decision = TaskDecision(
        session_id=sid,
        task_id=seats[0],
        era=0,
        call_seq=0,
        outcome=DecisionOutcome.APPROVED,
        decided_by=("alice",),
        decided_ms=3,
    )
    voted = rt.deliver(decision, now_ms=3)
    assert voted.rejected is None and voted.snapshot.status is RunStatus.AWAITING_HUMAN
    return rt, voted.snapshot, seats[1:]


def _apply(step: Step) -> _Sink:
    sink = _Sink()
    apply_step(step, sink)
    return sink


def test_a_run_parked_on_a_panel_and_quarantined_closes_every_open_seat() -> None:
    rt, before, open_seats = _parked_on_panel("q-1")
    assert before.parked_on is not None
    sink = _apply(rt.quarantine("its chain is broken", now_ms=4))
    assert sink.ended is RunStatus.QUARANTINED
    assert sink.closed() == open_seats
    assert before.parked_on.ref not in sink.closed()  # the panel's ref is no task


def test_a_quarantine_request_on_the_inbox_closes_every_open_seat() -> None:
    rt, _before, open_seats = _parked_on_panel("q-2")
    step = rt.deliver(
        Wake(session_id="q-2", reason="quarantine: broken chain", sent_ms=4), now_ms=4
    )
    sink = _apply(step)
    assert sink.ended is RunStatus.QUARANTINED
    assert sink.closed() == open_seats


def test_a_run_parked_on_a_panel_and_failed_by_the_executor_closes_every_open_seat() -> None:
    rt, before, open_seats = _parked_on_panel("f-1")
    rt.close()  # the executor's serving raised: it fails the run from its last snapshot
    sink = _apply(fail_from_snapshot(before, "serving raised", now_ms=4))
    assert sink.ended is RunStatus.FAILED
    assert sink.closed() == open_seats
    assert sink.snapshot is not None and sink.snapshot.status is RunStatus.FAILED


def test_a_carried_panel_of_a_run_failed_by_the_executor_is_withdrawn_too() -> None:
    """A restored era busy with its model call carries the panel it has not reached again;
    failed by the executor then, nobody waits for the panel's seats any more."""
    spec = AgentRegistry().register(
        AgentSpec("drafted", drafted, Durability.CHECKPOINTED), lint=False
    )
    rt, step = Runtime.start(spec, _start("f-2", "drafted"), now_ms=2)
    gen = Outcome.success({"text": "note", "tokens_in": 1, "tokens_out": 1, "cost_units": 0.0})
    parked = rt.complete(step.live_calls[0].call_seq, gen, now_ms=3)
    seats = sorted(c.task_id for c in parked.commands if isinstance(c, OpenTask))
    results = dict(rt.results)
    rt.close()
    rt, again = Runtime.restore(spec, parked.snapshot, results, now_ms=4)
    assert again.live_calls and again.snapshot.parked_on is None  # busy elsewhere
    rt.close()
    sink = _apply(fail_from_snapshot(again.snapshot, "serving raised", now_ms=5))
    assert sink.closed() == seats
