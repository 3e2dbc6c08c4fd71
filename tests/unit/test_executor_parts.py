"""The executor's pure parts: settings from the environment, the group-commit batch, and the
translation of collapsed live outcomes into the core's Outcome."""

from __future__ import annotations

import pytest

from runplane.config import Settings
from runplane.core import Generation
from runplane.errors import ConfigError
from services.executor.batch import Batch, Out
from services.executor.calls import to_outcome as _to_outcome
from services.executor.live import CallStatus, LiveOutcome
from services.executor.settings import ExecutorSettings
from services.executor.state import results_key
from services.executor.topology import group_id


def test_settings_from_env() -> None:
    env = {
        "RUNPLANE_INSTANCE_ID": "ex-3",
        "RUNPLANE_TOPIC_PREFIX": "p1.",
        "RUNPLANE_EXECUTOR_IDLE_GRACE_S": "2.5",
        "RUNPLANE_EXECUTOR_MAX_INFLIGHT": "7",
        "RUNPLANE_EXECUTOR_BATCH_MAX": "40",
        "RUNPLANE_EXECUTOR_BATCH_MS": "3",
        "RUNPLANE_OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "RUNPLANE_OPENAI_API_KEY": "sk-x",
        "RUNPLANE_AGENT_MODULES": " examples.refund , ,my.agents",
        "RUNPLANE_BILLING_URL": "http://127.0.0.1:7",
    }
    s = ExecutorSettings.from_env(env)
    assert (s.idle_grace_s, s.max_inflight, s.batch_max, s.batch_ms) == (2.5, 7, 40, 3.0)
    assert (s.openai_base_url, s.openai_api_key, s.billing_url) == (
        "http://127.0.0.1:9/v1",
        "sk-x",
        "http://127.0.0.1:7",
    )
    assert s.modules == ("examples.refund", "my.agents")
    # The topic prefix is in the transactional id: two deployments on one Kafka never fence.
    assert s.transactional_id == "p1.executor-ex-3"
    assert group_id(s.base) == "p1.executor"
    defaults = ExecutorSettings.from_env({})
    assert defaults.modules == ("examples.refund", "examples.triage", "examples.declarative")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RUNPLANE_EXECUTOR_MAX_INFLIGHT", "0"),
        ("RUNPLANE_EXECUTOR_BATCH_MAX", "zero"),
        ("RUNPLANE_EXECUTOR_IDLE_GRACE_S", "-1"),
    ],
)
def test_bad_settings_are_refused(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        ExecutorSettings.from_env({name: value}, base=Settings())


def test_batch_is_due_by_size_or_age() -> None:
    batch = Batch()
    assert batch.empty and not batch.due(100.0, 2, 0.005)
    batch.add(Out("t", b"k1", b"v"), now=10.0)
    assert not batch.due(10.001, 2, 0.005)
    assert batch.due(10.006, 2, 0.005)
    batch.add(Out("t", b"k2", b"v"), now=10.002)
    assert batch.due(10.002, 2, 0.005)


def test_input_alone_opens_a_batch() -> None:
    batch = Batch()
    batch.consumed(5.0)  # a dead-lettered or rejected message still moves the offset
    assert not batch.empty and batch.due(5.01, 100, 0.005)


def test_table_rows_last_write_wins_in_place() -> None:
    batch = Batch()
    batch.add(Out("sessions", b"r1", b"v1"), 0.0, last_wins=True)
    batch.add(Out("journal", b"r1", b"j"), 0.0)
    batch.add(Out("sessions", b"r2", b"w1"), 0.0, last_wins=True)
    batch.add(Out("sessions", b"r1", b"v2"), 0.0, last_wins=True)
    assert [(o.topic, o.key, o.value) for o in batch.records] == [
        ("sessions", b"r1", b"v2"),
        ("journal", b"r1", b"j"),
        ("sessions", b"r2", b"w1"),
    ]


def test_after_commit_callbacks_are_kept_in_order() -> None:
    batch, seen = Batch(), []
    batch.after_commit(lambda: seen.append(1), 0.0)
    batch.after_commit(lambda: seen.append(2), 0.0)
    for fn in batch.callbacks:
        fn()
    assert seen == [1, 2]


def test_outcomes_translate_with_attempts_and_cost() -> None:
    gen = LiveOutcome(CallStatus.OK, attempts=2, elapsed_s=0.1, value=Generation("hi", 3, 4, 0.5))
    ok = _to_outcome(gen)
    assert ok.ok and ok.value == {"text": "hi", "tokens_in": 3, "tokens_out": 4, "cost_units": 0.5}
    assert ok.attempts == 2 and ok.cost is not None and ok.cost.tokens_out == 4
    failed = _to_outcome(
        LiveOutcome(
            CallStatus.FAILED,
            attempts=3,
            elapsed_s=1,
            error_type="PeerCallError",
            error_message="HTTP 503",
            retryable=True,
        )
    )
    assert not failed.ok and failed.error is not None
    assert (failed.error.type, failed.error.message, failed.error.retryable, failed.attempts) == (
        "PeerCallError",
        "HTTP 503",
        True,
        3,
    )


def test_results_key() -> None:
    assert results_key("r-1", 0, 12) == "r-1/0/12"
