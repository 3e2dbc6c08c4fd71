"""The run summary fold: status per record kind, parked-on, cost, verdict stickiness."""

from __future__ import annotations

import dataclasses

from runplane.core.chain import default_label
from runplane.journal.summary import RunSummary, apply, summarize
from runplane.wire import AuditRecord, Cost, JournalKind, RunStatus, Verdict

K = JournalKind


def rec(seq: int, kind: JournalKind, **kw: object) -> AuditRecord:
    base: dict[str, object] = dict(
        session_id="r-s",
        seq=seq,
        era=0,
        kind=kind,
        stamp_ms=100 + seq,
        label=default_label(),
        hash="0" * 64,
        verdict=Verdict.VERIFIED,
        capability="refund",
        case_id="c-1",
        verified_ms=1,
    )
    base.update(kw)
    return AuditRecord(**base)  # type: ignore[arg-type]


def test_approval_wait_then_decision_then_completion() -> None:
    steps = [
        rec(0, K.RUN_ADMITTED),
        rec(1, K.EFFECT_ANNOUNCED, call_seq=0),
        rec(2, K.EFFECT_RECORDED, call_seq=0, cost=Cost(tokens_in=3, tokens_out=4, units=0.1)),
        rec(3, K.TASK_OPENED, call_seq=1, attrs={"task_id": "t-9", "kind": "APPROVAL"}),
    ]
    s = summarize("r-s", steps)
    assert (s.status, s.parked_on) == (RunStatus.AWAITING_HUMAN, "task:t-9")
    s = apply(s, rec(4, K.TASK_DECIDED, call_seq=1))
    assert (s.status, s.parked_on) == (RunStatus.RUNNING, None)
    s = apply(s, rec(5, K.RUN_PARKED, call_seq=2, attrs={"parked_on": "signal:paid"}))
    assert (s.status, s.parked_on) == (RunStatus.PARKED, "signal:paid")
    s = apply(s, rec(6, K.RUN_COMPLETED))
    assert s.status is RunStatus.COMPLETED and s.ended_ms == 106 and s.started_ms == 100
    assert (s.cost.tokens_in, s.cost.tokens_out, s.cost.units) == (3, 4, 0.1)


def test_replayed_or_older_records_change_nothing() -> None:
    s = summarize(
        "r-s", [rec(0, K.RUN_ADMITTED), rec(1, K.EFFECT_RECORDED, cost=Cost(tokens_in=5))]
    )
    again = apply(s, rec(1, K.EFFECT_RECORDED, cost=Cost(tokens_in=5)))
    assert again is s and again.cost.tokens_in == 5


def test_break_is_sticky_and_body_missing_counted() -> None:
    s = summarize(
        "r-s",
        [
            rec(0, K.RUN_ADMITTED),
            rec(1, K.EFFECT_RECORDED, verdict=Verdict.BODY_MISSING, reason="body_missing: erased"),
            rec(
                2, K.EFFECT_RECORDED, verdict=Verdict.BROKEN, broken_at_seq=2, reason="bad_hash: x"
            ),
            rec(
                3,
                K.RUN_COMPLETED,
                verdict=Verdict.BROKEN,
                broken_at_seq=2,
                reason="earlier_break: y",
            ),
        ],
    )
    assert s.verdict is Verdict.BROKEN and s.broken_at_seq == 2 and s.reason == "bad_hash: x"
    assert s.body_missing == 1


def test_terminal_status_is_not_undone_by_a_late_record() -> None:
    s = summarize("r-s", [rec(0, K.RUN_ADMITTED), rec(1, K.RUN_FAILED)])
    s = apply(s, rec(2, K.SIGNAL_RECEIVED))
    assert s.status is RunStatus.FAILED
    assert dataclasses.replace(s, status=None).to_json()["status"] is None
    assert RunSummary("x").to_json()["cost"]["tokens"] == 0


def test_a_cancelled_run_is_cancelled_with_who_and_why_not_failed() -> None:
    s = summarize(
        "r-s",
        [
            rec(0, K.RUN_ADMITTED),
            rec(1, K.CANCEL_REQUESTED, attrs={"reason": "wrong customer", "requested_by": "ops"}),
            rec(2, K.RUN_CANCELLED, attrs={"reason": "wrong customer", "cancelled_by": "ops"}),
        ],
    )
    assert s.status is RunStatus.CANCELLED and s.ended_ms == 102
    assert (s.ended_reason, s.cancelled_by) == ("wrong customer", "ops")
    # an ended run stays ended, whatever arrives after
    assert apply(s, rec(3, K.SIGNAL_RECEIVED)).status is RunStatus.CANCELLED


def test_a_failure_keeps_its_reason_and_error_type_through_the_index() -> None:
    from runplane.journal.index import summary_from_json

    s = summarize(
        "r-s",
        [
            rec(0, K.RUN_ADMITTED),
            rec(1, K.RUN_FAILED, attrs={"error_type": "ToolError", "reason": "card declined"}),
        ],
    )
    assert (s.status, s.ended_reason, s.error_type) == (
        RunStatus.FAILED,
        "card declined",
        "ToolError",
    )
    import json

    assert summary_from_json("r-s", json.dumps(s.to_json())) == s
    # an index entry written before these fields reads with none
    old = {k: v for k, v in s.to_json().items() if k not in ("ended_reason", "error_type")}
    assert summary_from_json("r-s", json.dumps(old)).ended_reason is None


def test_an_erasure_after_the_end_is_shown_by_every_reader_and_keeps_the_status() -> None:
    ended = summarize("r-s", [rec(0, K.RUN_ADMITTED), rec(1, K.RUN_COMPLETED)])
    assert ended.shown_verdict == "VERIFIED" and ended.erased_bodies is None
    erased = apply(
        ended, rec(2, K.RUN_ERASED, attrs={"repair": "erase", "by": "ops", "bodies": "3"})
    )
    assert (erased.status, erased.ended_ms) == (RunStatus.COMPLETED, ended.ended_ms)
    assert (erased.erased_bodies, erased.erased_by) == (3, "ops")
    assert erased.shown_verdict == "VERIFIED, 3 bodies erased"
    assert erased.to_json()["erased_bodies"] == 3 and erased.to_json()["verdict"] == "VERIFIED"
    # A broken chain says so, erased or not.
    broken = apply(
        ended,
        rec(2, K.RUN_ERASED, verdict=Verdict.BROKEN, broken_at_seq=2, reason="after_end: x"),
    )
    assert broken.shown_verdict == "BROKEN" and broken.erased_bodies is None
