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
