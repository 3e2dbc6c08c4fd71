"""A zombie's late commit must land *before* the new owner rebuilds its state (review C1).

The previous owner B consumed a request, wrote its table row and sent its offsets while its
group generation was current, then stalled past the session timeout with the transaction
open. The coordinator accepts B's commit later (it checks the generation when offsets are
sent, not at commit). The new owner A takes its position from B's committed offset, so it
never sees B's input again: unless A's restore waited for B's transaction to end, A's table
lacks B's row for good — here, a second run admitted for one admission key.

B is driven with raw clients (exactly /tmp/rv/zombie.py's sequence), A is the real shared
processor; B commits two seconds after A has *started* restoring, so a restore that does not
wait reads the table before B's row exists.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from test_journal_service import inbox_wakes, produce_run, wait_audit
from test_processor import produce_requests, read_all, replies, running
from test_processor_support import GROUP, MiniAdmission

from runplane.config import Settings
from runplane.core import AgentRegistry, AgentSpec, Durability, Runtime, StepCtx, run_admitted
from runplane.kafka.clients import consumer_config, producer_config, transactional_producer_config
from runplane.kafka.partition import partition_for
from runplane.kafka.processor import Processor, ProcessorConfig
from runplane.kafka.txn import TransactionalProducer
from runplane.runs.read import read_audit
from runplane.serving.health import Probe
from runplane.wire import (
    AdmissionClaim,
    AdmissionOutcome,
    AdmissionRequest,
    DeadLetter,
    JournalRecord,
    RunStatus,
    Signal,
    StartRun,
    Verdict,
    encode,
    serde_for,
)
from services.executor.executor import Executor
from services.executor.settings import ExecutorSettings
from services.executor.topology import group_id as executor_group
from services.journal import topology as journal_topo
from services.journal.decide import AuditOut, JournalIn, PartitionState, on_journal
from services.journal.loop import AuditLoop
from services.journal.settings import JournalSettings
from tests.helpers.sample import sample_run
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

SERDE = serde_for(Settings())


def mini_config(settings: Settings) -> ProcessorConfig:
    return ProcessorConfig(
        service="mini", group_id=settings.topic(GROUP), inputs=("admission",), tick_ms=None
    )


class RestoreSignal(Probe):
    """Sets ``restoring`` when the processor starts restoring an assignment."""

    def __init__(self) -> None:
        super().__init__("test", 60.0, time.monotonic)
        self.restoring = threading.Event()

    def set_ready(self, ready: bool, reason: str = "") -> None:
        super().set_ready(ready, reason)
        if not ready and reason.startswith("restoring"):
            self.restoring.set()


def _take_one(consumer: Consumer) -> tuple[str, int, int, bytes]:
    """The first record the consumer gets: topic, partition, offset, value."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error() is not None:
            continue
        topic, partition, offset, value = msg.topic(), msg.partition(), msg.offset(), msg.value()
        assert topic is not None and partition is not None and offset is not None
        assert isinstance(value, bytes)
        return topic, partition, offset, value
    raise AssertionError("the zombie never got a record")


def _zombie_sends_offsets(settings: Settings, key: str) -> Producer:
    """B: consume the request, write its claim, send offsets, lose the partition. Returns
    B's producer with the transaction still open."""
    group = settings.topic(GROUP)
    consumer = Consumer(consumer_config(settings, group, **{"session.timeout.ms": 6000}))
    consumer.subscribe([settings.topic("admission")])
    topic, partition, offset, value = _take_one(consumer)
    req = SERDE.decode("admission", value)
    assert isinstance(req, AdmissionRequest)
    producer = Producer(transactional_producer_config(settings, f"zombie-{settings.instance_id}"))
    producer.init_transactions(60)
    producer.begin_transaction()
    claim = AdmissionClaim(
        admission_key=key,
        run_id="r-zombie-0",
        capability=req.capability,
        tenant=req.tenant,
        status=RunStatus.ADMITTED,
        admitted_ms=1,
        updated_ms=1,
    )
    claims = settings.topic("admission.claims")
    producer.produce(
        claims,
        key=key.encode(),
        value=SERDE.encode("admission.claims", claim),
        partition=partition_for(key, settings.partitions),
    )
    offsets = [TopicPartition(topic, partition, offset + 1)]
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
    producer.flush(10)
    consumer.close()  # B leaves the group (stand-in for a stall past session.timeout.ms)
    return producer


