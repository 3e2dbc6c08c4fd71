"""Requests a run sends other services and waits on: deadline replies, escalations, and
open tasks / case requests carried across a checkpointed restore (asked once)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from runplane.core import (
    AgentRegistry,
    AgentSpec,
    CaseRefused,
    Durability,
    EffectDecl,
    Outcome,
    Runtime,
    StepCtx,
    days,
    replay_history,
    run_admitted,
    verify_chain,
)
from runplane.testing import Driver, ScriptedProvider
from runplane.wire import (
    CaseReply,
    CloseTask,
    DecisionOutcome,
    JournalKind,
    JournalRecord,
    MeetDeadline,
    OpenTask,
    ParkKind,
    PutCaseState,
    RegisterDeadline,
    ResultEntry,
    RunStatus,
    StartRun,
    TaskDecision,
)

T0 = 1_700_000_000_000


def _spec(
    fn: Any, durability: Durability = Durability.REPLAYABLE, effects: tuple[EffectDecl, ...] = ()
) -> AgentSpec:
    return AgentRegistry().register(
        AgentSpec("t", fn, durability, None, {e.name: e for e in effects}), lint=False
    )


def _start(
    spec: AgentSpec, sid: str = "s-1", case_id: str | None = "case-1", **kw: Any
) -> tuple[Runtime, Any, list[JournalRecord]]:
    admitted = run_admitted(
        sid,
        capability="t",
        admission_key=f"k-{sid}",
        tenant="test",
        initiator="alice",
        input_json="{}",
        now_ms=T0,
        case_id=case_id,
    )
    start = StartRun(
        session_id=sid,
        capability="t",
        input_json="{}",
        case_id=case_id,
        admission_key=f"k-{sid}",
        tenant="test",
        initiator="alice",
        admitted_hash=admitted.hash,
        admitted_ms=T0,
    )
    rt, step = Runtime.start(spec, start, now_ms=T0 + 1, **kw)
    return rt, step, [admitted, *step.records]


def _reply(
    command: Any, *, accepted: bool, reason: str | None = None, op: str = "register_deadline"
) -> CaseReply:
    return CaseReply(
        session_id=command.reply_to,
        request_id=command.request_id,
        case_id=command.case_id,
        era=command.era,
        call_seq=command.call_seq,
        op=op,
        accepted=accepted,
        version=0,
        reason=reason,
    )


def _decision(task: OpenTask, outcome: str, comment: str = "") -> TaskDecision:
    return TaskDecision(
        session_id=task.session_id,
        task_id=task.task_id,
        era=task.era,
        call_seq=task.call_seq,
        outcome=DecisionOutcome(outcome),
        comment=comment,
        decided_by=("bob",),
        decided_ms=T0 + 50,
    )


# --- 1. deadline commands ask and wait -----------------------------------------------------


async def _deadline_agent(ctx: StepCtx, input: Any) -> Any:
    try:
        due = await ctx.deadline("first-response", days(1))
    except CaseRefused as exc:
        return {"refused": exc.reason}
    return {"due": due}


def test_register_deadline_asks_the_cases_service_and_waits_for_its_reply() -> None:
    rt, step, _ = _start(_spec(_deadline_agent))
    (command,) = step.commands[:1]
    assert isinstance(command, RegisterDeadline)
    assert command.reply_to == "s-1" and command.request_id == "s-1/0/0"
    assert (
        step.parked_on is not None
        and step.parked_on.kind is ParkKind.CASE_REPLY
        and step.parked_on.ref == "s-1/0/0"
    )
    assert rt.status is RunStatus.PARKED and not step.results  # nothing recorded before the answer

    done = rt.deliver(_reply(command, accepted=True), now_ms=T0 + 9)
    assert done.rejected is None and done.end is RunStatus.COMPLETED
    assert rt.snapshot().output_json == f'{{"due":{command.due_ms}}}'
    assert [r.kind for r in done.records][:1] == [JournalKind.DEADLINE_REGISTERED]


def test_a_refused_deadline_raises_case_refused_with_the_reason_and_replays_without_asking() -> (
    None
):
    spec = _spec(_deadline_agent)
    rt, step, journal = _start(spec)
    command = step.commands[0]
    done = rt.deliver(_reply(command, accepted=False, reason="case is closed"), now_ms=T0 + 9)
    journal += done.records
    assert done.end is RunStatus.COMPLETED
    snap = rt.snapshot()
    assert snap.output_json == '{"refused":"case is closed"}'
    results = {(e.era, e.call_seq): e for e in (*step.results, *done.results)}
    assert verify_chain(journal, results).ok
    report = replay_history(spec, snap, results)
    assert report.live_calls == 0 and report.output == {"refused": "case is closed"}


def test_meeting_an_obligation_that_does_not_exist_is_refused_in_the_agent() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.deadline("d", days(1))
        await ctx.meet_deadline("d")
        try:
            await ctx.meet_deadline("never-registered")
        except CaseRefused as exc:
            return exc.reason
        return "accepted"

    driver = Driver(_spec(agent))
    run = driver.run("t", {}, case_id="case-1")
    assert run.output == "no obligation named 'never-registered'"
    assert driver.obligations[("case-1", "d")]["status"] == "MET"
    assert driver.verify(run.session_id).ok


def test_a_deadline_on_a_closed_case_reaches_the_agent() -> None:
    driver = Driver(_spec(_deadline_agent))
    driver.closed_cases.add("case-1")
    run = driver.run("t", {}, case_id="case-1")
    assert run.output == {"refused": "case is closed"}
    assert ("case-1", "first-response") not in driver.obligations


class _ShiftingCalendar:
    """A calendar whose answer changes between calls (a holiday table redeployed)."""

    def __init__(self) -> None:
        self.calls = 0

    def resolve(self, name: str, rule: Mapping[str, Any], start_ms: int) -> tuple[int, str]:
        self.calls += 1
        return start_ms + 1_000 * self.calls, f"digest-{self.calls}"


def test_a_run_rebuilt_while_waiting_journals_the_instant_it_sent_not_a_new_resolution() -> None:
    spec = _spec(_deadline_agent)
    calendar = _ShiftingCalendar()
    rt, step, _ = _start(spec, calendars=calendar)
    sent = step.commands[0]
    assert isinstance(sent, RegisterDeadline)
    rt.close()  # evicted while parked on the reply
    rebuilt, again = Runtime.restore(spec, step.snapshot, {}, now_ms=T0 + 5, calendars=calendar)
    assert again.commands == () and calendar.calls == 1  # nothing re-sent, nothing re-resolved
    done = rebuilt.deliver(_reply(sent, accepted=True), now_ms=T0 + 9)
    (entry,) = done.results
    assert entry.value_json is not None and f'"due_ms":{sent.due_ms}' in entry.value_json
    assert entry.value_json is not None and '"calendar_digest":"digest-1"' in entry.value_json


def test_a_reply_to_a_meet_names_its_slot_and_a_stray_reply_is_rejected() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        await ctx.meet_deadline("d")
        return "met"

    rt, step, _ = _start(_spec(agent))
    meet = step.commands[0]
    assert isinstance(meet, MeetDeadline) and meet.reply_to == "s-1"
    stray = CaseReply(
        session_id="s-1",
        request_id="s-1/0/7",
        case_id="case-1",
        era=0,
        call_seq=7,
        op="meet_deadline",
        accepted=True,
        version=0,
    )
    assert rt.deliver(stray, now_ms=T0 + 3).rejected is not None
    assert (
        rt.deliver(_reply(meet, accepted=True, op="meet_deadline"), now_ms=T0 + 4).end
        is RunStatus.COMPLETED
    )


# --- 2. an escalation is journaled and the run keeps waiting -------------------------------


async def _approve_agent(ctx: StepCtx, input: Any) -> Any:
    decision = await ctx.approval(
        "ok?",
        {"amount": 5},
        role="finance",
        expires_in=60_000,
        on_expiry="escalate",
        escalate_to="supervisor",
    )
    return {"approved": decision.approved, "by": list(decision.decided_by)}


def test_an_escalated_task_is_journaled_and_the_same_task_still_resumes_the_run() -> None:
    driver = Driver(_spec(_approve_agent))
    run = driver.run("t", {})
    assert run.task is not None and run.task.escalate_to == "supervisor"
    task_id = run.task.task_id
    run = driver.decide(
        run.session_id,
        "ESCALATED",
        comment="expired; escalated from role 'finance' to 'supervisor'",
        by=(),
    )
    assert run.status is RunStatus.AWAITING_HUMAN
    decided, parked = run.journal[-2:]
    assert decided.kind is JournalKind.TASK_DECIDED
    assert decided.attrs["outcome"] == "ESCALATED" and decided.attrs["escalate_to"] == "supervisor"
    assert decided.attrs["task_id"] == task_id and "escalated from role" in decided.attrs["reason"]
    assert parked.kind is JournalKind.RUN_PARKED and parked.attrs["parked_on"] == f"task:{task_id}"
    assert run.snapshot.parked_on is not None and run.snapshot.parked_on.ref == task_id
    assert not run.results  # nothing recorded as the approval's answer yet

    run = driver.decide(run.session_id, "APPROVED", by=("carol",))
    assert run.output == {"approved": True, "by": ["carol"]}
    assert driver.verify(run.session_id).ok and driver.tasks_opened == [task_id]


def test_an_approval_that_names_no_escalation_role_keeps_its_old_witness() -> None:
    # Approvals recorded before escalate_to existed must still replay (same witness).
    from runplane.core import request_witness

    async def agent(ctx: StepCtx, input: Any) -> Any:
        return (await ctx.approval("q", 1, role="r")).approved

    _rt, step, _ = _start(_spec(agent))
    legacy = {
        "question": "q",
        "answer": 1,
        "role": "r",
        "approvals": 1,
        "expires_in": None,
        "on_expiry": "fail",
        "allow_unattended": False,
    }
    assert step.records[-1].request_witness == request_witness(legacy)
    assert isinstance(step.commands[0], OpenTask) and step.commands[0].escalate_to is None


# --- 3. checkpointed restore while parked: asked once --------------------------------------


def _checkpointed_approval(generations: ScriptedProvider | None = None) -> AgentSpec:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        if ctx.restored is None:
            await ctx.checkpoint({"at": "before-approval"})
        if generations is not None:
            await ctx.generate("scripted", "m", "draft")  # re-executed after a restore
        decision = await ctx.approval("refund 5?", {"amount": 5}, role="finance")
        return {"approved": decision.approved, "era": ctx.era}

    return _spec(agent, Durability.CHECKPOINTED)


def test_a_checkpointed_run_restored_while_awaiting_a_human_keeps_its_task() -> None:
    driver = Driver(_checkpointed_approval())
    run = driver.run("t", {})
    assert run.status is RunStatus.AWAITING_HUMAN and driver.tasks_opened == [
        f"{run.session_id}/0/1"
    ]
    driver.crash(run.session_id)  # the restore starts era 1 from the checkpoint
    run = driver.decide(run.session_id, "APPROVED")  # decided on the era-0 task
    assert run.output == {"approved": True, "era": 1}
    assert driver.tasks_opened == [f"{run.session_id}/0/1"]  # never asked twice
    carried = [
        r for r in run.journal if r.kind is JournalKind.RUN_PARKED and r.attrs.get("carried_from")
    ]
    assert (
        len(carried) == 1
        and carried[0].era == 1
        and carried[0].attrs["task_id"] == f"{run.session_id}/0/1"
    )
    assert driver.verify(run.session_id).ok and driver.closed_tasks == []


def test_a_decision_arriving_before_the_new_era_asks_again_is_served_from_its_slot() -> None:
    generations = ScriptedProvider(["draft text"])
    spec = _checkpointed_approval(generations)
    rt, step, journal = _start(spec)
    results: dict[tuple[int, int], ResultEntry] = {}

    def commit(s: Any) -> None:
        journal.extend(s.records)
        results.update({(e.era, e.call_seq): e for e in s.results})

    results.update(
        {(e.era, e.call_seq): e for e in step.results}
    )  # its records are in the journal already
    gen = rt.complete(
        step.live_calls[0].call_seq, Outcome.success({"text": "draft text"}), now_ms=T0 + 2
    )
    commit(gen)
    task = gen.commands[0]
    assert isinstance(task, OpenTask) and task.task_id == "s-1/0/2"
    rt.close()

    restored, step = Runtime.restore(spec, gen.snapshot, results, now_ms=T0 + 10)
    commit(step)
    assert (
        step.live_calls
        and step.live_calls[0].family == "generation"
        and step.live_calls[0].era == 1
    )
    early = restored.deliver(_decision(task, "APPROVED"), now_ms=T0 + 11)
    assert early.rejected is None
    commit(early)
    (entry,) = early.results
    assert (entry.era, entry.call_seq) == (0, 2) and early.records[
        0
    ].era == 0  # at the task's own slot
    done = restored.complete(
        step.live_calls[0].call_seq, Outcome.success({"text": "draft text"}), now_ms=T0 + 12
    )
    commit(done)
    assert done.end is RunStatus.COMPLETED and not any(
        isinstance(c, OpenTask) for c in done.commands
    )
    assert restored.snapshot().output_json == '{"approved":true,"era":1}'
    assert verify_chain(journal, results).ok


def test_a_carried_task_the_new_era_does_not_ask_again_is_withdrawn() -> None:
    answers = iter(["first draft", "second draft"])

    async def agent(ctx: StepCtx, input: Any) -> Any:
        if ctx.restored is None:
            await ctx.checkpoint({})
        draft = await ctx.generate("scripted", "m", "draft")  # a different text after the restore
        decision = await ctx.approval("send?", draft.text, role="support")
        return decision.approved

    spec = _spec(agent, Durability.CHECKPOINTED)
    driver = Driver(spec, providers={"scripted": ScriptedProvider(lambda m, p, k: next(answers))})
    run = driver.run("t", {})
    old_task = driver.tasks_opened[0]
    driver.crash(run.session_id)
    run = driver.wake(run.session_id)
    assert driver.closed_tasks == [old_task]  # the question changed: the old one is withdrawn
    assert (
        len(driver.tasks_opened) == 2
        and run.task is not None
        and run.task.task_id.startswith(f"{run.session_id}/1/")
    )
    assert run.task.answer_json == '"second draft"'
    assert driver.decide(run.session_id, "APPROVED").output is True


def test_a_checkpointed_run_restored_while_waiting_on_a_case_write_does_not_write_twice() -> None:
    async def agent(ctx: StepCtx, input: Any) -> Any:
        if ctx.restored is None:
            await ctx.checkpoint({})
        return await ctx.put_case_state(0, {"status": "open"})

    spec = _spec(agent, Durability.CHECKPOINTED)
    rt, step, journal = _start(spec)
    put = step.commands[0]
    assert isinstance(put, PutCaseState) and put.reply_to == "s-1"
    results = {(e.era, e.call_seq): e for e in step.results}
    rt.close()
    restored, again = Runtime.restore(spec, step.snapshot, results, now_ms=T0 + 10)
    journal += again.records
    assert not any(isinstance(c, PutCaseState) for c in again.commands)  # adopted, not re-sent
    assert (
        again.parked_on is not None
        and again.parked_on.ref == put.request_id
        and again.parked_on.era == 1
    )
    done = restored.deliver(_reply(put, accepted=True, op="put_state"), now_ms=T0 + 11)
    journal += done.records
    results.update({(e.era, e.call_seq): e for e in done.results})
    assert done.end is RunStatus.COMPLETED and restored.snapshot().output_json == "0"
    assert verify_chain(journal, results).ok


@pytest.mark.parametrize("outcome", ["APPROVED", "REJECTED"])
def test_a_carried_task_decided_while_the_run_is_down_resumes_it(outcome: str) -> None:
    spec = _checkpointed_approval()
    rt, step, _journal = _start(spec, case_id=None)
    task = step.commands[0]
    assert isinstance(task, OpenTask)
    rt.close()
    restored, again = Runtime.restore(
        spec, step.snapshot, {(e.era, e.call_seq): e for e in step.results}, now_ms=T0 + 10
    )
    assert not any(isinstance(c, (OpenTask, CloseTask)) for c in again.commands)
    done = restored.deliver(_decision(task, outcome), now_ms=T0 + 11)
    assert done.rejected is None and done.end is RunStatus.COMPLETED
    assert (
        restored.snapshot().output_json
        == f'{{"approved":{str(outcome == "APPROVED").lower()},"era":1}}'
    )


def test_restoring_twice_does_not_serve_a_stale_copy_of_an_earlier_read() -> None:
    # Found by the property test: era 1 re-records era 0's case read as a reconstruction; era
    # 2 must not count it as a second read, or the run's next read gets the old version.
    async def agent(ctx: StepCtx, input: Any) -> Any:
        for i in range(2):
            await ctx.tool("tick", {"i": i}, mutating=False)
            current = await ctx.case_state()
            await ctx.put_case_state(current.version, {**(current.state or {}), f"k{i}": i})
        return (await ctx.case_state()).version

    acts = {"n": 0}

    def crash_on_second_and_third_act(phase: str, call: Any) -> bool:
        if phase != "before_act":
            return False
        acts["n"] += 1
        return acts["n"] in (2, 3)

    driver = Driver(
        _spec(agent, Durability.CHECKPOINTED),
        tools={"tick": lambda a, k: a["i"]},
        cases={"case-1": {}},
        crash_hook=crash_on_second_and_third_act,
    )
    run = driver.run("t", {}, case_id="case-1")
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.output == 3 and driver.cases["case-1"] == ({"k0": 0, "k1": 1}, 3)
    assert run.snapshot.era == 2 and driver.verify(run.session_id).ok
