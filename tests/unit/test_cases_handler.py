"""The cases handler's emits: replies to the inbox, and a breach's sealed sweep run."""

from __future__ import annotations

import json

import pytest

from runplane.core.keys import breach_request_id, followup_admission_key, sweep_run_id
from runplane.core.verify import verify_chain
from runplane.errors import WireError
from runplane.kafka.handler import Incoming, State
from runplane.wire import (
    AdmissionRequest,
    BreachDeadline,
    CaseRecord,
    CaseReply,
    JournalKind,
    JournalRecord,
    RegisterDeadline,
    WarnDeadline,
    encode,
)
from services.cases.handler import CasesHandler, emits_for

pytestmark = pytest.mark.unit

CASE = "c-42"
DUE = 5 * 86_400_000


def registered(on_breach: str | None = "escalate") -> CaseRecord:
    cmd = RegisterDeadline(
        case_id=CASE,
        request_id="s-1/0/4",
        reply_to="s-1",
        call_seq=4,
        name="aperak",
        due_ms=DUE,
        warn_ms=DUE - 3_600_000,
        calendar="wall",
        calendar_digest="cd" * 32,
        rule_json='{"days": 1}',
        on_breach=on_breach,
    )
    emits, outcome, transition = emits_for(None, cmd, 1_000)
    assert (outcome, transition) == ("accepted", "registered")
    (case_emit, reply_emit) = emits
    assert (case_emit.topic, case_emit.key) == ("cases", CASE)
    assert (reply_emit.topic, reply_emit.key) == ("runs.inbox", "s-1")
    assert isinstance(reply_emit.value, CaseReply) and reply_emit.value.call_seq == 4
    assert isinstance(case_emit.value, CaseRecord)
    return case_emit.value


def breach(by: str = "sweeper-a") -> BreachDeadline:
    return BreachDeadline(
        case_id=CASE,
        request_id=breach_request_id(CASE, "aperak", DUE),
        name="aperak",
        due_ms=DUE,
        sweep_run_id=sweep_run_id(CASE, "aperak", DUE),
    )


def test_first_breach_writes_a_verifiable_sweep_run_and_one_followup() -> None:
    case = registered()
    emits, outcome, transition = emits_for(case, breach(), DUE + 10)
    assert (outcome, transition) == ("accepted", "breached")
    by_topic: dict[str, list[object]] = {}
    for e in emits:
        by_topic.setdefault(e.topic, []).append(e.value)
    assert set(by_topic) == {"cases", "journal", "admission"}  # no reply_to: no inbox
    chain = [r for r in by_topic["journal"] if isinstance(r, JournalRecord)]
    assert [r.kind for r in chain] == [
        JournalKind.RUN_ADMITTED,
        JournalKind.DEADLINE_BREACHED,
        JournalKind.RUN_COMPLETED,
    ]
    assert {r.session_id for r in chain} == {sweep_run_id(CASE, "aperak", DUE)}
    assert chain[0].attrs["kind"] == "sweep"
    assert chain[1].attrs["case_id"] == CASE and chain[1].attrs["due_ms"] == str(DUE)
    verdict = verify_chain(chain)
    assert verdict.ok, str(verdict)
    (request,) = by_topic["admission"]
    assert isinstance(request, AdmissionRequest)
    assert request.capability == "escalate"
    assert request.admission_key == followup_admission_key(CASE, "aperak", DUE)
    assert json.loads(request.input_json)["sweep_run_id"] == chain[0].session_id
    for e in emits:  # every emit is a valid wire record
        assert e.value is not None and encode(e.value)


def test_second_breach_writes_nothing_but_is_answered() -> None:
    case = registered()
    emits, _, _ = emits_for(case, breach(), DUE + 10)
    breached = next(e.value for e in emits if e.topic == "cases")
    assert isinstance(breached, CaseRecord)
    # Same decision from another sweeper: a duplicate request id.
    again, outcome, transition = emits_for(breached, breach(), DUE + 20)
    assert (outcome, transition, again) == ("duplicate", None, [])
    # A differently-named request for the same breach: accepted, "already breached", no chain.
    other = BreachDeadline(
        case_id=CASE, request_id="x", name="aperak", due_ms=DUE, sweep_run_id="sweep-other"
    )
    emits3, outcome3, transition3 = emits_for(breached, other, DUE + 30)
    assert (outcome3, transition3) == ("accepted", None)
    assert {e.topic for e in emits3} == {"cases"}  # only the remembered answer


def test_no_followup_without_on_breach() -> None:
    emits, _, transition = emits_for(registered(on_breach=None), breach(), DUE + 1)
    assert transition == "breached"
    assert "admission" not in {e.topic for e in emits}
    assert sum(e.topic == "journal" for e in emits) == 3


def test_handler_refuses_a_command_filed_under_another_key() -> None:
    handler = CasesHandler()
    state = State(handler.tables)
    cmd = WarnDeadline(case_id=CASE, request_id="w", name="aperak", due_ms=DUE)
    msg = Incoming("cases.commands", 0, 7, "c-other", cmd, 0)
    with pytest.raises(WireError, match="not its case_id"):
        handler.handle(state, msg, 1)


def test_handler_answers_from_the_table() -> None:
    handler = CasesHandler()
    state = State(handler.tables)
    cmd = WarnDeadline(case_id=CASE, request_id="w", reply_to="s-9", name="aperak", due_ms=DUE)
    emits = handler.handle(state, Incoming("cases.commands", 0, 7, CASE, cmd, 0), 1)
    reply = next(e.value for e in emits if e.topic == "runs.inbox")
    assert isinstance(reply, CaseReply)
    assert not reply.accepted and "no obligation" in (reply.reason or "")
