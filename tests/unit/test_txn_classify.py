"""How the transactional producer answers each kind of librdkafka error (its typed flags)."""

from __future__ import annotations

from confluent_kafka import KafkaError

from runplane.kafka.txn import ErrorClass, TxnAbortable, classify


def test_neither_flag_means_broken_not_fatal() -> None:
    assert classify(KafkaError(KafkaError.INVALID_TXN_STATE)) is ErrorClass.BROKEN
    assert classify(KafkaError(KafkaError.INVALID_TXN_STATE, fatal=True)) is ErrorClass.FATAL
    assert classify(KafkaError(KafkaError.PRODUCER_FENCED)) is ErrorClass.FATAL
    assert (
        classify(KafkaError(KafkaError._TIMED_OUT, txn_requires_abort=True)) is ErrorClass.ABORTABLE
    )


def test_txn_abortable_carries_broken() -> None:
    assert TxnAbortable("x", broken=True).broken and not TxnAbortable("x").broken
