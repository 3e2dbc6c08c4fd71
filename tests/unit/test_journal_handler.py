"""The audit handler: order kept, bodies awaited, missing bodies declared, breaks quarantined."""

from __future__ import annotations

import dataclasses
import json

from runplane.core.chain import SlotStates, seal
from runplane.journal.summary import summarize
from runplane.wire import Verdict
from services.journal.decide import (
    AuditOut,
    JournalIn,
    PartitionState,
    QuarantineOut,
    ResultIn,
    fold_slots,
    on_end,
    on_journal,
    on_result,
    quarantine_reason,
    restore,
    restore_tip,
    takes_records,
    tick,
)
from tests.helpers.sample import sample_run

SID = "r-handler-1"


def build(n: int = 3):
    return sample_run(SID, n)


GRACE = 1000


def feed_journal(state: PartitionState, records, now: int = 0, start_offset: int = 0) -> list:
    out = []
    for i, r in enumerate(records):
        out += on_journal(state, JournalIn(r, 0, start_offset + i), now)
    return out


def result_msg(key, entry, offset=0) -> ResultIn:
    return ResultIn((SID, key[0], key[1]), entry, 0, offset)


def audits(out) -> list:
    return [o.record for o in out if isinstance(o, AuditOut)]


def test_results_first_then_journal_all_verified_in_order() -> None:
    records, results = build(3)
    state = PartitionState(0, body_grace_ms=GRACE)
    for i, (k, e) in enumerate(results.items()):
        assert on_result(state, result_msg(k, e, i), 0) == []
    out = feed_journal(state, records)
    recs = audits(out)
    assert [a.seq for a in recs] == list(range(len(records)))
    assert {a.verdict for a in recs} == {Verdict.VERIFIED}
    assert recs[0].capability == "refund" and recs[-1].capability == "refund"
    assert state.held_count() == 0 and not state.bodies


def test_journal_first_holds_the_session_until_the_body_arrives() -> None:
    records, results = build(2)
    state = PartitionState(0, body_grace_ms=GRACE)
    out = feed_journal(state, records)
    # seq 0 and 1 (announce) pass; seq 2 waits for its body; everything after waits too
    assert [a.seq for a in audits(out)] == [0, 1]
    assert state.held_count() == len(records) - 2
    out = on_result(state, result_msg((0, 0), results[(0, 0)]), 10)
    assert [a.seq for a in audits(out)] == [2, 3]
    out = on_result(state, result_msg((0, 1), results[(0, 1)]), 20)
    assert [a.seq for a in audits(out)] == [4, 5]
    assert state.held_count() == 0


def test_missing_body_declared_only_after_grace_and_results_at_end() -> None:
    records, _ = build(1)
    state = PartitionState(0, body_grace_ms=GRACE)
    feed_journal(state, records, now=0)
    assert tick(state, GRACE + 1) == []  # results not known to be at its end yet
    on_end(state, "results", 5)
    assert tick(state, GRACE - 1) == []  # at its end, but the grace has not passed
    out = audits(tick(state, GRACE))
    assert [(a.seq, a.verdict) for a in out] == [(2, Verdict.BODY_MISSING), (3, Verdict.VERIFIED)]


def test_tombstone_is_body_missing_at_once() -> None:
    records, _ = build(1)
    state = PartitionState(0, body_grace_ms=GRACE)
    on_result(state, result_msg((0, 0), None), 0)
    out = audits(feed_journal(state, records))
    assert out[2].verdict is Verdict.BODY_MISSING and "erased" in (out[2].reason or "")


def test_break_reports_the_seq_quarantines_once_and_stays_broken() -> None:
    records, results = build(3)
    tampered = list(records)
    tampered[3] = dataclasses.replace(tampered[3], stamp_ms=9)  # content changed, hash not
    state = PartitionState(0, body_grace_ms=GRACE)
    for k, e in results.items():
        on_result(state, result_msg(k, e), 0)
    out = feed_journal(state, tampered)
    recs = audits(out)
    assert [a.verdict for a in recs[:3]] == [Verdict.VERIFIED] * 3
    assert all(a.verdict is Verdict.BROKEN and a.broken_at_seq == 3 for a in recs[3:])
    qs = [o for o in out if isinstance(o, QuarantineOut)]
    assert len(qs) == 1 and qs[0].broken_at_seq == 3
    assert quarantine_reason(qs[0]).startswith("quarantine:bad_hash at seq 3")


def test_skipped_seq_is_a_gap_at_the_missing_seq() -> None:
    records, results = build(2)
    state = PartitionState(0, body_grace_ms=GRACE)
    for k, e in results.items():
        on_result(state, result_msg(k, e), 0)
    recs = audits(feed_journal(state, records[:2] + records[3:]))
    assert recs[2].verdict is Verdict.BROKEN and recs[2].broken_at_seq == 2
    assert (recs[2].reason or "").startswith("gap")


