"""Panels of people on the worklist (issue 14 item 5): a task per seat, a ``Quorum`` decides.

Pure bookkeeping (``core.panels.PanelState``, with hypothesis: one person counts on one seat,
the outcome is the quorum's over the counted votes) and the engine through the Driver: the run
parks until the rule is decided (not every seat), each decision is journaled, the seats still
open are withdrawn, a replay and a restore do not ask again, and four-eyes holds across seats.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.core import (
    AgentRegistry,
    AgentSpec,
    Durability,
    Outcome,
    Runtime,
    StepCtx,
    replay_history,
)
from runplane.core.chain import run_start
from runplane.core.effect import WaitTimedOut
from runplane.core.panels import PanelState, panel_request, seat_names
from runplane.core.plan import Approved, Pending, Quorum, Rejected, Split, Vote
from runplane.errors import TerminalError
from runplane.journal.summary import parked_on_of, status_of
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import (
    CloseTask,
    DecisionOutcome,
    JournalKind,
    OpenTask,
    RunStatus,
    StartRun,
    TaskDecision,
)

# -- pure --------------------------------------------------------------------------------------


def test_seats_are_named_after_their_roles() -> None:
    assert seat_names(["legal", "finance", "finance"]) == {
        "legal": "legal",
        "finance-1": "finance",
        "finance-2": "finance",
    }
    assert seat_names({"a": "x"}) == {"a": "x"}
    bads: list[list[str] | dict[str, str]] = [[], {"a/b": "x"}, {"a": " "}, {" ": "x"}]
    for bad in bads:
        with pytest.raises(ValueError):
            seat_names(bad)


def test_a_panel_request_defaults_reject_at_and_refuses_an_impossible_rule() -> None:
    req = panel_request("ok?", {"x": 1}, ["a", "b", "c"], 2, None)
    assert (req["approve_at"], req["reject_at"]) == (2, 2)
    with pytest.raises(ValueError):
        panel_request("ok?", 1, ["a", "b", "c"], 1, 1)  # both could be reached
    with pytest.raises(ValueError):
        panel_request("ok?", 1, ["a"], 2, None)


def _state(n: int = 3, approve_at: int = 2) -> PanelState:
    req = panel_request("q", None, [f"r{i}" for i in range(n)], approve_at, None)
    return PanelState.opened(req, {s: f"t/{s}" for s in req["seats"]})


def test_a_repeat_decider_does_not_count_and_the_seat_is_asked_again() -> None:
    state = _state().vote("r0", ["alice"], True, "")
    assert state.repeat(["alice"]) is not None and state.repeat(["bob"]) is None
    with pytest.raises(TerminalError):
        state.vote("r1", ["alice"], True, "")
    again = state.ask_again("r1", "t/r1/1")
    assert again.seat_of("t/r1/1") == "r1" and again.seat_of("t/r1") is None
    assert PanelState.from_json(again.to_json()) == again


_decisions = st.lists(
    st.tuples(
        st.sampled_from(["r0", "r1", "r2", "r3"]),
        st.sampled_from(["alice", "bob", "carol", "dave", "erin"]),
        st.booleans(),
    ),
    max_size=12,
)


@given(decisions=_decisions, approve_at=st.integers(1, 4), reject_extra=st.integers(0, 3))
def test_one_person_one_seat_and_the_outcome_is_the_quorums(
    decisions: list[tuple[str, str, bool]], approve_at: int, reject_extra: int
) -> None:
    """Whatever the order and whoever decides: a seat counts once, a person counts once, and
    the outcome is the quorum's over the counted votes (never a majority of a split)."""
    reject_at = min(4, 4 - approve_at + 1 + reject_extra)
    req = panel_request("q", None, ["r0", "r1", "r2", "r3"], approve_at, reject_at)
    state = PanelState.opened(req, {s: f"t/{s}" for s in req["seats"]})
    counted: list[Vote] = []
    for seat, who, approve in decisions:
        if not isinstance(state.outcome, Pending):
            break
        if seat not in state.open:
            continue
        if state.repeat([who]) is not None:
            state = state.ask_again(seat, f"{state.open[seat]}/again")
            continue
        state = state.vote(seat, [who], approve, "")
        counted.append(Vote(seat, approve))
    people = [p for ps in state.deciders.values() for p in ps]
    assert len(people) == len(set(people))
    expected = Quorum(frozenset(req["seats"]), approve_at, reject_at, tuple(counted)).outcome
    assert state.outcome == expected
    assert PanelState.from_json(state.to_json()) == state
    assert not hasattr(Split((), ()), "majority")


