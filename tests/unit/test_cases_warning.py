"""A warning reaches someone: the first WarnDeadline writes a sealed warning run (the audit
record of the warning) and a worklist task for the obligation's owner role; a second one
writes nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_cases_handler import CASE, DUE, registered

from runplane.core.keys import warn_request_id
from runplane.core.verify import verify_chain
from runplane.wire import CaseRecord, JournalKind, JournalRecord, OpenTask, WarnDeadline
from services.cases.handler import emits_for
from services.cases.warning import DEFAULT_WARN_ROLE, warning_run_id

pytestmark = pytest.mark.unit

WARN = WarnDeadline(
    case_id=CASE, request_id=warn_request_id(CASE, "aperak", DUE), name="aperak", due_ms=DUE
)


def test_the_first_warning_writes_a_sealed_run_and_a_task_for_the_owner_role() -> None:
    case = registered()
    owned = replace(case, obligations=(replace(case.obligations[0], owner_role="billing"),))
    emits, outcome, transition = emits_for(owned, WARN, DUE - 100, warn_role="ops")
    assert (outcome, transition) == ("accepted", "warned")
    chain = [e.value for e in emits if e.topic == "journal"]
    assert all(isinstance(r, JournalRecord) for r in chain)
    records = [r for r in chain if isinstance(r, JournalRecord)]
    assert verify_chain(records).ok
    session = warning_run_id(CASE, "aperak", DUE)
    assert {r.session_id for r in records} == {session}
    warned = records[1]
    assert warned.kind is JournalKind.DEADLINE_WARNED
    assert (warned.attrs["obligation"], warned.attrs["owner_role"]) == ("aperak", "billing")
    [task] = [e.value for e in emits if e.topic == "tasks.commands"]
    assert isinstance(task, OpenTask)
    assert (task.role, task.case_id, task.expires_ms, task.session_id) == (
        "billing",
        CASE,
        DUE,
        session,
    )
    assert task.task_id == warned.attrs["task_id"]


def test_without_an_owner_the_configured_role_is_told_and_a_second_warning_writes_nothing() -> None:
    emits, _, _ = emits_for(registered(), WARN, DUE - 100, warn_role="ops")
    [task] = [e.value for e in emits if e.topic == "tasks.commands"]
    assert isinstance(task, OpenTask) and task.role == "ops"
    [warned_case] = [e.value for e in emits if e.topic == "cases"]
    assert isinstance(warned_case, CaseRecord)
    again, outcome, transition = emits_for(warned_case, WARN, DUE - 50)
    assert (outcome, transition) == ("duplicate", None)
    assert not [e for e in again if e.topic in ("journal", "tasks.commands")]
    default, _, _ = emits_for(registered(), WARN, DUE - 100)
    assert [e.value.role for e in default if isinstance(e.value, OpenTask)] == [DEFAULT_WARN_ROLE]
