"""The cases service's pure core: versions, obligations, closing, idempotency."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.wire import (
    BreachDeadline,
    CancelDeadline,
    CaseRecord,
    CloseCase,
    GetCaseState,
    MeetDeadline,
    ObligationStatus,
    PutCaseState,
    RegisterDeadline,
    WarnDeadline,
    decode,
    encode,
)
from services.cases.decide import APPLIED_WINDOW, CaseCommand, decide, evaluate

pytestmark = pytest.mark.unit

CASE = "c-1"
DAY = 86_400_000


def put(
    rid: str, expected: int, state: dict[str, Any], reply_to: str | None = "s-1"
) -> PutCaseState:
    return PutCaseState(
        case_id=CASE,
        request_id=rid,
        reply_to=reply_to,
        expected_version=expected,
        state_json=json.dumps(state),
    )


def register(
    rid: str,
    name: str = "aperak",
    due: int = DAY,
    warn: int | None = DAY - 3_600_000,
    on_breach: str | None = "escalate",
) -> RegisterDeadline:
    return RegisterDeadline(
        case_id=CASE,
        request_id=rid,
        reply_to="s-1",
        call_seq=3,
        name=name,
        due_ms=due,
        warn_ms=warn,
        calendar="wall",
        calendar_digest="ab" * 32,
        rule_json='{"days": 1}',
        on_breach=on_breach,
    )


def run(commands: list[CaseCommand], case: CaseRecord | None = None) -> CaseRecord:
    for i, cmd in enumerate(commands):
        case, _ = decide(case, cmd, 1_000 + i)
    assert case is not None
    return case


def test_first_command_creates_the_case() -> None:
    case, replies = decide(None, GetCaseState(case_id=CASE, request_id="r1", reply_to="s-1"), 5)
    assert case is not None
    assert (case.version, json.loads(case.state_json), case.obligations) == (0, {}, ())
    (reply,) = replies
    assert (reply.accepted, reply.version, reply.state_json, reply.session_id) == (
        True,
        0,
        "{}",
        "s-1",
    )


def test_put_from_the_read_version_is_accepted_and_moves_the_version() -> None:
    case, (reply,) = decide(None, put("r1", 0, {"step": 1}), 5)
    assert case is not None
    assert reply.accepted and reply.version == 1 and case.version == 1
    assert json.loads(case.state_json) == {"step": 1}


def test_two_puts_from_the_same_version_one_wins_the_other_retries() -> None:
    case = run([put("a", 0, {"by": "a"})])
    case2, (refused,) = decide(case, put("b", 0, {"by": "b"}), 9)
    assert not refused.accepted
    assert refused.version == 1
    assert json.loads(refused.state_json or "") == {"by": "a"}
    assert case2 is not None and json.loads(case2.state_json) == {"by": "a"}
    # Retry from the version the refusal carried.
    case3, (ok,) = decide(case2, put("b2", refused.version, {"by": "b"}), 10)
    assert ok.accepted and ok.version == 2
    assert case3 is not None and json.loads(case3.state_json) == {"by": "b"}


def test_redelivered_put_gets_the_same_answer_and_changes_nothing() -> None:
    first = put("r1", 0, {"x": 1})
    case, (reply1,) = decide(None, first, 1)
    again, (reply2,) = decide(case, first, 2)
    assert again is case
    assert reply2.accepted == reply1.accepted and reply2.version == reply1.version == 1
    d = evaluate(case, first, 3)
    assert d.outcome == "duplicate" and d.case is None


def test_redelivered_refusal_stays_refused_even_when_the_version_catches_up() -> None:
    ahead = put("r-ahead", 1, {"x": 1})
    case, (refused,) = decide(None, ahead, 1)
    assert not refused.accepted
    case = run([put("r-other", 0, {"y": 1})], case)  # now at version 1
    _, (again,) = decide(case, ahead, 5)
    assert not again.accepted and again.version == 1


def test_request_id_reused_for_another_op_is_refused() -> None:
    case = run([put("r1", 0, {})])
    d = evaluate(case, MeetDeadline(case_id=CASE, request_id="r1", reply_to="s", name="x"), 5)
    assert not d.reply.accepted and "already used" in (d.reply.reason or "")


@pytest.mark.parametrize("state", ["not json", "[1, 2]", "3"])
def test_put_of_non_object_state_is_refused(state: str) -> None:
    cmd = PutCaseState(
        case_id=CASE, request_id="r", reply_to="s", expected_version=0, state_json=state
    )
    d = evaluate(None, cmd, 1)
    assert not d.reply.accepted and d.outcome == "refused"
    assert d.case is not None and d.case.version == 0  # created, remembered, not written to


def test_register_then_close_refused_then_meet_then_close_accepted() -> None:
    case = run([register("r1")])
    (ob,) = case.obligations
    assert (ob.status, ob.due_ms, ob.on_breach, ob.registered_by) == (
        ObligationStatus.OPEN,
        DAY,
        "escalate",
        "s-1",
    )
    assert case.version == 0  # obligations do not move the state version
    d = evaluate(case, CloseCase(case_id=CASE, request_id="c1", reply_to="s-1"), 10)
    assert not d.reply.accepted and "aperak" in (d.reply.reason or "")
    case = run([MeetDeadline(case_id=CASE, request_id="m1", reply_to="s-1", name="aperak")], case)
    assert case.obligations[0].status == ObligationStatus.MET
    closed = run([CloseCase(case_id=CASE, request_id="c2", reply_to="s-1")], case)
    assert closed.closed
    d = evaluate(closed, put("p", 0, {}), 20)
    assert not d.reply.accepted and d.reply.reason == "case is closed"


def test_meet_and_cancel_are_idempotent_with_clear_answers() -> None:
    case = run([register("r1"), MeetDeadline(case_id=CASE, request_id="m1", name="aperak")])
    d = evaluate(case, MeetDeadline(case_id=CASE, request_id="m2", reply_to="s", name="aperak"), 9)
    assert d.reply.accepted and d.reply.reason == "already met"
    assert d.case is not None and d.case.obligations == case.obligations
    d = evaluate(case, CancelDeadline(case_id=CASE, request_id="x", reply_to="s", name="aperak"), 9)
    assert not d.reply.accepted and d.reply.reason == "obligation 'aperak' is already met"
    d = evaluate(case, MeetDeadline(case_id=CASE, request_id="y", reply_to="s", name="nope"), 9)
    assert not d.reply.accepted and "no obligation" in (d.reply.reason or "")


def test_warn_once_then_breach_once() -> None:
    case = run([register("r1")])
    warn = WarnDeadline(case_id=CASE, request_id="w:c-1:aperak", name="aperak", due_ms=DAY)
    d1 = evaluate(case, warn, 10)
    assert d1.transition == "warned" and d1.case is not None
    d2 = evaluate(
        d1.case, WarnDeadline(case_id=CASE, request_id="w2", name="aperak", due_ms=DAY), 11
    )
    assert d2.transition is None and d2.reply.reason == "already warned"
    breach = BreachDeadline(
        case_id=CASE, request_id="b:1", name="aperak", due_ms=DAY, sweep_run_id="sweep-1"
    )
    d3 = evaluate(d1.case, breach, 12)
    assert d3.transition == "breached" and d3.case is not None
    assert d3.obligation is not None and d3.obligation.sweep_run_id == "sweep-1"
    assert d3.case.obligations[0].status == ObligationStatus.BREACHED
    other = BreachDeadline(
        case_id=CASE, request_id="b:2", name="aperak", due_ms=DAY, sweep_run_id="sweep-1"
    )
    d4 = evaluate(d3.case, other, 13)
    assert d4.transition is None and d4.reply.accepted and d4.reply.reason == "already breached"
    d5 = evaluate(d3.case, breach, 14)
    assert d5.outcome == "duplicate" and d5.case is None


def test_breach_for_a_stale_due_or_a_met_obligation_is_refused() -> None:
    case = run([register("r1")])
    stale = BreachDeadline(case_id=CASE, request_id="b", name="aperak", due_ms=5, sweep_run_id="s")
    assert not evaluate(case, stale, 9).reply.accepted
    met = run([MeetDeadline(case_id=CASE, request_id="m", name="aperak")], case)
    late = BreachDeadline(
        case_id=CASE, request_id="b2", name="aperak", due_ms=DAY, sweep_run_id="s"
    )
    d = evaluate(met, late, 9)
    assert not d.reply.accepted and d.transition is None


def test_register_rules() -> None:
    case = run([register("r1")])
    same = evaluate(case, register("r2"), 5)
    assert same.reply.accepted and same.reply.reason == "already registered"
    other = evaluate(case, register("r3", due=2 * DAY), 5)
    assert not other.reply.accepted
    bad = evaluate(case, register("r4", name="b", due=10, warn=20), 5)
    assert not bad.reply.accepted and bad.reply.reason == "warn_ms is after due_ms"
    # A discharged obligation's name can be registered again, for a new cycle.
    met = run([MeetDeadline(case_id=CASE, request_id="m", name="aperak")], case)
    again = evaluate(met, register("r5", due=3 * DAY), 5)
    assert again.transition == "registered"
    assert again.case is not None and again.case.obligations[0].due_ms == 3 * DAY


def test_no_reply_without_reply_to() -> None:
    _, replies = decide(None, put("r1", 0, {}, reply_to=None), 1)
    assert replies == []


def test_applied_window_is_bounded() -> None:
    case = run([put(f"r{i}", i, {"i": i}) for i in range(APPLIED_WINDOW + 10)])
    assert len(case.applied) == APPLIED_WINDOW
    assert case.version == APPLIED_WINDOW + 10


def test_case_record_round_trips_on_the_wire() -> None:
    case = run([register("r1"), put("p", 0, {"k": "v"})])
    assert decode(encode(case)) == case


# --- property: re-delivering any command never changes the case nor the answer -------------

_names = st.sampled_from(["a", "b"])
_commands = st.one_of(
    st.builds(lambda v: put("", v, {"v": v}), st.integers(0, 3)),
    st.builds(lambda n: register("", name=n, due=DAY), _names),
    st.builds(lambda n: MeetDeadline(case_id=CASE, request_id="", reply_to="s", name=n), _names),
    st.builds(lambda n: CancelDeadline(case_id=CASE, request_id="", reply_to="s", name=n), _names),
    st.builds(lambda n: WarnDeadline(case_id=CASE, request_id="", name=n, due_ms=DAY), _names),
    st.builds(
        lambda n: BreachDeadline(case_id=CASE, request_id="", name=n, due_ms=DAY, sweep_run_id="x"),
        _names,
    ),
    st.just(CloseCase(case_id=CASE, request_id="", reply_to="s")),
)


@settings(max_examples=200)
@given(st.lists(st.tuples(_commands, st.booleans()), min_size=1, max_size=25))
def test_redelivery_is_a_no_op(steps: list[tuple[CaseCommand, bool]]) -> None:
    from dataclasses import replace

    case: CaseRecord | None = None
    sent: list[tuple[CaseCommand, bool]] = []
    for i, (template, redeliver) in enumerate(steps):
        if redeliver and sent:
            cmd, accepted = sent[i % len(sent)]
            d = evaluate(case, cmd, 10_000 + i)
            assert d.case is None and d.outcome == "duplicate"
            assert d.reply.accepted == accepted
            continue
        cmd = replace(template, request_id=f"r{i}")
        d = evaluate(case, cmd, 10_000 + i)
        if d.case is not None:
            case = d.case
        sent.append((cmd, d.reply.accepted))
        assert case is not None
        # Invariants: a closed case has no open obligation; versions never go back.
        if case.closed:
            assert all(
                o.status not in (ObligationStatus.OPEN, ObligationStatus.WARNED)
                for o in case.obligations
            )
