"""Every request gets an answer: admission refuses what it cannot decode, besides its dead letter."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import pytest

from runplane.config import Settings
from runplane.errors import WireError
from runplane.kafka.handler import Emit, Incoming
from runplane.kafka.processor import Processor
from runplane.wire import (
    AdmissionOutcome,
    AdmissionReply,
    DeadLetter,
    RunStatus,
    RunStatusUpdate,
    decode,
    encode,
    serde_for,
)
from services.admission.decide import Refusal, Refused
from services.admission.handler import AdmissionHandler, dead_letter_for, refuse_undecodable

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
# A request written with a schema admission does not know (not today's, not an earlier one).
UNKNOWN_WRITER = b"\xc3\x01" + bytes.fromhex("0123456789abcdef") + b"\x02k"


def _error(data: bytes) -> WireError:
    try:
        decode(data)
    except WireError as exc:
        return exc
    raise AssertionError("decoded")


@pytest.mark.parametrize("data", [UNKNOWN_WRITER, b"\x00\x01 not a record", b""])
def test_an_undecodable_request_is_refused_with_the_reason(data: bytes) -> None:
    emits = AdmissionHandler({}).answer_dead_letter("admission", "order-1", data, _error(data), NOW)
    [emit] = emits
    assert (emit.topic, emit.key) == ("admission.replies", "order-1")
    reply = emit.value
    assert isinstance(reply, AdmissionReply)
    assert reply.outcome is AdmissionOutcome.REFUSED and reply.run_id is None
    assert reply.reason == f"undecodable: {_error(data)}"


def test_the_refusal_names_the_unknown_fingerprint() -> None:
    decision = refuse_undecodable("k", UNKNOWN_WRITER, str(_error(UNKNOWN_WRITER)), NOW)
    assert isinstance(decision, Refused) and decision.code is Refusal.BAD_REQUEST
    assert "unknown schema fingerprint 0123456789abcdef" in (decision.reply.reason or "")


def test_a_broken_status_update_is_not_answered_to_the_emitter() -> None:
    # A RunStatusUpdate shares the topic and the key; its body broken, it is no request.
    update = RunStatusUpdate(
        admission_key="order-1", run_id="r-1", status=RunStatus.RUNNING, updated_ms=NOW
    )
    data = encode(update)[:-3]
    handler = AdmissionHandler({})
    assert handler.answer_dead_letter("admission", "order-1", data, _error(data), NOW) == []


def test_only_the_admission_topic_is_answered() -> None:
    handler = AdmissionHandler({})
    error = _error(UNKNOWN_WRITER)
    assert handler.answer_dead_letter("admission.claims", "k", UNKNOWN_WRITER, error, NOW) == []


class _Message:
    """The parts of a confluent-kafka Message the processor reads."""

    def __init__(self, topic: str, key: bytes, value: bytes) -> None:
        self._topic, self._key, self._value = topic, key, value

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return 3

    def offset(self) -> int:
        return 41

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, NOW)

    def headers(self) -> list[tuple[str, bytes]]:
        return []


def _handle(handler: Any, data: bytes) -> Sequence[Emit]:
    settings = Settings(topic_prefix="t9.")
    processor = Processor.__new__(Processor)  # only _handle's parts, no Kafka client
    processor._svc = "admission"
    processor._full_to_logical = {"t9.admission": "admission"}
    processor._handler = handler
    processor._serde = serde_for(settings)
    return processor._handle(_Message("t9.admission", b"order-1", data), NOW)  # type: ignore[arg-type]


def test_the_processor_sends_the_refusal_and_the_dead_letter() -> None:
    reply, letter = _handle(AdmissionHandler({}), UNKNOWN_WRITER)
    assert isinstance(reply.value, AdmissionReply) and reply.topic == "admission.replies"
    assert reply.value.outcome is AdmissionOutcome.REFUSED
    assert letter.topic == "deadletter" and isinstance(letter.value, DeadLetter)
    assert letter.value.source_topic == "t9.admission"
    assert (letter.value.partition, letter.value.offset) == (3, 41)
    assert letter.value.value == UNKNOWN_WRITER


def test_a_handler_without_an_answer_gets_the_dead_letter_alone() -> None:
    class Plain:
        tables: Mapping[str, str] = MappingProxyType({})

    [letter] = _handle(Plain(), UNKNOWN_WRITER)
    assert letter.topic == "deadletter"


def test_a_signature_refusals_dead_letter_names_the_full_topic() -> None:
    msg = Incoming("admission", 0, 7, "order-1", None, NOW, raw_value=b"v")
    decision = Refused(
        Refusal.UNAUTHENTICATED,
        AdmissionReply(
            admission_key="order-1",
            outcome=AdmissionOutcome.REFUSED,
            reason="unsigned request",
            replied_ms=NOW,
        ),
    )
    emit = dead_letter_for(decision, msg, NOW, "runplane.")
    assert emit is not None and isinstance(emit.value, DeadLetter)
    assert emit.value.source_topic == "runplane.admission"
    assert dataclasses.replace(emit.value, source_topic="x").reason.startswith("unauthenticated")
