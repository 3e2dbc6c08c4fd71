"""Admission's processor handler: the claims table in, :func:`decide` in the middle, emits out.

Pure like ``decide.py`` (which holds every rule); this adapts it to the shared transactional
processor's ``Handler``: it reads the claim from the restored ``claims`` table, checks the
record's signature (``identity.py``), hands the decision to the metrics observer, and turns
``outputs(decision)`` — plus the dead letter of an identity refusal — into ``Emit``s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from runplane.errors import WireError
from runplane.kafka.handler import Emit, Incoming, State
from runplane.wire import AdmissionRequest, DeadLetter, writer_record_name
from services.admission.decide import (
    DEFAULT_MAX_INPUT_BYTES,
    CapabilitySpec,
    Decision,
    Position,
    Refusal,
    Refused,
    decide,
    outputs,
    read_request_leniently,
    refusal,
    refuse_unreadable,
)
from services.admission.identity import DEAD_LETTERED, Authentication

__all__ = ["AdmissionHandler", "Observer", "dead_letter_for", "refuse_undecodable"]

Observer = Callable[[Decision, Incoming | None, int], None]


def dead_letter_for(
    decision: Decision, msg: Incoming, now_ms: int, topic_prefix: str = ""
) -> Emit | None:
    """The dead letter of an identity refusal (the reply alone goes only to the emitter).

    ``source_topic`` is the full Kafka topic name, as in every other dead letter."""
    if not isinstance(decision, Refused) or decision.code.value not in DEAD_LETTERED:
        return None
    record = DeadLetter(
        source_topic=f"{topic_prefix}{msg.topic}",
        partition=msg.partition,
        offset=msg.offset,
        service="admission",
        reason=f"{decision.code.value}: {decision.reply.reason}",
        key=msg.key.encode("utf-8"),
        value=msg.raw_value,
        at_ms=now_ms,
    )
    return Emit("deadletter", msg.key, record)


def refuse_undecodable(key: str, data: bytes, error: str, now_ms: int) -> Refused | None:
    """The refusal of a record on ``admission`` that does not decode at all, sent besides its
    dead letter: an emitter may not read ``deadletter``, so without it it would never learn
    why. Not for a record naming another type admission reads (a RunStatusUpdate's key is
    a run's admission key, not a request waiting for an answer)."""
    name = writer_record_name(data)
    if name is not None and name != AdmissionRequest.avro_name:
        return None
    return refusal(key, Refusal.BAD_REQUEST, f"undecodable: {error}", now_ms)


class AdmissionHandler:
    """The processor's handler: the claims table in, ``decide`` in the middle, emits out."""

    tables: Mapping[str, str] = {"claims": "admission.claims"}

    def __init__(
        self,
        capabilities: Mapping[str, CapabilitySpec],
        *,
        max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES,
        observe: Observer | None = None,
        auth: Authentication | None = None,
        topic_prefix: str = "",
    ) -> None:
        self._topic_prefix = topic_prefix  # dead letters name the full topic
        self._capabilities = dict(capabilities)
        self._max_input_bytes = max_input_bytes
        self._observe = observe
        self._auth = auth if auth is not None else Authentication()

    def handle(self, state: State, msg: Incoming, now_ms: int) -> Sequence[Emit]:
        position = Position(msg.topic, msg.partition, msg.offset)
        decision = decide(
            state.get("claims", msg.key),
            msg.key,
            position,
            msg.value,
            self._capabilities,
            now_ms,
            max_input_bytes=self._max_input_bytes,
            verification=self._auth.check(msg),
            allow_unsigned=self._auth.allow_unsigned,
        )
        if self._observe is not None:
            self._observe(decision, msg, now_ms)
        emits = [Emit(topic, key, record) for topic, key, record in outputs(decision)]
        letter = dead_letter_for(decision, msg, now_ms, self._topic_prefix)
        return emits if letter is None else [*emits, letter]

    def on_undecodable(
        self, topic: str, key: str, data: bytes, error: WireError, now_ms: int
    ) -> Sequence[Emit]:
        decision = refuse_unreadable(key, read_request_leniently(data), str(error), now_ms)
        if decision is None:
            return []
        if self._observe is not None:
            self._observe(decision, None, now_ms)
        return [Emit(t, k, r) for t, k, r in outputs(decision)]

    def answer_dead_letter(
        self, topic: str, key: str, data: bytes, error: WireError, now_ms: int
    ) -> Sequence[Emit]:
        decision = (
            refuse_undecodable(key, data, str(error), now_ms) if topic == "admission" else None
        )
        if decision is None:
            return []
        if self._observe is not None:
            self._observe(decision, None, now_ms)
        return [Emit(t, k, r) for t, k, r in outputs(decision)]