def test_restore_waits_for_a_zombie_transaction_that_already_sent_its_offsets(
    settings: Settings,
) -> None:
    key = "zk-1"
    produce_requests(settings, [key])
    zombie = _zombie_sends_offsets(settings, key)
    probe = RestoreSignal()
    outcome: list[str] = []

    def late_commit() -> None:
        # The zombie wakes while A restores: its commit still succeeds.
        if not probe.restoring.wait(60):
            outcome.append("A never restored")
            return
        time.sleep(2.0)
        zombie.commit_transaction(30)
        outcome.append("committed")

    committer = threading.Thread(target=late_commit, daemon=True)
    committer.start()
    processor = Processor(settings, mini_config(settings), MiniAdmission("a"), probe=probe)
    with running(processor):
        wait_for(processor.ready.is_set, what="A restored", timeout_s=60)
        committer.join(60)
        assert outcome == ["committed"]
        # The zombie's claim is committed, and its request offset with it.
        assert [k for k, _ in read_all(settings, "admission.claims")] == [key]
        produce_requests(settings, [key])  # the emitter retries: must be a duplicate
        wait_for(lambda: len(replies(settings)) >= 1, what="A's reply")
        time.sleep(1.0)
        got = replies(settings)
    assert [(r.outcome, r.run_id) for r in got] == [(AdmissionOutcome.DUPLICATE, "r-zombie-0")]


# --- the journal service's audit loop ------------------------------------------------------


def _journal_zombie_audits_seq0(settings: Settings, first: JournalRecord) -> Producer:
    """B (journal group): read seq 0, publish its audit record, send offsets, leave."""
    group = settings.topic_prefix + journal_topo.GROUP_ID
    consumer = Consumer(consumer_config(settings, group, **{"session.timeout.ms": 6000}))
    consumer.subscribe([settings.topic("journal")])
    topic, partition, offset, _ = _take_one(consumer)
    state = PartitionState(partition)
    outs = on_journal(state, JournalIn(first, partition, offset), 1)
    audits = [o for o in outs if isinstance(o, AuditOut)]
    assert [a.record.seq for a in audits] == [0]
    producer = Producer(transactional_producer_config(settings, f"jzombie-{settings.instance_id}"))
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(
        settings.topic("audit"),
        key=first.session_id.encode(),
        value=encode(audits[0].record),
        partition=partition,
    )
    offsets = [TopicPartition(topic, partition, offset + 1)]
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
    producer.flush(10)
    consumer.close()
    return producer


def test_audit_loop_waits_for_a_zombie_transaction_before_restoring_chain_tips(
    settings: Settings,
) -> None:
    run = f"r-jz-{uuid.uuid4().hex[:6]}"
    records, results = sample_run(run, calls=2)
    produce_run(settings, records[:1], {})
    zombie = _journal_zombie_audits_seq0(settings, records[0])
    probe = RestoreSignal()
    outcome: list[str] = []

    def late_commit() -> None:
        if not probe.restoring.wait(60):
            outcome.append("A never restored")
            return
        time.sleep(2.0)
        zombie.commit_transaction(30)
        outcome.append("committed")

    committer = threading.Thread(target=late_commit, daemon=True)
    committer.start()
    js = JournalSettings(base=settings, body_grace_ms=1500, max_hold_ms=4500, index=False)
    loop = AuditLoop(js, probe=probe)
    stop = threading.Event()
    errors: list[BaseException] = []

    def body() -> None:
        try:
            loop.run(stop)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    try:
        assert loop.ready.wait(60), "journal service never got its partitions"
        committer.join(60)
        assert outcome == ["committed"]
        produce_run(settings, records[1:], results)
        audits = wait_audit(settings, run, len(records))
        time.sleep(1.0)
        audits = read_audit(settings, run)
    finally:
        stop.set()
        t.join(60)
    assert not errors, errors
    assert [a.seq for a in audits] == list(range(len(records)))
    # Without waiting, seq 1 met an empty tip: a false gap, BROKEN and a quarantine Wake.
    assert {a.verdict for a in audits} == {Verdict.VERIFIED}
    assert inbox_wakes(settings) == []


# --- the executor ------------------------------------------------------------------------


async def _waits_for_go(ctx: StepCtx, input: Any) -> Any:
    return await ctx.wait_signal("go")


