"""The sweeper with the cases service on the real broker and Redis.

A ``days(1)`` deadline is passed with a shifted sweeper clock (no waiting). Two sweeper
instances run at once, are restarted in the middle, and decide the same things again and
again (a 300 ms retry), yet the case is warned once and breached once, the journal holds one
sealed sweep run that verifies, and admission receives one follow-up request. Flushing the
sweeper's Redis and restarting rebuilds the index from ``cases``: no breach lost or doubled.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from test_cases_support import (
    cases_service,
    latest_case,
    read_all,
    redis_db,
    reply_to,
    send,
    sweeper,
)

from runplane.config import Settings
from runplane.core.calendars import WallClock
from runplane.core.keys import followup_admission_key, sweep_run_id
from runplane.core.verify import verify_chain
from runplane.wire import (
    AdmissionRequest,
    CaseRecord,
    GetCaseState,
    JournalKind,
    JournalRecord,
    Obligation,
    ObligationStatus,
    RegisterDeadline,
)
from services.sweeper.decide import decide_tick, entries_for
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

HOUR = 3_600_000
DAY = 24 * HOUR
REDIS_DB = 13  # the sweeper tests' own Redis database, so flushing it touches nobody else


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def register(case: str, name: str, start_ms: int, *, warn_before: int = HOUR) -> RegisterDeadline:
    wall = WallClock()
    due = wall.resolve({"days": 1}, start_ms)
    return RegisterDeadline(
        case_id=case,
        request_id=f"run-{case}/0/{name}",
        reply_to=f"run-{case}",
        name=name,
        due_ms=due,
        warn_ms=due - warn_before,
        calendar=wall.name,
        calendar_digest=wall.digest,
        rule_json=json.dumps({"days": 1}),
        on_breach="escalate",
    )


def obligation(settings: Settings, case: str, name: str) -> Obligation | None:
    record = latest_case(settings, case)
    if record is None:
        return None
    return next((o for o in record.obligations if o.name == name), None)


def status_is(settings: Settings, case: str, name: str, status: ObligationStatus) -> bool:
    ob = obligation(settings, case, name)
    return ob is not None and ob.status == status


def accepted_transitions(settings: Settings, case: str) -> Counter[str]:
    """How often each op was *accepted as a change* over the case's whole history."""
    seen: Counter[str] = Counter()
    last: CaseRecord | None = None
    for key, rec in read_all(settings, "cases"):
        if key != case or not isinstance(rec, CaseRecord):
            continue
        before = {o.name: o.status for o in last.obligations} if last else {}
        for o in rec.obligations:
            if before.get(o.name) != o.status:
                seen[o.status.value] += 1
        last = rec
    return seen


def sweep_chains(settings: Settings, prefix: str = "sweep-") -> dict[str, list[JournalRecord]]:
    """The sealed runs of breaches (``sweep-…``), or of warnings (``prefix="warn-"``)."""
    chains: dict[str, list[JournalRecord]] = {}
    for key, rec in read_all(settings, "journal"):
        if isinstance(rec, JournalRecord) and key.startswith(prefix):
            chains.setdefault(key, []).append(rec)
    return chains


def followups(settings: Settings) -> list[AdmissionRequest]:
    return [r for _, r in read_all(settings, "admission") if isinstance(r, AdmissionRequest)]


