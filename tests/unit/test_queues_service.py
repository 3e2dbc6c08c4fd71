"""Queued runs through admission's and the queue service's handlers, in memory: admission sends
a queued capability's StartRun to its queue, the queue releases it when a slot frees, and a
run's end reaches the queue through admission's claim (docs/decisions.md 33)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from runplane.core.queues import QueueLimits
from runplane.core.verify import verify_chain
from runplane.errors import WireError
from runplane.kafka.handler import Emit, Incoming, State
from runplane.wire import (
    AdmissionClaim,
    AdmissionReply,
    AdmissionRequest,
    EnterQueue,
    JournalRecord,
    LeaveQueue,
    QueueRecord,
    RunStatus,
    RunStatusUpdate,
    StartRun,
    decode,
    encode,
)
from services.admission.decide import CapabilitySpec
from services.admission.handler import AdmissionHandler
from services.queues.handler import QueuesHandler

pytestmark = pytest.mark.unit

CAP = "payout"
NOW = 1_700_000_000_000


class Bus:
    """Both handlers over in-memory tables; every emit lands on its topic's list (and a
    table's emit in the table, as the processor's commit would)."""

    def __init__(self, limits: QueueLimits, *, queued: bool = True) -> None:
        caps = {CAP: CapabilitySpec(None, queue=CAP if queued else None)}
        self.admission = AdmissionHandler(caps)
        self.queues = QueuesHandler({CAP: limits})
        self.claims = State(self.admission.tables)
        self.table = State(self.queues.tables)
        self.topics: dict[str, list[Emit]] = {}
        self.offset = 0

    def _incoming(self, topic: str, key: str, value: object) -> Incoming:
        self.offset += 1
        assert value is None or hasattr(value, "avro_name")
        return Incoming(topic, 0, self.offset, key, value, NOW)  # type: ignore[arg-type]

    def _land(self, emits: Sequence[Emit], state: State, table_topic: str) -> list[Emit]:
        for e in emits:
            # Every emit is a valid wire record on a topic that accepts it.
            assert decode(encode(e.value)) == e.value if e.value is not None else True
            self.topics.setdefault(e.topic, []).append(e)
            if e.topic == table_topic:
                state._stage(
                    table_topic if table_topic == "queues" else "claims", 0, e.key, e.value
                )
        state._commit()
        return list(emits)

    def admit(self, key: str, tenant: str = "acme", priority: int = 0) -> list[Emit]:
        request = AdmissionRequest(
            admission_key=key,
            capability=CAP,
            input_json="{}",
            tenant=tenant,
            initiator="alice",
            priority=priority,
        )
        msg = self._incoming("admission", key, request)
        return self._land(
            self.admission.handle(self.claims, msg, NOW), self.claims, "admission.claims"
        )

    def status(self, start: StartRun, status: RunStatus, seq: int) -> list[Emit]:
        update = RunStatusUpdate(
            admission_key=start.admission_key,
            run_id=start.session_id,
            status=status,
            updated_ms=NOW,
            seq=seq,
            tenant=start.tenant,
        )
        msg = self._incoming("admission", start.admission_key, update)
        return self._land(
            self.admission.handle(self.claims, msg, NOW), self.claims, "admission.claims"
        )

    def queue(self, command: EnterQueue | LeaveQueue, now_ms: int = NOW) -> list[StartRun]:
        msg = self._incoming("queues.commands", command.queue, command)
        emits = self._land(self.queues.handle(self.table, msg, now_ms), self.table, "queues")
        return [e.value for e in emits if isinstance(e.value, StartRun)]

    def forward(self, emits: Sequence[Emit]) -> list[StartRun]:
        """Hand admission's queue commands to the queue service, as the topic would."""
        started: list[StartRun] = []
        for e in emits:
            if isinstance(e.value, EnterQueue | LeaveQueue):
                started += self.queue(e.value)
        return started


