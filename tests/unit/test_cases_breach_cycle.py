"""A breached obligation cannot start a new cycle at the same due instant (review minor 6).

The sweeper names everything about a breach from (case, name, due): a second cycle at the
same due would get the spent breach request id (deduplicated: never breached, open forever)
and the same sweep run id (two chains under one session id). Keys with a ``cycle`` tell two
cycles apart; without one they are the names used before.
"""

from __future__ import annotations

import pytest
from test_cases_decide import CASE, DAY, register, run

from runplane.core import keys
from runplane.wire import BreachDeadline, ObligationStatus
from services.cases.decide import evaluate

pytestmark = pytest.mark.unit


def _breached() -> object:
    case = run([register("r1")])
    breach = BreachDeadline(
        case_id=CASE,
        request_id=keys.breach_request_id(CASE, "aperak", DAY),
        name="aperak",
        due_ms=DAY,
        sweep_run_id=keys.sweep_run_id(CASE, "aperak", DAY),
    )
    d = evaluate(case, breach, 12)
    assert d.case is not None and d.case.obligations[0].status == ObligationStatus.BREACHED
    return d.case


def test_the_same_due_again_after_a_breach_is_refused_with_the_reason() -> None:
    case = _breached()
    d = evaluate(case, register("r2"), 20)  # type: ignore[arg-type]
    assert not d.reply.accepted and d.transition is None
    assert "already breached" in (d.reply.reason or "")


def test_a_new_due_after_a_breach_starts_a_new_cycle() -> None:
    case = _breached()
    d = evaluate(case, register("r3", due=2 * DAY), 20)  # type: ignore[arg-type]
    assert d.transition == "registered" and d.case is not None
    assert d.case.obligations[0].status == ObligationStatus.OPEN


def test_keys_tell_cycles_apart_and_stay_unchanged_without_one() -> None:
    base = keys.sweep_run_id(CASE, "aperak", DAY)
    assert keys.sweep_run_id(CASE, "aperak", DAY, cycle=None) == base
    assert keys.sweep_run_id(CASE, "aperak", DAY, cycle=1) != base
    assert keys.sweep_run_id(CASE, "aperak", DAY, cycle=1) != keys.sweep_run_id(
        CASE, "aperak", DAY, cycle=2
    )
    for fn in (keys.followup_admission_key, keys.warn_request_id, keys.breach_request_id):
        assert fn(CASE, "aperak", DAY, cycle=7) != fn(CASE, "aperak", DAY)
