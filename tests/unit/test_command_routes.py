"""One command table (``runplane.kafka.routes``) routes a step's commands for the executor's
outbox and for the test Driver alike: every ``Command`` has one row, the row's topic carries
it, the outbox writes it there under the row's key, and the Driver has a stand-in for it."""

from __future__ import annotations

from typing import get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runplane.config import Settings
from runplane.core import AgentRegistry
from runplane.core.engine import Command
from runplane.errors import TerminalError
from runplane.kafka import routes
from runplane.testing import Driver
from runplane.testing.session import _Session
from runplane.wire import TOPIC_RECORDS, OpenTask, Record, RunStatusUpdate, Wake, serde_for
from runplane.wire.strategies import records
from services.executor.committer import GroupCommit
from services.executor.metrics import executor_metrics
from services.executor.outbox import Outbox
from services.executor.topology import OUTPUTS

BASE = Settings(topic_prefix="t.")
COMMANDS = sorted(get_args(Command), key=lambda c: c.__name__)


def test_every_command_has_one_route_to_a_topic_that_carries_it() -> None:
    assert set(routes.ROUTES) == set(COMMANDS)
    for kind, row in routes.ROUTES.items():
        assert kind in TOPIC_RECORDS[row.topic], kind
        assert row.topic in OUTPUTS  # the executor may write there (its ACLs say so)


def test_the_table_check_fails_when_the_table_and_the_union_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing = {k: v for k, v in routes.ROUTES.items() if k is not OpenTask}
    monkeypatch.setattr(routes, "ROUTES", missing)
    with pytest.raises(TypeError, match="missing \\['OpenTask'\\]"):
        routes._check()
    wrong = {**routes.ROUTES, OpenTask: routes.Route("cases.commands", lambda c: c.task_id)}
    monkeypatch.setattr(routes, "ROUTES", wrong)
    with pytest.raises(TypeError, match=r"OpenTask is routed to cases\.commands"):
        routes._check()


def test_a_record_that_is_no_command_has_no_route() -> None:
    with pytest.raises(TerminalError, match="no route for command Wake"):
        routes.route(Wake(session_id="r", reason="timer", sent_ms=1))


def _outbox() -> tuple[Outbox, GroupCommit]:
    group = GroupCommit(max_records=100, max_s=1.0)
    topics = {name: BASE.topic(name) for name in OUTPUTS}
    outbox = Outbox(
        group,
        serde_for(BASE),
        topics,
        metrics=executor_metrics(),
        wall_ms=lambda: 1,
        emitter_key=None,
    )
    return outbox, group


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.sampled_from(COMMANDS).flatmap(records))
def test_the_outbox_writes_a_command_where_its_route_says(command: Record) -> None:
    outbox, group = _outbox()
    outbox.command(command, now=0.0)  # type: ignore[arg-type]
    row = routes.route(command)
    (out,) = group.batch.records
    assert out.topic == BASE.topic(row.topic)
    assert out.key == row.key(command).encode("utf-8")
    assert serde_for(BASE).decode(row.topic, out.value or b"") == command


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.sampled_from(COMMANDS).flatmap(records))
def test_the_driver_hands_every_command_to_the_stand_in_of_its_topic(command: Record) -> None:
    driver = Driver(AgentRegistry())
    session = driver.sessions.setdefault("r", _Session())
    reached: list[tuple[str, Record]] = []
    # The stand-ins' own rules (a case's state, a task's approvals) are tested elsewhere.
    driver._worklist = lambda _s, c: reached.append(("tasks.commands", c))
    driver._cases_service = lambda c: reached.append(("cases.commands", c))
    driver._route(session, command)  # type: ignore[arg-type]
    reached += [("admission", c) for c in driver._admissions]
    reached += [("runs.inbox", c) for c in (*driver._starts, *driver._inbox)]
    reached += [("journal", r) for s in driver.sessions.values() for r in s.journal]
    reached += [("runs.updates", a) for a in driver.answers]
    topic = routes.route(command).topic
    if isinstance(command, RunStatusUpdate):
        assert reached == []  # a run's view is its snapshot: no stand-in reads statuses
    else:
        assert reached == [(topic, command)]