# -- the engine, through the Driver -------------------------------------------------------------

SEEN: list[Any] = []


async def reviewed(ctx: StepCtx, input: Any) -> Any:
    outcome = await ctx.human_panel(
        "Pay out?", input, seats=["legal", "finance", "risk"], approve_at=2
    )
    SEEN.append(outcome)
    return {"panel": type(outcome).__name__, "votes": list(getattr(outcome, "approvers", ()))}


def _driver(durability: Durability = Durability.REPLAYABLE) -> Driver:
    spec = AgentRegistry().register(AgentSpec("reviewed", reviewed, durability), lint=False)
    return Driver(spec)


def _seat(driver: Driver, sid: str, seat: str) -> str:
    return next(t for t in driver.sessions[sid].open_tasks if t.endswith(f"/panel/{seat}"))


def test_the_run_resumes_once_the_quorum_is_decided_and_open_seats_are_withdrawn() -> None:
    driver = _driver()
    run = driver.run("reviewed", {"amount": 10}, session_id="p1")
    assert run.status is RunStatus.AWAITING_HUMAN
    assert len(driver.sessions["p1"].open_tasks) == 3
    run = driver.decide("p1", "APPROVED", by=("alice",), task_id=_seat(driver, "p1", "legal"))
    assert run.status is RunStatus.AWAITING_HUMAN  # one approval of two
    run = driver.decide("p1", "APPROVED", by=("bob",), task_id=_seat(driver, "p1", "risk"))
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"panel": "Approved", "votes": ["legal", "risk"]}
    assert any(t.endswith("/panel/finance") for t in driver.closed_tasks)  # withdrawn
    decided = [r for r in run.journal if r.kind is JournalKind.TASK_DECIDED]
    assert [r.attrs.get("counted") for r in decided] == ["yes", "yes", None]
    [result] = [e for e in run.results.values() if e.name == "panel"]
    assert result.label is not None and {"human:alice", "human:bob"} <= set(result.label.provenance)
    assert driver.verify("p1").ok
    spec = driver.agents.spec_for("reviewed", None)
    replay = replay_history(spec, run.snapshot, run.results)
    assert replay.divergence is None and replay.live_calls == 0 and replay.output == run.output


def test_two_rejections_stop_it_and_a_split_has_no_majority() -> None:
    driver = _driver()
    driver.run("reviewed", {}, session_id="p2")
    driver.decide("p2", "REJECTED", by=("alice",), task_id=_seat(driver, "p2", "legal"))
    run = driver.decide("p2", "REJECTED", by=("bob",), task_id=_seat(driver, "p2", "finance"))
    assert run.output == {"panel": "Rejected", "votes": []}
    assert isinstance(SEEN[-1], Rejected) and SEEN[-1].rejecters == ("finance", "legal")


def test_the_initiator_and_a_second_seat_by_the_same_person_do_not_count() -> None:
    driver = _driver()
    driver.run("reviewed", {}, session_id="p3")
    legal = _seat(driver, "p3", "legal")
    driver.decide("p3", "APPROVED", by=("alice",), task_id=legal)
    # The initiator: refused outright (the worklist would never send it; the engine refuses).
    risk = _seat(driver, "p3", "risk")
    task = driver.sessions["p3"].open_tasks[risk]
    driver.decide("p3", "APPROVED", by=("tester",), task_id=risk)
    assert driver.view("p3").status is RunStatus.AWAITING_HUMAN
    driver.sessions["p3"].open_tasks[risk] = task  # still open: the decision did not apply
    # alice again, on another seat: journaled, not counted, and the seat is asked anew.
    run = driver.decide("p3", "APPROVED", by=("alice",), task_id=risk)
    assert run.status is RunStatus.AWAITING_HUMAN
    again = _seat(driver, "p3", "risk/1")
    run = driver.decide("p3", "APPROVED", by=("carol",), task_id=again)
    assert run.output == {"panel": "Approved", "votes": ["legal", "risk"]}
    notes = [r.attrs for r in run.journal if r.kind is JournalKind.TASK_DECIDED]
    assert [a.get("counted") for a in notes[:-1]] == ["yes", "no", "yes"]
    assert "alice decided legal" in notes[1]["reason"]


