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

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from test_processor import produce_requests, read_all, replies, running, wait_for
from test_processor_support import GROUP, MiniAdmission

from runplane.config import Settings
from runplane.kafka.clients import consumer_config, transactional_producer_config
from runplane.kafka.partition import partition_for
from runplane.kafka.processor import Processor, ProcessorConfig
from runplane.service import Probe
from runplane.wire import (
    AdmissionClaim,
    AdmissionOutcome,
    AdmissionRequest,
    RunStatus,
    Serde,
)

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


def _zombie_sends_offsets(settings: Settings, key: str) -> Producer:
    """B: consume the request, write its claim, send offsets, lose the partition. Returns
    B's producer with the transaction still open."""
    group = settings.topic(GROUP)
    consumer = Consumer(consumer_config(settings, group, **{"session.timeout.ms": 6000}))
    consumer.subscribe([settings.topic("admission")])
    msg = None
    deadline = time.monotonic() + 60
    while (msg is None or msg.error() is not None) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
    assert msg is not None and msg.error() is None, "B never got the request"
    req = SERDE.decode("admission", msg.value())
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
    offsets = [TopicPartition(msg.topic(), msg.partition(), msg.offset() + 1)]
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