def test_executor_waits_for_a_zombie_transaction_before_restoring_its_runs(
    settings: Settings,
) -> None:
    """B delivered the signal that completed the run and sent its offsets, then stalled. A
    must restore the *completed* run: restoring the parked one, it would serve the next signal
    to it and write a second continuation of the chain after B's (two writers of one chain)."""
    registry = AgentRegistry()
    spec = registry.register(
        AgentSpec("waits", _waits_for_go, Durability.REPLAYABLE, None, {}), lint=False
    )
    sid = f"r-ez-{uuid.uuid4().hex[:6]}"
    admitted = run_admitted(
        sid,
        capability="waits",
        admission_key=f"k-{sid}",
        tenant="default",
        initiator="u",
        input_json="{}",
        now_ms=1,
    )
    start = StartRun(
        session_id=sid,
        capability="waits",
        input_json="{}",
        case_id=None,
        admission_key=f"k-{sid}",
        tenant="default",
        initiator="u",
        admitted_hash=admitted.hash,
        admitted_ms=1,
    )
    rt, parked = Runtime.start(spec, start, now_ms=2)
    p = partition_for(sid, settings.partitions)
    setup = TransactionalProducer(
        transactional_producer_config(settings, f"setup-{settings.instance_id}")
    )
    setup.init()
    setup.begin()
    for rec in (admitted, *parked.records):
        setup.produce(settings.topic("journal"), sid.encode(), encode(rec), p)
    setup.produce(settings.topic("sessions"), sid.encode(), encode(parked.snapshot), p)
    setup.commit([], None)
    signal = Signal(session_id=sid, name="go", payload_json="1", sent_ms=3)
    plain = Producer(producer_config(settings))
    plain.produce(settings.topic("runs.inbox"), key=sid.encode(), value=encode(signal))
    plain.flush(10)

    # B: the signal completes the run; records and snapshot produced, offsets sent, B stalls.
    consumer = Consumer(
        consumer_config(settings, executor_group(settings), **{"session.timeout.ms": 6000})
    )
    consumer.subscribe([settings.topic("runs.inbox")])
    topic, partition, offset, _ = _take_one(consumer)
    done = rt.deliver(signal, now_ms=4)
    assert done.end is RunStatus.COMPLETED
    zombie = Producer(transactional_producer_config(settings, f"ezombie-{settings.instance_id}"))
    zombie.init_transactions(60)
    zombie.begin_transaction()
    for rec in done.records:
        zombie.produce(settings.topic("journal"), key=sid.encode(), value=encode(rec), partition=p)
    zombie.produce(
        settings.topic("sessions"), key=sid.encode(), value=encode(done.snapshot), partition=p
    )
    zombie.send_offsets_to_transaction(
        [TopicPartition(topic, partition, offset + 1)], consumer.consumer_group_metadata(), 30
    )
    zombie.flush(10)
    consumer.close()

    probe = RestoreSignal()
    outcome: list[str] = []

    def late_commit() -> None:
        if not probe.restoring.wait(60):
            outcome.append("A never restored")
            return
        time.sleep(2.0)
        zombie.commit_transaction(30)
        outcome.append("committed")

    committer = threading.Thread(target=late_commit, daemon=True)
    committer.start()
    executor = Executor(
        ExecutorSettings(base=settings), registry=registry, tools={}, providers={}, probe=probe
    )
    stop = threading.Event()
    errors: list[BaseException] = []

    def body() -> None:
        try:
            asyncio.run(executor.run(stop))
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    try:
        assert executor.ready.wait(60), "the executor never got its partitions"
        committer.join(60)
        assert outcome == ["committed"]
        again = Signal(session_id=sid, name="go", payload_json="2", sent_ms=5)
        plain.produce(settings.topic("runs.inbox"), key=sid.encode(), value=encode(again))
        plain.flush(10)
        written = 1 + len(parked.records) + len(done.records)

        def answered() -> bool:  # refused (right) or served by a second writer (wrong)
            if any(isinstance(r, DeadLetter) for _, r in read_all(settings, "deadletter")):
                return True
            return sum(1 for k, _ in read_all(settings, "journal") if k == sid) > written

        wait_for(answered, what="the second signal answered", timeout_s=45)
        time.sleep(1.0)
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors
    seqs = [
        r.seq for k, r in read_all(settings, "journal") if k == sid and isinstance(r, JournalRecord)
    ]
    assert seqs == list(range(len(seqs)))  # one writer: no seq written twice
    (letter,) = [r for _, r in read_all(settings, "deadletter") if isinstance(r, DeadLetter)]
    assert "already ended" in letter.reason
