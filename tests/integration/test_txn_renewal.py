"""A transactional producer whose handle breaks mid-transaction renews itself instead of exiting.

During a broker fault the coordinator can answer ``abort_transaction`` with INVALID_TXN_STATE
(seen in the chaos suite: admission exited on it). That error is neither fatal nor fenced: our
epoch is still ours, so a fresh handle under the same ``transactional.id`` recovers — its
``init_transactions`` bumps the epoch and aborts what the broken handle left open. The fault is
injected at the client call only; the broker, the transaction and the readers are real.
"""

from __future__ import annotations

import gc
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from runplane.config import Settings
from runplane.kafka.clients import transactional_producer_config
from runplane.kafka.txn import ErrorClass, TransactionalProducer, TxnFatal, classify
from tests.integration.test_kafka_basics import read_to_end


class _BreakableAbort:
    """The real librdkafka handle, except that ``abort_transaction`` can be made to answer
    INVALID_TXN_STATE as the coordinator does during a broker fault."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.real = Producer(config)
        self.broken = False

    def abort_transaction(self, timeout: float) -> None:
        if self.broken:
            raise KafkaException(KafkaError(KafkaError.INVALID_TXN_STATE, "injected"))
        self.real.abort_transaction(timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_a_broken_abort_renews_the_handle_and_nothing_half_written_is_seen(
    settings: Settings, topics: dict[str, str]
) -> None:
    topic = topics["deadletter"]
    handles: list[_BreakableAbort] = []

    def factory(config: dict[str, Any]) -> _BreakableAbort:
        handles.append(_BreakableAbort(config))
        return handles[-1]

    txid = f"{settings.topic_prefix}renew-{uuid.uuid4().hex[:6]}"
    producer = TransactionalProducer(
        transactional_producer_config(settings, txid), op_timeout_s=10, factory=factory
    )
    producer.init()
    producer.begin()
    producer.produce(topic, b"k", b"half-written", 0)
    producer._producer.flush(10)  # the record is on the broker, in the open transaction
    handles[0].broken = True

    producer.abort()  # not TxnFatal: renewed

    assert producer.renewals == 1 and len(handles) == 2 and not producer.in_transaction
    # The old handle is fenced: it can no longer commit what it left open.
    with pytest.raises(KafkaException) as fenced:
        handles[0].real.commit_transaction(10)
    assert classify(fenced.value.args[0]) in (ErrorClass.FATAL, ErrorClass.BROKEN)
    # The renewed handle goes on under the same id.
    producer.begin()
    producer.produce(topic, b"k", b"after-renewal", 0)
    producer.commit([], None)
    values = [m.value() for m in read_to_end(settings, topic)]
    assert values == [b"after-renewal"]


def test_a_renewal_that_cannot_init_is_fatal(settings: Settings, topics: dict[str, str]) -> None:
    config = transactional_producer_config(settings, f"{settings.topic_prefix}dead")
    producer = TransactionalProducer(config, op_timeout_s=5)
    producer.init()
    producer.begin()
    # The broker cannot be reached any more: the renewed handle's init cannot complete.
    producer._config["bootstrap.servers"] = "127.0.0.1:9"
    producer._config["transaction.timeout.ms"] = 2000
    producer._producer = _Unabortable(producer._producer)
    try:
        with pytest.raises(TxnFatal):
            producer.abort()
    finally:
        # The renewed handle would try the dead address for the rest of the session.
        producer._producer = None
        gc.collect()


class _Unabortable:
    def __init__(self, real: Any) -> None:
        self.real = real

    def abort_transaction(self, timeout: float) -> None:
        raise KafkaException(KafkaError(KafkaError.INVALID_TXN_STATE, "injected"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)