def test_days_1_deadline_is_warned_once_and_breached_once_across_two_sweepers_and_a_restart(
    settings: Settings,
) -> None:
    redis_db(REDIS_DB).flushdb()
    case, name = "c-sweep", "aperak"
    start = now_ms()
    cmd = register(case, name, start)
    in_warn_window = cmd.due_ms - start - HOUR // 2  # between warn and due
    past_due = cmd.due_ms - start + 60_000
    with cases_service(settings):
        send(settings, cmd)
        assert reply_to(settings, f"run-{case}", cmd.request_id).accepted

        with (
            sweeper(settings, offset_ms=in_warn_window, redis_db=REDIS_DB, instance="a"),
            sweeper(settings, offset_ms=in_warn_window, redis_db=REDIS_DB, instance="b"),
        ):
            wait_for(
                lambda: status_is(settings, case, name, ObligationStatus.WARNED), what="WARNED"
            )
            time.sleep(1.5)  # several ticks and retries of both instances
        warned = latest_case(settings, case)
        # Restart both, now past due; restart one of them again while they race.
        with sweeper(settings, offset_ms=past_due, redis_db=REDIS_DB, instance="a"):
            with sweeper(settings, offset_ms=past_due, redis_db=REDIS_DB, instance="b"):
                wait_for(
                    lambda: status_is(settings, case, name, ObligationStatus.BREACHED),
                    what="BREACHED",
                )
            with sweeper(settings, offset_ms=past_due, redis_db=REDIS_DB, instance="b"):
                time.sleep(1.5)

        # A lagging sweeper that still sees the WARNED case decides the breach again: the
        # very same command. The cases service answers it as a duplicate.
        stale = [c for _, c in decide_tick(entries_for(warned), cmd.due_ms + 1) if c is not None]
        assert [type(c).__name__ for c in stale] == ["BreachDeadline"]
        send(settings, *stale)
        send(settings, GetCaseState(case_id=case, request_id="probe", reply_to="probe"))
        reply_to(settings, "probe", "probe")  # same partition: the stale breach came first

        sent = Counter(
            type(r).__name__ for k, r in read_all(settings, "cases.commands") if k == case
        )
        print(f"commands on cases.commands for the case: {dict(sent)}")
        assert sent["BreachDeadline"] >= 2  # decided more than once...
        transitions = accepted_transitions(settings, case)
        # ...and applied once.
        assert transitions == Counter({"OPEN": 1, "WARNED": 1, "BREACHED": 1}), transitions

        run_id = sweep_run_id(case, name, cmd.due_ms)
        ob = obligation(settings, case, name)
        assert ob is not None and ob.sweep_run_id == run_id

        chains = sweep_chains(settings)
        assert list(chains) == [run_id]
        chain = chains[run_id]
        assert [r.kind for r in chain] == [
            JournalKind.RUN_ADMITTED,
            JournalKind.DEADLINE_BREACHED,
            JournalKind.RUN_COMPLETED,
        ]
        verdict = verify_chain(chain)
        assert verdict.ok, str(verdict)
        # The warning, decided by both sweepers, reached the owner role once (a task and a
        # sealed warning run).
        [warning] = sweep_chains(settings, "warn-").values()
        assert [r.kind for r in warning][1] is JournalKind.DEADLINE_WARNED
        assert verify_chain(warning).ok

        (request,) = followups(settings)
        assert request.admission_key == followup_admission_key(case, name, cmd.due_ms)
        assert request.capability == "escalate"
        assert json.loads(request.input_json)["sweep_run_id"] == run_id


def test_flushing_redis_and_restarting_rebuilds_the_index_without_losing_or_doubling(
    settings: Settings,
) -> None:
    r = redis_db(REDIS_DB)
    r.flushdb()
    start = now_ms()
    early = register("c-early", "first", start)  # breached before the flush
    late = register("c-late", "second", start + 10 * 60_000)  # due 10 minutes later
    past_early = early.due_ms - start + 60_000  # early is due, late is not
    past_both = late.due_ms - start + 60_000
    with cases_service(settings):
        send(settings, early, late)
        assert reply_to(settings, "run-c-early", early.request_id).accepted
        assert reply_to(settings, "run-c-late", late.request_id).accepted

        with sweeper(settings, offset_ms=past_early, redis_db=REDIS_DB, instance="a") as sw:
            wait_for(
                lambda: status_is(settings, "c-early", "first", ObligationStatus.BREACHED),
                what="early BREACHED",
            )
            wait_for(lambda: sw.index_size() >= 1, what="late indexed")
            wait_for(
                lambda: status_is(settings, "c-late", "second", ObligationStatus.WARNED),
                what="late WARNED",
            )

        r.flushdb()  # the whole index and its read positions are gone
        assert r.dbsize() == 0

        with sweeper(settings, offset_ms=past_both, redis_db=REDIS_DB, instance="a") as sw:
            wait_for(
                lambda: status_is(settings, "c-late", "second", ObligationStatus.BREACHED),
                what="late BREACHED",
            )
            time.sleep(1.0)
            assert r.dbsize() > 0  # rebuilt
            assert sw.index_size() == 0  # nothing left to sweep

    assert accepted_transitions(settings, "c-early")["BREACHED"] == 1
    assert accepted_transitions(settings, "c-late")["BREACHED"] == 1
    chains = sweep_chains(settings)
    assert set(chains) == {
        sweep_run_id("c-early", "first", early.due_ms),
        sweep_run_id("c-late", "second", late.due_ms),
    }
    assert all(verify_chain(c).ok and len(c) == 3 for c in chains.values())
    keys = sorted(req.admission_key for req in followups(settings))
    assert keys == sorted(
        [
            followup_admission_key("c-early", "first", early.due_ms),
            followup_admission_key("c-late", "second", late.due_ms),
        ]
    )