def test_tampered_body_is_broken_at_its_record() -> None:
    records, results = build(2)
    state = PartitionState(0, body_grace_ms=GRACE)
    bad = dataclasses.replace(results[(0, 1)], value_json=json.dumps({"n": -1}))
    on_result(state, result_msg((0, 0), results[(0, 0)]), 0)
    on_result(state, result_msg((0, 1), bad), 0)
    out = feed_journal(state, records)
    recs = audits(out)
    assert recs[4].verdict is Verdict.BROKEN and recs[4].broken_at_seq == 4
    assert sum(isinstance(o, QuarantineOut) for o in out) == 1


def test_restore_from_audit_continues_the_chain() -> None:
    records, results = build(2)
    first = PartitionState(0, body_grace_ms=GRACE)
    for k, e in results.items():
        on_result(first, result_msg(k, e), 0)
    published = audits(feed_journal(first, records[:4]))
    second = PartitionState(0, body_grace_ms=GRACE)
    restore(second, {SID: published[-1]})
    on_result(second, result_msg((0, 1), results[(0, 1)]), 0)
    rest = audits(feed_journal(second, records[4:]))
    assert [a.verdict for a in rest] == [Verdict.VERIFIED] * len(records[4:])
    assert rest[0].capability == "refund"


def test_a_duplicate_slot_across_a_restart_is_broken_as_without_one() -> None:
    # Call 1 announced (seq 3), the service restarts, then a well-chained second announce of
    # call 1 arrives: the restored tip must know the slot, or the restart hides the forgery.
    records, results = build(2)
    forged = seal(dataclasses.replace(records[3], seq=4), records[3].hash)
    first = PartitionState(0, body_grace_ms=GRACE)
    for k, e in results.items():
        on_result(first, result_msg(k, e), 0)
    published = audits(feed_journal(first, records[:4]))
    slots: dict[str, SlotStates] = {}
    for r in records[:4]:  # what the loop folds from journal up to its committed offsets
        fold_slots(slots, r)
    assert takes_records(restore_tip(published[-1]))
    second = PartitionState(0, body_grace_ms=GRACE)
    restore(second, {SID: published[-1]}, slots)
    out = feed_journal(second, [forged], start_offset=4)
    (verdict,) = audits(out)
    assert verdict.verdict is Verdict.BROKEN and verdict.broken_at_seq == 4
    assert verdict.reason is not None and verdict.reason.startswith("duplicate_slot: ")
    assert [q.broken_at_seq for q in out if isinstance(q, QuarantineOut)] == [4]
    # The same as the service that never restarted says.
    (unbroken,) = audits(feed_journal(first, [forged], start_offset=4))
    assert (unbroken.verdict, unbroken.reason) == (verdict.verdict, verdict.reason)
    # Without the folded slots the restart would have hidden it: the test can fail.
    blind = PartitionState(0, body_grace_ms=GRACE)
    restore(blind, {SID: published[-1]})
    assert audits(feed_journal(blind, [forged], start_offset=4))[0].verdict is Verdict.VERIFIED


def test_an_ended_chain_needs_no_slot_states_restored() -> None:
    records, results = build(1)
    state = PartitionState(0, body_grace_ms=GRACE)
    for k, e in results.items():
        on_result(state, result_msg(k, e), 0)
    published = audits(feed_journal(state, records))
    assert published[-1].kind.value == "RUN_COMPLETED"
    assert not takes_records(restore_tip(published[-1]))
    assert takes_records(restore_tip(published[-2]))


def test_stale_cached_bodies_expire_only_when_journal_sits_at_its_end() -> None:
    _, results = build(1)
    state = PartitionState(0, body_grace_ms=GRACE)
    on_result(state, result_msg((0, 0), results[(0, 0)], offset=7), 0)
    assert state.results_floor() == 7
    tick(state, GRACE * 5)
    assert state.bodies  # journal not known to be at its end: keep it
    on_end(state, "journal", GRACE * 5)
    tick(state, GRACE * 6)
    assert not state.bodies and state.results_floor() is None


def test_summary_sums_cost_and_follows_status() -> None:
    records, results = build(3)
    state = PartitionState(0, body_grace_ms=GRACE)
    for k, e in results.items():
        on_result(state, result_msg(k, e), 0)
    s = summarize(SID, audits(feed_journal(state, records)))
    assert s.status is not None and s.status.value == "COMPLETED"
    assert (s.cost.tokens_in, s.cost.tokens_out, s.cost.units) == (30, 15, 1.5)
    assert s.capability == "refund" and s.records == len(records) and s.ended_ms == 2000