@pytest.mark.parametrize("durability", [Durability.REPLAYABLE, Durability.CHECKPOINTED])
def test_a_restore_mid_panel_asks_nobody_again(durability: Durability) -> None:
    driver = _driver(durability)
    driver.run("reviewed", {}, session_id="p4")
    opened = list(driver.tasks_opened)
    driver.decide("p4", "APPROVED", by=("alice",), task_id=_seat(driver, "p4", "legal"))
    driver.crash("p4")
    driver.wake("p4")  # rebuilt from its snapshot and journal
    assert driver.tasks_opened == opened  # no seat asked again
    run = driver.decide("p4", "APPROVED", by=("bob",), task_id=_seat(driver, "p4", "finance"))
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == {"panel": "Approved", "votes": ["finance", "legal"]}
    assert driver.verify("p4").ok


def test_a_cancel_withdraws_every_open_seat() -> None:
    driver = _driver()
    driver.run("reviewed", {}, session_id="p5")
    driver.decide("p5", "APPROVED", by=("alice",), task_id=_seat(driver, "p5", "legal"))
    run = driver.cancel("p5", "no longer needed")
    assert run.status is not RunStatus.AWAITING_HUMAN
    withdrawn = [t for t in driver.closed_tasks if "/panel/" in t]
    assert sorted(t.rsplit("/", 1)[1] for t in withdrawn) == ["finance", "risk"]


def test_split_is_reported_when_every_vote_is_in_and_no_threshold_is_reached() -> None:
    async def four(ctx: StepCtx, input: Any) -> Any:
        out = await ctx.human_panel(
            "?", None, seats=["a", "b", "c", "d"], approve_at=3, reject_at=3
        )
        return {"panel": type(out).__name__}

    driver = Driver(AgentRegistry().register(AgentSpec("four", four), lint=False))
    driver.run("four", {}, session_id="p6")
    for seat, who, verdict in (("a", "u1", "APPROVED"), ("b", "u2", "APPROVED")):
        driver.decide("p6", verdict, by=(who,), task_id=_seat(driver, "p6", seat))
    for seat, who in (("c", "u3"), ("d", "u4")):
        run = driver.decide("p6", "REJECTED", by=(who,), task_id=_seat(driver, "p6", seat))
    assert run.output == {"panel": "Split"}


def test_approved_carries_seat_names() -> None:
    assert Approved(("a",)).approvers == ("a",)


# -- a checkpointed restore: decisions that come before the new era re-reaches the panel ------


async def drafted(ctx: StepCtx, input: Any) -> Any:
    draft = await ctx.generate("p", "m", "draft the payout note")  # performed again per era
    outcome = await ctx.human_panel("Send?", draft.text, seats=["a", "b", "c"], approve_at=2)
    return {"panel": type(outcome).__name__}


def _decision(sid: str, task_id: str, who: str) -> TaskDecision:
    return TaskDecision(
        session_id=sid,
        task_id=task_id,
        era=0,
        call_seq=1,
        outcome=DecisionOutcome.APPROVED,
        decided_by=(who,),
        decided_ms=5,
    )


def test_decisions_while_a_restored_era_is_busy_elsewhere_decide_the_carried_panel() -> None:
    """The new era performs its model call again before it reaches the panel; meanwhile two
    seats are decided. They count on the carried panel (journaled at its own slot), nobody is
    asked again, and the era finds the decided panel in the side-effect log."""
    spec = AgentRegistry().register(
        AgentSpec("drafted", drafted, Durability.CHECKPOINTED), lint=False
    )
    start, _ = _start_run("s-c")
    rt, step = Runtime.start(spec, start, now_ms=2)
    gen = Outcome.success({"text": "note", "tokens_in": 1, "tokens_out": 1, "cost_units": 0.0})
    parked = rt.complete(step.live_calls[0].call_seq, gen, now_ms=3)
    opened = [c.task_id for c in parked.commands if isinstance(c, OpenTask)]
    assert len(opened) == 3 and parked.snapshot.status is RunStatus.AWAITING_HUMAN
    results = dict(rt.results)
    rt.close()
    rt, again = Runtime.restore(spec, parked.snapshot, results, now_ms=4)
    assert again.live_calls and not any(isinstance(c, OpenTask) for c in again.commands)
    first = rt.deliver(_decision("s-c", opened[0], "alice"), now_ms=5)
    assert first.rejected is None
    second = rt.deliver(_decision("s-c", opened[1], "bob"), now_ms=6)
    assert second.rejected is None
    assert any(isinstance(c, CloseTask) and c.task_id == opened[2] for c in second.commands)
    done = rt.complete(again.live_calls[0].call_seq, gen, now_ms=7)
    assert done.end is RunStatus.COMPLETED
    assert not any(isinstance(c, OpenTask) for c in done.commands)  # nobody asked again
    assert json.loads(done.snapshot.output_json or "null") == {"panel": "Approved"}
    decided = [r for r in (*first.records, *second.records) if r.kind is JournalKind.TASK_DECIDED]
    assert [r.attrs.get("carried_from") for r in decided][:2] == ["0/1", "0/1"]


