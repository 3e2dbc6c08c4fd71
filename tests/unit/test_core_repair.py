"""``runplane.core.repair``: resume, fork and erase decided on a run's values alone."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runplane.core import AgentRegistry, EffectDecl, Runtime, StepCtx, verify_chain
from runplane.core import repair as core
from runplane.core.chain import ChainFault, seal
from runplane.testing import Driver
from runplane.wire import ErrorInfo, JournalKind, RunStatus

pytestmark = pytest.mark.unit

AGENTS = AgentRegistry()


@AGENTS.agent("steps", durability="replayable")
async def steps(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    a = await ctx.observe("a", lambda: 1)
    b = await ctx.observe("b", lambda: a + 1)
    if input.get("fail"):
        raise ValueError("boom")
    return {"b": b}


@AGENTS.agent("paid", durability="replayable", effects=[EffectDecl("charge")])
async def paid(ctx: StepCtx, input: dict[str, Any]) -> Any:
    return await ctx.tool("charge", {"cents": 5})


OPS = core.RepairOrder(core.RepairKind.RESUME, "ops", "fixed")


def _run(**input: Any) -> Any:
    driver = Driver(AGENTS)
    return driver.run("steps", input)


def test_resume_reopens_a_failed_chain_and_the_chain_still_verifies() -> None:
    view = _run(fail=True)
    assert view.status is RunStatus.FAILED
    record, running, update = core.resume(view.snapshot, OPS, now_ms=1)
    assert record.kind is JournalKind.RUN_RESUMED and record.seq == view.snapshot.next_seq
    assert record.attrs == {
        "repair": "resume",
        "by": "ops",
        "reason": "fixed",
        "from_status": "FAILED",
    }
    assert verify_chain([*view.journal, record], view.results).ok
    assert (running.status, running.error, running.last_hash) == (
        RunStatus.RUNNING,
        None,
        record.hash,
    )
    assert (update.status, update.seq) == (RunStatus.RUNNING, record.seq)


def test_a_record_after_an_end_that_is_not_a_resume_still_breaks_the_chain() -> None:
    view = _run(fail=True)
    record, _, _ = core.resume(view.snapshot, OPS, now_ms=1)
    forged = seal(replace(record, attrs={"by": "ops"}), record.prev_hash)
    verdict = verify_chain([*view.journal, forged], view.results)
    assert verdict.fault is ChainFault.AFTER_END
    # a resume record after a COMPLETED end is a break too: only failed/quarantined reopen
    done = _run()
    reopened = seal(
        replace(record, session_id=done.session_id, seq=len(done.journal)),
        done.journal[-1].hash,
    )
    verdict = verify_chain([*done.journal, reopened], done.results)
    assert verdict.fault is ChainFault.AFTER_END


def test_resume_and_erase_refuse_runs_in_the_wrong_state() -> None:
    done = _run()
    with pytest.raises(core.RepairRefused, match="only QUARANTINED or FAILED"):
        core.resume(done.snapshot, OPS, now_ms=1)
    cancelled = replace(
        done.snapshot,
        status=RunStatus.FAILED,
        error=ErrorInfo(type="RunCancelled", message="no longer needed", retryable=False),
    )
    with pytest.raises(core.RepairRefused, match="cancelled"):
        core.resume(cancelled, OPS, now_ms=1)
    live = replace(done.snapshot, status=RunStatus.PARKED)
    erase = core.RepairOrder(core.RepairKind.ERASE, "ops")
    with pytest.raises(core.RepairRefused, match="only ended runs are erased"):
        core.erase(live, erase, now_ms=1, bodies=0)
    _, scrubbed = core.erase(done.snapshot, erase, now_ms=1, bodies=0)
    assert core.erased(scrubbed) and scrubbed.output_json is None and scrubbed.input_json == "null"
    assert core.refusal(core.RepairKind.RESUME, scrubbed) is not None
    with pytest.raises(core.RepairRefused, match="erased"):
        core.fork(
            scrubbed, done.journal, done.results, from_seq=1, session_id="r-f", order=OPS, now_ms=1
        )


def test_a_fork_keeps_the_prefix_links_the_parent_and_verifies() -> None:
    view = _run()
    recorded = [r for r in view.journal if r.kind is JournalKind.EFFECT_RECORDED]
    n = recorded[0].seq + 1
    plan = core.fork(
        view.snapshot, view.journal, view.results, from_seq=n, session_id="r-f", order=OPS, now_ms=9
    )
    assert verify_chain(plan.records, {(e.era, e.call_seq): e for e in plan.results}).ok
    assert [r.kind for r in plan.records[:n]] == [r.kind for r in view.journal[:n]]
    link = plan.records[n]
    assert link.attrs["parent_head"] == view.journal[-1].hash
    assert link.attrs["parent_at"] == view.journal[n - 1].hash
    assert [(e.session_id, e.call_seq) for e in plan.results] == [("r-f", recorded[0].call_seq)]
    assert (plan.snapshot.next_seq, plan.snapshot.last_hash) == (n + 1, link.hash)
    # and the fork, restored, replays the kept call and makes the rest again
    _, step = Runtime.restore(
        AGENTS.spec("steps"),
        plan.snapshot,
        {(e.era, e.call_seq): e for e in plan.results},
        now_ms=10,
    )
    assert step.replayed == 1 and step.end is RunStatus.COMPLETED
    assert verify_chain(
        [*plan.records, *step.records],
        {
            **{(e.era, e.call_seq): e for e in plan.results},
            **{(e.era, e.call_seq): e for e in step.results},
        },
    ).ok


def test_a_fork_point_inside_a_call_or_past_the_end_is_refused() -> None:
    view = Driver(AGENTS, tools={"charge": lambda args, key: {"ok": True}}).run("paid", {})
    [announced] = [r for r in view.journal if r.kind is JournalKind.EFFECT_ANNOUNCED]
    with pytest.raises(core.RepairRefused, match="announced"):
        core.fork(
            view.snapshot,
            view.journal,
            view.results,
            from_seq=announced.seq + 1,
            session_id="r-f",
            order=OPS,
            now_ms=1,
        )
    for bad in (0, len(view.journal)):
        with pytest.raises(core.RepairRefused, match="between 1 and"):
            core.fork(
                view.snapshot,
                view.journal,
                view.results,
                from_seq=bad,
                session_id="r-f",
                order=OPS,
                now_ms=1,
            )


@given(
    kind=st.sampled_from(list(core.RepairKind)),
    by=st.text(min_size=1, max_size=50).filter(str.strip),
    reason=st.text(max_size=core.MAX_REASON),
)
def test_an_order_survives_its_wake(kind: core.RepairKind, by: str, reason: str) -> None:
    order = core.RepairOrder(kind, by, reason)
    assert core.parse_order(order.wake("r-1", 5).reason) == order


def test_other_wakes_are_not_orders_and_a_broken_order_is_refused() -> None:
    assert core.parse_order("quarantine:chain broken") is None
    with pytest.raises(core.RepairRefused):
        core.parse_order("repair:{not json")
    with pytest.raises(core.RepairRefused):
        core.RepairOrder(core.RepairKind.RESUME, " ")


def test_the_journal_services_fold_agrees_a_resume_reopens_only_a_failed_chain() -> None:
    from runplane.core.verify import bodies_of, verify_records

    failed = _run(fail=True)
    record, _, _ = core.resume(failed.snapshot, OPS, now_ms=1)
    chain = [*failed.journal, record]
    report = verify_records(failed.session_id, chain, bodies_of(dict(failed.results)))
    assert report.verified, report.reason
    done = _run()
    reopened = seal(
        replace(record, session_id=done.session_id, seq=len(done.journal)),
        done.journal[-1].hash,
    )
    report = verify_records(
        done.session_id, [*done.journal, reopened], bodies_of(dict(done.results))
    )
    assert not report.verified and report.reason is not None and "after_end" in report.reason


def test_an_erasure_is_journaled_after_any_end_once_and_nothing_follows_it() -> None:
    done = _run()
    order = core.RepairOrder(core.RepairKind.ERASE, "ops", "GDPR request 17")
    record, scrubbed = core.erase(done.snapshot, order, now_ms=5, bodies=2)
    assert (record.kind, record.seq, record.prev_hash) == (
        JournalKind.RUN_ERASED,
        done.snapshot.next_seq,
        done.snapshot.last_hash,
    )
    assert record.attrs == {
        "repair": "erase",
        "by": "ops",
        "reason": "GDPR request 17",
        "bodies": "2",
    }
    assert (scrubbed.next_seq, scrubbed.last_hash) == (record.seq + 1, record.hash)
    # After a COMPLETED end (which no resume may follow) the erasure still verifies...
    assert verify_chain([*done.journal, record], done.results).ok
    # ...once: a second erasure, or any record after it, extends a closed chain.
    again, _ = core.seal_erasure(scrubbed, order, now_ms=6, bodies=0)
    assert verify_chain([*done.journal, record, again], done.results).fault is ChainFault.AFTER_END
    failed = _run(fail=True)
    record, scrubbed = core.erase(failed.snapshot, order, now_ms=5, bodies=0)
    resumed = seal(
        replace(core.resume(failed.snapshot, OPS, now_ms=6)[0], seq=record.seq + 1),
        record.hash,
    )
    verdict = verify_chain([*failed.journal, record, resumed], failed.results)
    assert verdict.fault is ChainFault.AFTER_END and verdict.bad_seq == record.seq + 1


def test_an_erasure_before_the_end_is_the_end() -> None:
    live = _run()
    order = core.RepairOrder(core.RepairKind.ERASE, "ops")
    # Forged on a chain whose end is dropped: nothing may follow it either.
    head = live.journal[:-1]
    record = seal(
        replace(core.erase(live.snapshot, order, now_ms=5, bodies=0)[0], seq=len(head)),
        head[-1].hash,
    )
    after = seal(replace(live.journal[-1], seq=len(head) + 1), record.hash)
    assert verify_chain([*head, record, after], live.results).fault is ChainFault.AFTER_END
