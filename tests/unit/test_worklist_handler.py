"""The worklist's processor handler over the processor's own State (no broker): what it emits
for commands, what it refuses (dead-lettered by the processor), and what its tick expires."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from runplane.errors import WireError
from runplane.kafka.handler import Incoming, State
from runplane.wire import (
    ClaimTask,
    DecideTask,
    DecisionOutcome,
    ExpiryPolicy,
    OpenTask,
    Record,
    TaskDecision,
    TaskKind,
    TaskRecord,
    TaskStatus,
)
from services.worklist.access import Policy
from services.worklist.handler import WorklistHandler

pytestmark = pytest.mark.unit

ROLES = {"ada": frozenset({"finance"}), "ivan": frozenset({"finance"})}
HANDLER = WorklistHandler(Policy(lambda n: ROLES.get(n, frozenset())), gauge_every_ms=0)


def opened(task_id: str, **kw: object) -> OpenTask:
    fields: dict[str, object] = {
        "task_id": task_id,
        "session_id": task_id.split("/")[0],
        "era": 0,
        "call_seq": 2,
        "kind": TaskKind.APPROVAL,
        "question": "ok?",
        "answer_json": "{}",
        "capability": "refund",
        "role": "finance",
        "initiator": "ivan",
        "on_expiry": ExpiryPolicy.FAIL,
        "opened_ms": 1_000,
    }
    fields.update(kw)
    return OpenTask(**fields)  # type: ignore[arg-type]


def deliver(
    state: State, key: str, value: Record, now_ms: int = 2_000
) -> list[tuple[str, str, Record | None]]:
    emits = HANDLER.handle(state, Incoming("tasks.commands", 0, 0, key, value, now_ms), now_ms)
    for emit in emits:  # what the processor does on commit: the table sees its own writes
        if emit.topic == "tasks":
            state._stage("tasks", 0, emit.key, emit.value)
    state._commit()
    return [(e.topic, e.key, e.value) for e in emits]


def test_open_then_approve_emits_the_record_and_the_runs_decision() -> None:
    state = State(HANDLER.tables)
    assert [t for t, _, _ in deliver(state, "s1/0/2", opened("s1/0/2"))] == ["tasks"]
    assert deliver(state, "s1/0/2", opened("s1/0/2")) == []  # a re-sent open writes nothing
    out = deliver(
        state, "s1/0/2", DecideTask(task_id="s1/0/2", principal="ada", at_ms=1, approve=True)
    )
    (t1, k1, rec), (t2, k2, dec) = out
    assert (t1, k1) == ("tasks", "s1/0/2") and isinstance(rec, TaskRecord)
    assert rec.status is TaskStatus.DECIDED
    assert (t2, k2) == ("runs.inbox", "s1")  # keyed by the session: the run's partition
    assert isinstance(dec, TaskDecision) and dec.outcome is DecisionOutcome.APPROVED


def test_refusals_and_misfiled_commands_raise_wire_errors_for_the_dead_letter() -> None:
    state = State(HANDLER.tables)
    deliver(state, "s2/0/2", opened("s2/0/2"))
    with pytest.raises(WireError, match="four-eyes"):
        deliver(state, "s2/0/2", ClaimTask(task_id="s2/0/2", principal="ivan", at_ms=1))
    with pytest.raises(WireError, match="not its task_id"):
        deliver(state, "other", ClaimTask(task_id="s2/0/2", principal="ada", at_ms=1))
    with pytest.raises(WireError, match="approvals"):
        deliver(state, "s3/0/2", opened("s3/0/2", approvals=0))
    with pytest.raises(WireError, match="not a task command"):
        deliver(
            state,
            "s2/0/2",
            TaskDecision(
                session_id="s2",
                task_id="s2/0/2",
                era=0,
                outcome=DecisionOutcome.APPROVED,
                decided_ms=1,
            ),
        )


def test_the_tick_expires_due_tasks_only() -> None:
    state = State(HANDLER.tables)
    deliver(
        state,
        "a/0/2",
        opened("a/0/2", expires_ms=5_000, on_expiry=ExpiryPolicy.PROCEED, allow_unattended=True),
    )
    deliver(state, "b/0/2", opened("b/0/2", expires_ms=9_000))
    deliver(state, "c/0/2", opened("c/0/2"))
    assert HANDLER.tick(state, 4_999) == []
    emits = HANDLER.tick(state, 5_000)
    decisions = [e.value for e in emits if isinstance(e.value, TaskDecision)]
    assert [(d.task_id, d.outcome) for d in decisions] == [
        ("a/0/2", DecisionOutcome.EXPIRED_PROCEEDED)
    ]
    before = REGISTRY.get_sample_value("runplane_tasks_open", {"role": "finance"})
    assert before == 3  # the gauge counts what was still open when the tick looked
