"""A call in doubt waits out its timeout before its probe asks (issue 35.2): after a SIGKILL
between the announce and the answer, the killed owner's request may still be on its way, and
a probe asked before the call's deadline could say "not applied" while it is. The deadline is
the journal's stamp of the announce plus the call's whole timeout budget (``tools.deadline``);
until then the run is parked on a timer at that instant."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runplane.core import (
    AgentRegistry,
    AgentSpec,
    Durability,
    EffectDecl,
    Outcome,
    Recovery,
    RetryPolicy,
    Runtime,
    StepCtx,
)
from runplane.core.engine import InFlight, timer_due
from runplane.core.engine.doubt import probe_at
from runplane.core.engine.tools import deadline
from runplane.core.gate import sinks
from runplane.testing import Driver
from runplane.wire import JournalKind, OpenTask, ParkKind, RunStatus, StartRun, TaskKind, Wake
from tests.unit.test_core_doubts import OPEN_SINKS, Peer, _crash_at, _spec, one_charge

CHARGE = EffectDecl(
    "charge",
    mutating=True,
    recovery=Recovery.RECONCILE,
    probe="get_charge",
    timeout_s=2.0,
    retry=RetryPolicy(max_attempts=2, initial_backoff_s=0.1, max_backoff_s=0.5),
)
EFFECTS = (CHARGE, EffectDecl("get_charge", mutating=False, recovery=Recovery.RETRY))
# Two attempts of 2 s and the longest backoff between them: 4.5 s after the announce.
BUDGET_MS = 4_500


def _flight(announced_ms: int) -> InFlight:
    return InFlight(
        0, 2, "tool", "tool://charge", "w", Recovery.RECONCILE, announced_ms=announced_ms
    )


def test_the_deadline_is_every_attempt_and_the_longest_backoffs_after_the_announce() -> None:
    assert deadline(1_000, CHARGE) == 1_000 + BUDGET_MS
    assert probe_at(_flight(1_000), CHARGE, 1_000 + BUDGET_MS - 1) == 1_000 + BUDGET_MS
    assert probe_at(_flight(1_000), CHARGE, 1_000 + BUDGET_MS) is None


@given(
    announced=st.integers(min_value=1, max_value=2**42),
    now=st.integers(min_value=0, max_value=2**43),
    timeout_s=st.floats(min_value=0.001, max_value=600),
    attempts=st.integers(min_value=1, max_value=10),
    mutating=st.booleans(),
    recovery=st.sampled_from(list(Recovery)),
)
def test_a_probe_asks_only_once_no_attempt_can_still_be_on_its_way(
    announced: int, now: int, timeout_s: float, attempts: int, mutating: bool, recovery: Recovery
) -> None:
    decl = EffectDecl(
        "charge",
        mutating=mutating,
        recovery=recovery,
        probe="get_charge",
        timeout_s=timeout_s,
        retry=RetryPolicy(max_attempts=attempts),
    )
    due = probe_at(_flight(announced), decl, now)
    sent_by = announced + attempts * timeout_s * 1000  # the last attempt's own timeout
    if mutating and recovery is Recovery.RECONCILE and now < deadline(announced, decl):
        assert due == deadline(announced, decl) and due > now and due >= sent_by
    else:
        assert due is None  # past it, or a doubt that need not wait: the probe asks now
    # A snapshot older than the stamp (0: unknown) probes at once, as before.
    assert probe_at(_flight(0), decl, now) is None


def _killed_after_the_charge(durability: Durability) -> tuple[Driver, Peer]:
    peer = Peer()
    hook, _ = _crash_at(("after_act", "charge", 0))
    driver = Driver(
        _spec(one_charge, durability, EFFECTS),
        tools=peer.tools(),
        crash_hook=hook,
        wait_out_doubts=False,
    )
    return driver, peer


def test_after_a_sigkill_the_probe_waits_for_the_deadline_from_the_journals_announce() -> None:
    for durability in (Durability.REPLAYABLE, Durability.CHECKPOINTED):
        driver, peer = _killed_after_the_charge(durability)
        run = driver.run("t", {}, session_id="run-w")
        # The charge reached the peer, the owner died before its answer was durable; the
        # restored run is in doubt and parked until the deadline, not probing.
        assert run.status is RunStatus.PARKED and peer.probes == 0, durability
        assert run.snapshot.parked_on is not None
        assert run.snapshot.parked_on.kind is ParkKind.WAKE
        (announce,) = [
            r
            for r in run.journal
            if r.kind is JournalKind.EFFECT_ANNOUNCED and r.name == "tool://charge"
        ]
        due = announce.stamp_ms + BUDGET_MS  # from the journal's stamp, not the agent
        # (a checkpointed restore also journals the doubt it found before the new era runs)
        doubt = [r for r in run.journal if r.kind is JournalKind.EFFECT_IN_DOUBT][-1]
        assert doubt.attrs["probe_at"] == str(due) and doubt.attrs["recovery"] == "reconcile"
        (parked,) = [
            r
            for r in run.journal
            if r.kind is JournalKind.RUN_PARKED and r.attrs.get("parked_on") == "doubt"
        ]
        assert parked.attrs["wake_at"] == str(due)
        # Rebuilt before the deadline (another crash, an eviction): it waits on, journaling
        # nothing again.
        before = len(run.journal)
        driver.crash("run-w")
        run = driver.wake("run-w")
        assert run.status is RunStatus.PARKED and peer.probes == 0
        if durability is Durability.REPLAYABLE:
            assert len(run.journal) == before
        # The deadline passes: the timer's Wake lets the probe ask; it finds the charge.
        driver.clock.advance(due - driver.clock.now_ms())
        driver.wait_out_doubts = True
        run = driver.wake("run-w")
        assert run.status is RunStatus.COMPLETED, (durability, run.error)
        assert peer.probes == 1 and peer.invocations["charge:charge-1"] == 1
        (probe,) = [
            r for r in run.journal if r.kind is JournalKind.EFFECT_ANNOUNCED and r.family == "probe"
        ]
        assert probe.stamp_ms >= due
        assert driver.verify("run-w").ok


def test_a_requires_operator_doubt_asks_a_person_at_once() -> None:
    """Only a probe waits: a person deciding is not fooled by a request in flight the way a
    lookup is (they see the call, its time, and may wait themselves)."""
    peer = Peer()
    hook, _ = _crash_at(("after_act", "charge", 0))
    operator = EffectDecl("charge", mutating=True, recovery=Recovery.REQUIRES_OPERATOR)
    driver = Driver(
        _spec(one_charge, Durability.REPLAYABLE, (operator,)),
        tools=peer.tools(),
        crash_hook=hook,
        wait_out_doubts=False,
    )
    run = driver.run("t", {}, session_id="run-o")
    assert run.task is not None and run.task.kind is TaskKind.OPERATOR
    assert not any(r.attrs.get("parked_on") == "doubt" for r in run.journal)


# -- unanswered within its timeout: in doubt, then its declared recovery (never a failed run) --


def _live_doubt(effects: tuple[EffectDecl, ...]) -> tuple[Any, Any]:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        return await ctx.tool("charge", {"amount": 3})

    spec = AgentRegistry().register(
        AgentSpec(
            "t",
            sinks(*OPEN_SINKS)(agent),
            Durability.REPLAYABLE,
            None,
            {e.name: e for e in effects},
        ),
        lint=False,
    )
    start = StartRun(
        session_id="r-t",
        capability="t",
        input_json="{}",
        case_id=None,
        admission_key="kt",
        tenant="default",
        initiator="u",
        admitted_hash="0" * 64,
        admitted_ms=1,
    )
    rt, step = Runtime.start(spec, start, now_ms=1_000)
    (charge,) = step.live_calls
    return rt, charge


def test_a_reconciling_call_unanswered_in_time_is_probed_after_its_deadline_and_performed() -> None:
    rt, charge = _live_doubt(EFFECTS)
    assert charge.deadline_ms == 1_000 + BUDGET_MS
    step = rt.in_doubt(charge.call_seq, now_ms=1_000 + 2_000)  # its one attempt timed out
    assert rt.status is RunStatus.PARKED and not step.live_calls
    step = rt.deliver(Wake(session_id="r-t", reason="timer", sent_ms=0), now_ms=1_000 + 4_000)
    assert not step.live_calls  # early: the deadline is not yet here
    step = rt.deliver(Wake(session_id="r-t", reason="timer", sent_ms=0), now_ms=charge.deadline_ms)
    (probe,) = step.live_calls
    assert probe.family == "probe" and probe.idempotency_key == charge.idempotency_key
    # The peer never got it: performed again, durable first, with a deadline of its own.
    step = rt.complete(probe.call_seq, Outcome.success(None), now_ms=charge.deadline_ms + 1)
    (again,) = step.live_calls
    assert again.announce_first and again.idempotency_key == charge.idempotency_key
    assert again.deadline_ms == charge.deadline_ms + 1 + BUDGET_MS
    rt.complete(again.call_seq, Outcome.success({"charged": 3}), now_ms=again.deadline_ms - 1)
    assert rt.status is RunStatus.COMPLETED


def test_an_operator_call_unanswered_in_time_parks_for_a_person() -> None:
    operator = EffectDecl("charge", mutating=True, recovery=Recovery.REQUIRES_OPERATOR)
    rt, charge = _live_doubt((operator,))
    assert charge.deadline_ms is None  # only a probe waits
    step = rt.in_doubt(charge.call_seq, now_ms=40_000)
    assert rt.status is RunStatus.AWAITING_HUMAN and not step.live_calls
    assert [c.kind for c in step.commands if isinstance(c, OpenTask)] == [TaskKind.OPERATOR]
    assert not any(r.kind is JournalKind.RUN_FAILED for r in step.records)


def test_a_checkpointed_restore_past_the_deadline_probes_and_drops_the_old_timer() -> None:
    driver, peer = _killed_after_the_charge(Durability.CHECKPOINTED)
    run = driver.run("t", {}, session_id="run-c")
    assert run.status is RunStatus.PARKED and run.snapshot.parked_on is not None
    driver.crash("run-c")
    driver.clock.advance(BUDGET_MS + 1)
    driver.crash_hook = None
    run = driver.wake("run-c")  # restored in a new era, already past the deadline
    assert run.status is RunStatus.COMPLETED and peer.probes == 1
    assert run.snapshot.era == 2 and timer_due(run.snapshot) is None