def _start_run(sid: str) -> tuple[StartRun, Any]:
    admitted, start = run_start(
        sid,
        capability="drafted",
        admission_key=sid,
        tenant="t",
        initiator="ivan",
        input_json="{}",
        now_ms=1,
    )
    return start, admitted


def test_a_seat_decision_by_nobody_is_rejected() -> None:
    driver = _driver()
    driver.run("reviewed", {}, session_id="p7")
    legal = _seat(driver, "p7", "legal")
    task = driver.sessions["p7"].open_tasks[legal]
    run = driver.decide("p7", "REJECTED", by=(), task_id=legal)
    assert run.status is RunStatus.AWAITING_HUMAN
    assert not [r for r in run.journal if r.kind is JournalKind.TASK_DECIDED]
    driver.sessions["p7"].open_tasks[legal] = task
    run = driver.decide("p7", "REJECTED", by=("alice",), task_id=legal)
    assert [r.attrs["counted"] for r in run.journal if r.kind is JournalKind.TASK_DECIDED] == [
        "yes"
    ]


def test_the_journal_alone_shows_the_run_awaiting_people_between_decisions() -> None:
    driver = _driver()
    driver.run("reviewed", {}, session_id="p8")
    run = driver.decide("p8", "APPROVED", by=("alice",), task_id=_seat(driver, "p8", "legal"))
    last: Any = run.journal[-1]  # read as the journal summary reads an audit record
    assert status_of(last) is RunStatus.AWAITING_HUMAN
    assert parked_on_of(last) == "task:p8/0/0"


def test_a_panel_times_out_durably_and_withdraws_its_open_seats() -> None:
    async def timed(ctx: StepCtx, input: Any) -> Any:
        try:
            await ctx.human_panel("?", None, seats=["a", "b", "c"], approve_at=2, timeout=60)
        except WaitTimedOut:
            return {"timed_out": True}
        return {"timed_out": False}

    driver = Driver(AgentRegistry().register(AgentSpec("timed", timed), lint=False))
    driver.run("timed", {}, session_id="p9")
    driver.decide("p9", "APPROVED", by=("alice",), task_id=_seat(driver, "p9", "a"))
    driver.crash("p9")  # the timer is in the snapshot: a restart keeps it
    driver.advance(61_000)
    run = driver.view("p9")
    assert run.status is RunStatus.COMPLETED and run.output == {"timed_out": True}
    withdrawn = sorted(t.rsplit("/", 1)[1] for t in driver.closed_tasks if "/panel/" in t)
    assert withdrawn == ["b", "c"]


def test_a_restored_era_that_asks_something_else_withdraws_the_carried_panels_seats() -> None:
    async def changes_its_mind(ctx: StepCtx, input: Any) -> Any:
        draft = await ctx.generate("scripted", "m", "panel or not?")
        if draft.text == "panel":
            await ctx.human_panel("?", None, seats=["a", "b"], approve_at=2)
            return "panel"
        decision = await ctx.approval("just one?", None, role="finance")
        return decision.outcome

    spec = AgentRegistry().register(
        AgentSpec("mind", changes_its_mind, Durability.CHECKPOINTED), lint=False
    )
    driver = Driver(spec, providers={"scripted": ScriptedProvider(["panel", "single"])})
    driver.run("mind", {}, session_id="p10")
    seats = sorted(t for t in driver.sessions["p10"].open_tasks if "/panel/" in t)
    assert len(seats) == 2
    driver.crash("p10")
    run = driver.wake("p10")  # era 1: the model answers otherwise, an approval is asked
    assert run.task is not None and "/panel/" not in run.task.task_id
    assert sorted(t for t in driver.closed_tasks if "/panel/" in t) == seats
