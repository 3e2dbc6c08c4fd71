"""A run's waterfall (``runplane.journal.waterfall``): calls from announce to result, waits for
a person from the task opened to the decision that settles it, parks, failures and what a run
left open — folded from journal records, the golden journals' among them."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from runplane.journal.waterfall import (
    Bar,
    BarKind,
    BarState,
    failed_slots,
    record_failed,
    waterfall,
)
from runplane.wire import (
    ErrorInfo,
    JournalKind,
    JournalRecord,
    Label,
    ResultEntry,
    Sensitivity,
    Trust,
    from_dict,
)

K = JournalKind
GOLDEN = Path(__file__).parent.parent / "replay"
T0 = 1_700_000_000_000
_LABEL = Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=())


def rec(
    seq: int,
    kind_: JournalKind,
    at: int,
    call: int | None = None,
    name: str | None = None,
    *,
    body: bool = False,
    era: int = 0,
    **attrs: str,
) -> JournalRecord:
    family = None if name is None else name.split(":", 1)[0]
    return JournalRecord(
        session_id="r-1",
        seq=seq,
        era=era,
        kind=kind_,
        call_seq=call,
        family=family,
        name=name,
        body_digest="d" * 64 if body else None,
        stamp_ms=T0 + at,
        prev_hash="0" * 64,
        hash="1" * 64,
        label=_LABEL,
        attrs=attrs,
    )


def golden(name: str) -> tuple[list[JournalRecord], dict[tuple[int, int], ResultEntry | None]]:
    data = json.loads((GOLDEN / name).read_text())
    entries = [from_dict(ResultEntry, r) for r in data["results"]]
    return [from_dict(JournalRecord, r) for r in data["journal"]], {
        (e.era, e.call_seq): e for e in entries
    }


def entry(era: int, call: int, ok: bool) -> ResultEntry:
    return ResultEntry(
        session_id="r-1",
        era=era,
        call_seq=call,
        family="tool",
        name="tool://x",
        request_witness="a" * 64,
        ok=ok,
        value_json="1" if ok else None,
        error=None if ok else ErrorInfo(type="ToolError", message="no", retryable=False),
        stamp_ms=T0,
        attempts=1,
        body_digest="d" * 64,
        label=_LABEL,
    )


def by_call(bars: tuple[Bar, ...]) -> dict[int | None, Bar]:
    return {b.call_seq: b for b in bars}


def test_the_refund_golden_is_a_call_a_wait_for_finance_and_the_charge_on_the_run_axis() -> None:
    records, bodies = golden("golden/refund_approved.json")
    wf = waterfall(records, failed_slots(bodies))
    assert wf.ended and wf.start_stamp == records[0].stamp_ms and wf.span_ms == 35
    fetch, approval, charge = wf.bars
    assert (fetch.kind, fetch.name, fetch.start_ms, fetch.duration_ms) == (
        BarKind.CALL,
        "tool://fetch_invoice",
        7,
        7,
    )
    assert approval.kind is BarKind.PERSON and approval.roles == ("finance",)
    assert (approval.start_ms, approval.duration_ms, approval.outcome) == (14, 14, "APPROVED")
    assert (charge.start_ms, charge.duration_ms, charge.state) == (28, 7, BarState.OK)
    assert all(b.state is BarState.OK for b in wf.bars)


def test_a_call_the_sink_gate_refused_is_a_failed_instant_and_parallel_calls_overlap() -> None:
    records, bodies = golden("golden_loop/support_loop_injection.json")
    bars = by_call(waterfall(records, failed_slots(bodies)).bars)
    refused = bars[11]
    assert refused.state is BarState.FAILED and refused.instant and refused.name == "tool://refund"
    assert [c for c, b in bars.items() if b.state is BarState.FAILED] == [11]
    # Two tools of one turn run side by side: both start at 14, the second ends later.
    assert (bars[2].start_ms, bars[3].start_ms) == (14, 14)
    assert bars[3].duration_ms > bars[2].duration_ms


def test_a_failed_result_is_red_from_its_body_and_only_the_record_carrying_it() -> None:
    records = [
        rec(0, K.RUN_ADMITTED, 0),
        rec(1, K.EFFECT_ANNOUNCED, 10, 0, "tool://charge"),
        rec(2, K.EFFECT_RECORDED, 250, 0, "tool://charge", body=True),
        rec(3, K.RUN_FAILED, 260, error_type="ToolError", reason="no"),
    ]
    failed = failed_slots({(0, 0): entry(0, 0, ok=False), (0, 1): entry(0, 1, ok=True)})
    assert failed == {(0, 0)}
    (bar,) = waterfall(records, failed).bars
    assert (bar.state, bar.start_ms, bar.duration_ms) == (BarState.FAILED, 10, 240)
    assert [r.seq for r in records if record_failed(r, failed)] == [2]
    assert waterfall(records).bars[0].state is BarState.OK  # bodies not read: not known failed
    assert failed_slots({(0, 0): None}) == frozenset()  # an erased body says nothing


def test_an_abandoned_call_is_failed_without_its_body() -> None:
    r = rec(4, K.EFFECT_RECORDED, 5, 0, "tool://charge", body=True, verdict="abandoned")
    assert record_failed(r, ())
    assert not record_failed(rec(4, K.EFFECT_RECORDED, 5, 0, "tool://x", body=True), ())


def test_a_panel_waits_for_every_seat_until_its_result_and_an_escalation_keeps_waiting() -> None:
    records = [
        rec(0, K.RUN_ADMITTED, 0),
        rec(1, K.TASK_OPENED, 5, 0, "approval:panel", task_id="r/0/0/panel/a", role="finance"),
        rec(2, K.TASK_OPENED, 5, 0, "approval:panel", task_id="r/0/0/panel/b", role="audit"),
        rec(3, K.RUN_PARKED, 6, 0, parked_on="task:r/0/0"),
        rec(4, K.TASK_DECIDED, 100, 0, "approval:panel", seat="a", outcome="APPROVED"),
        rec(5, K.TASK_DECIDED, 150, 0, "approval:panel", outcome="ESCALATED"),
        rec(6, K.TASK_DECIDED, 400, 0, "approval:panel", body=True, outcome="APPROVED"),
        rec(7, K.RUN_COMPLETED, 410),
    ]
    (wait,) = waterfall(records).bars
    assert wait.kind is BarKind.PERSON and wait.roles == ("finance", "audit")
    assert (wait.start_ms, wait.duration_ms, wait.state) == (5, 395, BarState.OK)


def test_a_call_in_doubt_then_an_operator_then_the_verdict() -> None:
    records = [
        rec(0, K.RUN_ADMITTED, 0),
        rec(1, K.EFFECT_ANNOUNCED, 10, 0, "tool://charge"),
        rec(2, K.EFFECT_IN_DOUBT, 30, 0, "tool://charge"),
        rec(3, K.TASK_OPENED, 30, 0, "tool://charge", task_id="t-op", kind="OPERATOR"),
        rec(4, K.TASK_DECIDED, 90, 0, "tool://charge", outcome="APPROVED"),
        rec(5, K.EFFECT_RECORDED, 90, 0, "tool://charge", body=True, verdict="applied"),
        rec(6, K.RUN_COMPLETED, 95),
    ]
    doubt, operator, verdict = waterfall(records).bars
    assert (doubt.kind, doubt.state, doubt.duration_ms) == (BarKind.CALL, BarState.IN_DOUBT, 20)
    assert operator.kind is BarKind.PERSON and operator.roles == ("operator",)
    assert (operator.start_ms, operator.duration_ms) == (30, 60)
    assert verdict.instant and verdict.was_in_doubt and verdict.state is BarState.OK


def test_a_run_waiting_for_a_signal_or_a_person_is_open_until_now() -> None:
    records = [
        rec(0, K.RUN_ADMITTED, 0),
        rec(1, K.RUN_PARKED, 20, 0, parked_on="signal:go"),
    ]
    wf = waterfall(records, now_ms=T0 + 1_000)
    (parked,) = wf.bars
    assert not wf.ended and wf.span_ms == 1_000
    assert (parked.kind, parked.waits_for, parked.state) == (
        BarKind.PARKED,
        "signal:go",
        BarState.OPEN,
    )
    assert parked.duration_ms == 980
    received = [*records, rec(2, K.SIGNAL_RECEIVED, 500, 0, "signal:go", body=True)]
    assert waterfall(received).bars[0].duration_ms == 480
    person = [rec(0, K.RUN_ADMITTED, 0), rec(1, K.TASK_OPENED, 5, 1, "approval:x", role="x")]
    assert waterfall(person, now_ms=T0 + 50).bars[0].state is BarState.OPEN


def test_what_a_run_left_open_when_it_ended_is_unfinished_and_an_erasure_is_no_step() -> None:
    records = [
        rec(0, K.RUN_ADMITTED, 0),
        rec(1, K.EFFECT_ANNOUNCED, 10, 0, "tool://charge"),
        rec(2, K.RUN_CANCELLED, 70, reason="stop", cancelled_by="op"),
        rec(3, K.RUN_ERASED, 9_000_000, by="retention"),
    ]
    wf = waterfall(records, now_ms=T0 + 10**9)
    assert wf.ended and wf.span_ms == 70
    assert [(b.state, b.duration_ms) for b in wf.bars] == [(BarState.UNFINISHED, 60)]


def test_a_run_parked_on_a_version_is_parked_until_it_moves_on() -> None:
    records = [
        rec(0, K.RUN_ADMITTED, 0),
        rec(1, K.RUN_PARKED, 10, parked_on="version:v2", reason="no executor"),
        rec(2, K.DEADLINE_WARNED, 50),
        rec(3, K.RUN_RESUMED, 300),
        rec(4, K.RUN_COMPLETED, 320),
    ]
    (parked,) = waterfall(records).bars
    assert (parked.waits_for, parked.start_ms, parked.duration_ms) == ("version:v2", 10, 290)


def test_no_records_no_bars() -> None:
    assert waterfall([]).bars == () and waterfall([]).span_ms == 0


_KINDS = [
    K.EFFECT_ANNOUNCED,
    K.EFFECT_RECORDED,
    K.EFFECT_IN_DOUBT,
    K.TASK_OPENED,
    K.TASK_DECIDED,
    K.RUN_PARKED,
    K.RUN_RESUMED,
    K.SIGNAL_RECEIVED,
    K.DEADLINE_WARNED,
    K.RUN_COMPLETED,
]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(_KINDS),
            st.integers(min_value=-50, max_value=5_000),  # stamps out of order: clock skew
            st.one_of(st.none(), st.integers(min_value=0, max_value=4)),
            st.booleans(),
            st.sampled_from(["", "task:t", "signal:s", "version:v"]),
        ),
        max_size=30,
    ),
    st.integers(min_value=0, max_value=10_000),
)
def test_every_bar_lies_on_the_axis_whatever_the_records(steps, now) -> None:  # type: ignore[no-untyped-def]
    records = [rec(0, K.RUN_ADMITTED, 0)] + [
        rec(i + 1, kind, at, call, None if call is None else "tool://x", body=body, parked_on=on)
        for i, (kind, at, call, body, on) in enumerate(steps)
    ]
    wf = waterfall(records, now_ms=T0 + now)
    assert wf.span_ms >= 0
    for bar in wf.bars:
        assert bar.duration_ms >= 0 and bar.start_ms >= 0
        assert bar.start_ms + bar.duration_ms <= wf.span_ms
    # Only a run not yet ended has open bars; an ended one has none.
    assert not (wf.ended and any(b.state is BarState.OPEN for b in wf.bars))
    starts = [(b.start_ms, b.seq) for b in wf.bars]
    assert starts == sorted(starts)
