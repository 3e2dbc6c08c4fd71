"""The cases service on the real broker: optimistic versions, the close guard, idempotency."""

from __future__ import annotations

import json
import threading

import pytest
from test_cases_support import cases_service, latest_case, read_all, reply_to, send
from typer.testing import CliRunner

from runplane.cli import app
from runplane.config import Settings
from runplane.wire import (
    CaseRecord,
    CaseReply,
    CloseCase,
    GetCaseState,
    MeetDeadline,
    ObligationStatus,
    PutCaseState,
    RegisterDeadline,
)
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration


def put(case: str, session: str, rid: str, expected: int, state: dict[str, str]) -> PutCaseState:
    return PutCaseState(
        case_id=case,
        request_id=rid,
        reply_to=session,
        call_seq=1,
        expected_version=expected,
        state_json=json.dumps(state),
    )


def test_two_runs_race_from_the_same_version_one_wins_the_other_retries(
    settings: Settings,
) -> None:
    case = "c-race"
    with cases_service(settings):
        send(settings, GetCaseState(case_id=case, request_id="a/0/0", reply_to="run-a"))
        send(settings, GetCaseState(case_id=case, request_id="b/0/0", reply_to="run-b"))
        read_a = reply_to(settings, "run-a", "a/0/0")
        read_b = reply_to(settings, "run-b", "b/0/0")
        assert read_a.version == read_b.version == 0
        assert json.loads(read_a.state_json or "") == {}

        # Both runs write from the version they read, from two producers at once.
        threads = [
            threading.Thread(
                target=send, args=(settings, put(case, run, f"{run}/0/1", 0, {"by": run}))
            )
            for run in ("run-a", "run-b")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        answers = {run: reply_to(settings, run, f"{run}/0/1") for run in ("run-a", "run-b")}
        winners = [run for run, r in answers.items() if r.accepted]
        losers = [run for run, r in answers.items() if not r.accepted]
        assert len(winners) == 1 and len(losers) == 1, answers
        won, lost = answers[winners[0]], answers[losers[0]]
        assert won.version == 1
        assert lost.version == 1  # the newer version to retry from
        assert json.loads(lost.state_json or "") == {"by": winners[0]}
        assert "version moved" in (lost.reason or "")

        retry = put(case, losers[0], f"{losers[0]}/0/2", lost.version, {"by": losers[0]})
        send(settings, retry)
        again = reply_to(settings, losers[0], retry.request_id)
        assert again.accepted and again.version == 2

        # A re-sent command (same request id) gets the same answer and changes nothing.
        send(settings, retry)
        send(settings, GetCaseState(case_id=case, request_id="a/0/9", reply_to="run-a"))
        final = reply_to(settings, "run-a", "a/0/9")
        assert final.version == 2 and json.loads(final.state_json or "") == {"by": losers[0]}
        dup = [r for k, r in read_all(settings, "runs.inbox") if k == losers[0]]
        assert sum(getattr(r, "request_id", None) == retry.request_id for r in dup) == 2
        assert all(
            r.accepted and r.version == 2  # type: ignore[union-attr]
            for r in dup
            if getattr(r, "request_id", None) == retry.request_id
        )


def test_close_is_refused_while_an_obligation_is_open_and_accepted_after_meet(
    settings: Settings,
) -> None:
    case, run = "c-close", "run-c"
    register = RegisterDeadline(
        case_id=case,
        request_id="c/0/1",
        reply_to=run,
        name="aperak",
        due_ms=2_000_000_000_000,
        warn_ms=None,
        calendar="wall",
        calendar_digest="ab" * 32,
        rule_json='{"days": 1}',
        on_breach="escalate",
    )
    with cases_service(settings):
        send(settings, register)
        assert reply_to(settings, run, "c/0/1").accepted
        send(settings, CloseCase(case_id=case, request_id="c/0/2", reply_to=run))
        refused = reply_to(settings, run, "c/0/2")
        assert not refused.accepted and "aperak" in (refused.reason or "")

        send(settings, MeetDeadline(case_id=case, request_id="c/0/3", reply_to=run, name="aperak"))
        assert reply_to(settings, run, "c/0/3").accepted
        send(settings, CloseCase(case_id=case, request_id="c/0/4", reply_to=run))
        assert reply_to(settings, run, "c/0/4").accepted

    record = latest_case(settings, case)
    assert isinstance(record, CaseRecord) and record.closed
    assert record.obligations[0].status == ObligationStatus.MET

    # The CLI reads the same record straight from the topic.
    env = {
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
    }
    shown = CliRunner().invoke(app, ["cases", "show", case, "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert (data["case_id"], data["version"], data["closed"], data["state"]) == (case, 0, True, {})
    (ob,) = data["obligations"]
    assert (ob["name"], ob["status"], ob["due_ms"]) == ("aperak", "MET", 2_000_000_000_000)
    assert ob["due"] == "2033-05-18T03:33:20.000+00:00"
    table = CliRunner().invoke(app, ["cases", "show", case], env=env)
    assert table.exit_code == 0 and "aperak" in table.output and "MET" in table.output
    missing = CliRunner().invoke(app, ["cases", "show", "c-nope"], env=env)
    assert missing.exit_code == 1


def test_state_survives_a_restart_of_the_service(settings: Settings) -> None:
    case, run = "c-restart", "run-r"
    with cases_service(settings):
        send(settings, put(case, run, "r/0/1", 0, {"n": "1"}))
        assert reply_to(settings, run, "r/0/1").accepted
    # A new instance restores the table from the compacted topic before it serves.
    with cases_service(settings):
        send(settings, put(case, run, "r/0/2", 0, {"n": "stale"}))
        stale = reply_to(settings, run, "r/0/2")
        assert not stale.accepted and stale.version == 1
        send(settings, put(case, run, "r/0/1", 0, {"n": "1"}))  # re-sent after the restart

        def both_answers() -> list[CaseReply] | None:
            got = [
                r
                for k, r in read_all(settings, "runs.inbox")
                if k == run and isinstance(r, CaseReply) and r.request_id == "r/0/1"
            ]
            return got if len(got) == 2 else None

        resent = wait_for(both_answers, what="the re-sent command's answer")
    # Remembered, not re-applied: still accepted at version 1, though the case is at 1 too.
    assert all(r.accepted and r.version == 1 for r in resent)
    record = latest_case(settings, case)
    assert record is not None and record.version == 1
