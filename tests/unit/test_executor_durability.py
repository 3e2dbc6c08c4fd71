"""The executor shell's durability rules, with the engine real and Kafka replaced by stubs.

These test the order of operations and the containment inside the shell; the broker-level
behaviour (a zombie's late commit) is in tests/integration/test_zombie_restore.py.

* Review C1: ``on_assign`` waits for the previous owner's transaction (committed offsets,
  read with require_stable) *before* it reads either table.
* Review M1: a message whose handling raises fails that run (RUN_FAILED chained after its
  last snapshot) and is dead-lettered; the executor does not raise (no poison pill).
* Review minor 7: a run that ends during its rebuild is not reported as "unknown capability".
* Review M3: runs that ended keep only their id and status; RUNNING runs found at assignment
  are rebuilt by the loop after the callback, not inside it.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import TopicPartition

from runplane.config import Settings
from runplane.core import AgentRegistry, AgentSpec, Durability, Runtime, StepCtx
from runplane.core.chain import run_admitted
from runplane.kafka.restore import Restored
from runplane.wire import (
    DeadLetter,
    JournalKind,
    JournalRecord,
    RunStatus,
    RunStatusUpdate,
    SessionSnapshot,
    Signal,
    StartRun,
    serde_for,
)
from services.executor.executor import Executor
from services.executor.settings import ExecutorSettings
from services.executor.state import PartitionState
from tests.helpers.sample import sample_entry

BASE = Settings(partitions=1)
SERDE = serde_for(BASE)


async def waits(ctx: StepCtx, input: Any) -> Any:
    return await ctx.wait_signal("go")


def _registry() -> AgentRegistry:
    registry = AgentRegistry()
    registry.register(AgentSpec("waits", waits, Durability.REPLAYABLE, None, {}), lint=False)
    return registry


def _executor() -> Executor:
    return Executor(ExecutorSettings(base=BASE), registry=_registry(), tools={}, providers={})


class Log:
    def __init__(self) -> None:
        self.calls: list[str] = []


class StubConsumer:
    def __init__(self, log: Log) -> None:
        self.log = log

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.log.calls.append("committed")
        return [TopicPartition(tp.topic, tp.partition, 5) for tp in partitions]


class StubRestorer:
    def __init__(self, log: Log) -> None:
        self.log = log

    def restore(
        self,
        topic: str,
        partitions: Any,
        decode: Any,
        *,
        deadline: float | None = None,
        stop: Any = None,
        same: Any = None,
    ) -> Restored[Any]:
        self.log.calls.append(f"restore {topic}")
        assert deadline is not None  # one deadline for the whole assignment
        return Restored({p: {} for p in partitions})


def test_on_assign_waits_for_the_previous_owner_before_reading_any_table() -> None:
    ex, log = _executor(), Log()
    ex._loop._restorer = StubRestorer(log)  # type: ignore[assignment]
    ex._loop._on_assign(StubConsumer(log), [TopicPartition(BASE.topic("runs.inbox"), 0)])  # type: ignore[arg-type]
    assert log.calls == [
        "committed",
        f"restore {BASE.topic('sessions')}",
        f"restore {BASE.topic('results')}",
    ]
    assert ex.owned_partitions == {0}


class Msg:
    """The parts of a confluent-kafka Message the executor reads."""

    def __init__(self, record: Any, key: str) -> None:
        self._value, self._key = SERDE.encode("runs.inbox", record), key.encode()

    def error(self) -> None:
        return None

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 7

    def topic(self) -> str:
        return BASE.topic("runs.inbox")

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (0, 0)

    def headers(self) -> None:
        return None


def _parked_run(ex: Executor) -> SessionSnapshot:
    admitted = run_admitted(
        "r-p",
        capability="waits",
        admission_key="k-p",
        tenant="default",
        initiator="u",
        input_json="{}",
        now_ms=1,
    )
    start = StartRun(
        session_id="r-p",
        capability="waits",
        input_json="{}",
        case_id=None,
        admission_key="k-p",
        tenant="default",
        initiator="u",
        admitted_hash=admitted.hash,
        admitted_ms=1,
    )
    _, step = Runtime.start(ex._registry.spec("waits"), start, now_ms=2)
    ex._table.parts[0] = PartitionState(sessions={"r-p": step.snapshot})
    return step.snapshot


def _batch(ex: Executor) -> list[Any]:
    out = []
    for o in ex._group.batch.records:
        value = o.lazy() if o.lazy is not None else o.value
        out.append(SERDE.decode(o.topic.removeprefix(BASE.topic_prefix), value))
    return out


def test_a_message_whose_handling_raises_fails_the_run_and_is_dead_lettered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ex = _executor()
    snap = _parked_run(ex)

    def boom(self: Runtime, event: Any, *, now_ms: int) -> Any:
        raise ValueError("engine bug")

    monkeypatch.setattr(Runtime, "deliver", boom)
    ex._on_message(Msg(Signal(session_id="r-p", name="go", payload_json="1", sent_ms=3), "r-p"))  # type: ignore[arg-type]
    out = _batch(ex)
    (failed,) = [r for r in out if isinstance(r, JournalRecord)]
    assert (
        failed.kind is JournalKind.RUN_FAILED
        and failed.seq == snap.next_seq
        and failed.prev_hash == snap.last_hash
    )
    (row,) = [r for r in out if isinstance(r, SessionSnapshot)]
    assert (
        row.status is RunStatus.FAILED
        and row.last_hash == failed.hash
        and row.next_seq == snap.next_seq + 1
    )
    assert [r.status for r in out if isinstance(r, RunStatusUpdate)] == [RunStatus.FAILED]
    (letter,) = [r for r in out if isinstance(r, DeadLetter)]
    assert "ValueError" in letter.reason and letter.offset == 7
    assert (
        ex._table.parts[0].ended["r-p"] is RunStatus.FAILED
        and "r-p" not in ex._table.parts[0].sessions
    )
    assert "r-p" not in ex.resident_sessions


def test_a_run_that_ends_during_its_rebuild_is_not_called_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ex = _executor()
    snap = _parked_run(ex)
    original = Runtime.restore

    def restore_then_quarantine(*args: Any, **kwargs: Any) -> Any:
        rt, _ = original(*args, **kwargs)
        return rt, rt.quarantine("replay diverged", now_ms=5)

    monkeypatch.setattr(Runtime, "restore", restore_then_quarantine)
    ex._on_message(Msg(Signal(session_id="r-p", name="go", payload_json="1", sent_ms=3), "r-p"))  # type: ignore[arg-type]
    (letter,) = [r for r in _batch(ex) if isinstance(r, DeadLetter)]
    assert "ended during its rebuild" in letter.reason and "unknown capability" not in letter.reason
    assert snap.status is RunStatus.PARKED


async def generates(ctx: StepCtx, input: Any) -> Any:
    return (await ctx.generate("nobody", "m", "hi")).text


def _snapshots() -> tuple[SessionSnapshot, SessionSnapshot, list[Any]]:
    """A RUNNING run (waiting for a generation) and one that ended, with their results."""
    registry = AgentRegistry()
    registry.register(AgentSpec("gen", generates, Durability.REPLAYABLE, None, {}), lint=False)
    out = []
    for sid in ("r-run", "r-done"):
        admitted = run_admitted(
            sid,
            capability="gen",
            admission_key=f"k-{sid}",
            tenant="default",
            initiator="u",
            input_json="{}",
            now_ms=1,
        )
        start = StartRun(
            session_id=sid,
            capability="gen",
            input_json="{}",
            case_id=None,
            admission_key=f"k-{sid}",
            tenant="default",
            initiator="u",
            admitted_hash=admitted.hash,
            admitted_ms=1,
        )
        rt, step = Runtime.start(registry.spec("gen"), start, now_ms=2)
        out.append((rt, step))
    (_, running), (rt_done, _) = out
    done = rt_done.quarantine("ended for the test", now_ms=3)
    assert (
        running.snapshot.status is RunStatus.RUNNING
        and done.snapshot.status is RunStatus.QUARANTINED
    )
    return running.snapshot, done.snapshot, [sample_entry("r-done", 0, {"n": 0})]


class TableRestorer:
    def __init__(self, sessions: dict[str, SessionSnapshot], results: dict[str, Any]) -> None:
        self.rows = {BASE.topic("sessions"): sessions, BASE.topic("results"): results}

    def restore(
        self,
        topic: str,
        partitions: Any,
        decode: Any,
        *,
        deadline: float | None = None,
        stop: Any = None,
        same: Any = None,
    ) -> Restored[Any]:
        return Restored({0: dict(self.rows[topic])})


def test_ended_runs_keep_only_their_status_and_running_runs_are_rebuilt_after_the_callback() -> (
    None
):
    import asyncio

    running, done, results = _snapshots()
    registry = AgentRegistry()
    registry.register(AgentSpec("gen", generates, Durability.REPLAYABLE, None, {}), lint=False)
    ex = Executor(ExecutorSettings(base=BASE), registry=registry, tools={}, providers={})
    ex._loop._restorer = TableRestorer(  # type: ignore[assignment]
        {"r-run": running, "r-done": done}, {f"r-done/0/{i}": e for i, e in enumerate(results)}
    )
    ex._loop._on_assign(StubConsumer(Log()), [TopicPartition(BASE.topic("runs.inbox"), 0)])  # type: ignore[arg-type]
    part = ex._table.parts[0]
    assert part.ended == {"r-done": RunStatus.QUARANTINED} and "r-done" not in part.sessions
    assert part.results == {}  # nothing kept for an ended run
    assert ex.resident_sessions == frozenset()  # not rebuilt inside the rebalance callback

    async def loop_turn() -> frozenset[str]:
        ex._rebuild_some()
        resident = ex.resident_sessions
        for task in list(ex._steps.tasks):
            task.cancel()
        return resident

    assert asyncio.run(loop_turn()) == {"r-run"}
    # a second StartRun or a message for the ended run is answered, not served
    ex._on_message(
        Msg(Signal(session_id="r-done", name="go", payload_json="1", sent_ms=3), "r-done")
    )  # type: ignore[arg-type]
    (letter,) = [r for r in _batch(ex) if isinstance(r, DeadLetter)]
    assert "already ended" in letter.reason