def test_a_queued_capabilitys_run_goes_to_its_queue_and_says_queued() -> None:
    bus = Bus(QueueLimits(concurrency=1))
    emits = bus.admit("k1")
    topics = {e.topic for e in emits}
    assert "runs.inbox" not in topics and "queues.commands" in topics
    (claim,) = [e.value for e in emits if isinstance(e.value, AdmissionClaim)]
    (reply,) = [e.value for e in emits if isinstance(e.value, AdmissionReply)]
    (seq0,) = [e.value for e in emits if isinstance(e.value, JournalRecord)]
    assert claim.status == reply.status == RunStatus.QUEUED and claim.queue == CAP
    assert seq0.attrs.get("queue") == CAP and verify_chain([seq0]).ok
    (enter,) = [e for e in emits if e.topic == "queues.commands"]
    assert enter.key == CAP


def test_a_capability_without_a_queue_starts_at_once() -> None:
    bus = Bus(QueueLimits(concurrency=1), queued=False)
    emits = bus.admit("k1")
    assert [e.topic for e in emits if isinstance(e.value, StartRun)] == ["runs.inbox"]
    assert not any(e.topic == "queues.commands" for e in emits)


def test_runs_start_as_slots_free_in_priority_then_arrival_order() -> None:
    bus = Bus(QueueLimits(concurrency=2))
    started: list[StartRun] = []
    for i, priority in enumerate([0, 0, 0, 5, 0, 1]):
        started += bus.forward(bus.admit(f"k{i}", priority=priority))
    assert [s.admission_key for s in started] == ["k0", "k1"]
    order = [s.admission_key for s in started]
    running = list(started)
    seq = 1
    while running:
        done = running.pop(0)
        bus.status(done, RunStatus.RUNNING, seq)
        # A repeated terminal update (redelivery) releases nothing twice.
        end = bus.status(done, RunStatus.COMPLETED, seq + 1)
        again = bus.status(done, RunStatus.COMPLETED, seq + 2)
        assert not any(e.topic == "queues.commands" for e in again)
        seq += 3
        fresh = bus.forward(end)
        running += fresh
        order += [s.admission_key for s in fresh]
    assert order == ["k0", "k1", "k3", "k5", "k2", "k4"]
    record = bus.table.get("queues", CAP)
    assert isinstance(record, QueueRecord) and not record.running and not record.waiting


def test_a_duplicate_admission_answers_queued_and_enqueues_nothing() -> None:
    bus = Bus(QueueLimits(concurrency=1))
    bus.forward(bus.admit("k1"))
    bus.forward(bus.admit("k2"))
    again = bus.admit("k2")
    assert [e.topic for e in again] == ["admission.replies"]
    reply = again[0].value
    assert isinstance(reply, AdmissionReply) and reply.status == RunStatus.QUEUED


def test_a_redelivered_enter_starts_nothing_twice() -> None:
    bus = Bus(QueueLimits(concurrency=5))
    (enter,) = [e.value for e in bus.admit("k1") if isinstance(e.value, EnterQueue)]
    assert len(bus.queue(enter)) == 1
    assert bus.queue(enter) == []


def test_the_rate_limit_releases_runs_on_the_tick() -> None:
    bus = Bus(QueueLimits(rate_per_s=1))
    started = []
    for i in range(3):
        started += bus.forward(bus.admit(f"k{i}"))
    assert len(started) == 1
    ticked = bus.queues.tick(bus.table, NOW + 1_000)
    assert [e.topic for e in ticked] == ["queues", "runs.inbox"]
    assert bus.queues.tick(State(bus.queues.tables), NOW + 5_000) == []


def test_a_command_under_another_key_is_bad_input() -> None:
    bus = Bus(QueueLimits(concurrency=1))
    (enter,) = [e.value for e in bus.admit("k1") if isinstance(e.value, EnterQueue)]
    with pytest.raises(WireError, match="not its queue"):
        bus.queues.handle(bus.table, Incoming("queues.commands", 0, 9, "other", enter, NOW), NOW)
    with pytest.raises(WireError, match="not a queue command"):
        bus.queues.handle(bus.table, Incoming("queues.commands", 0, 9, CAP, enter.start, NOW), NOW)
