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

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from test_journal_service import inbox_wakes, produce_run, wait_audit
from test_processor import produce_requests, read_all, replies, running, wait_for
from test_processor_support import GROUP, MiniAdmission

from runplane.config import Settings
from runplane.kafka.clients import consumer_config, transactional_producer_config
from runplane.kafka.partition import partition_for
from runplane.kafka.processor import Processor, ProcessorConfig
from runplane.runs import read_audit
from runplane.service import Probe
from runplane.wire import (
    AdmissionClaim,
    AdmissionOutcome,
    AdmissionRequest,
    JournalRecord,
    RunStatus,
    Serde,
    Verdict,
    encode,
)
from services.journal import topology as journal_topo
from services.journal.handler import AuditOut, JournalIn, PartitionState, on_journal
from services.journal.loop import AuditLoop
from services.journal.sample import sample_run
from services.journal.settings import JournalSettings

pytestmark = pytest.mark.integration

SERDE = Serde.from_settings(Settings())


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
        wait_for("A restored", processor.ready.is_set, timeout=60)
        committer.join(60)
        assert outcome == ["committed"]
        # The zombie's claim is committed, and its request offset with it.
        assert [k for k, _ in read_all(settings, "admission.claims")] == [key]
        produce_requests(settings, [key])  # the emitter retries: must be a duplicate
        wait_for("A's reply", lambda: len(replies(settings)) >= 1)
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
