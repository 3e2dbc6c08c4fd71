"""Admission's processor handler: the claims table in, :func:`decide` in the middle, emits out.

Pure like ``decide.py`` (which holds every rule); this adapts it to the shared transactional
processor's ``Handler``: it finds the claim of the record's (tenant, key) in the restored
``claims`` table (``decide.find_claim``), checks the
record's signature (``identity.py``) and remembers a refused one's as a row of the table
(tombstoned by ``tick`` once its window has passed), hands the decision to the metrics observer, and turns
``outputs(decision)`` — plus the dead letter of an identity refusal — into ``Emit``s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from runplane.core.limits import DEFAULT_MAX_INPUT_BYTES
from runplane.errors import WireError
from runplane.kafka.handler import Emit, Incoming, State
from runplane.wire import (
    AdmissionRequest,
    DeadLetter,
    Record,
    RefusedSignature,
    RunStatusUpdate,
    writer_record_name,
)
from services.admission.decide import (
    CapabilitySpec,
    Decision,
    Position,
    Refusal,
    Refused,
    decide,
    find_claim,
    outputs,
    partition_key,
    read_request_leniently,
    refusal,
    refuse_unreadable,
)
from services.admission.identity import DEAD_LETTERED, Authentication, Lookup, refusal_of

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
        # The refused signatures of the owned partitions, to tombstone past their window
        # (rebuilt from the restored table after a rebalance).
        self._expiring: dict[str, RefusedSignature] = {}
        self._rescan = False

    def handle(self, state: State, msg: Incoming, now_ms: int) -> Sequence[Emit]:
        position = Position(msg.topic, msg.partition, msg.offset)
        value = msg.value

        def table(row: str) -> Record | None:
            return state.get("claims", row)

        tenant = value.tenant if isinstance(value, AdmissionRequest | RunStatusUpdate) else None
        found = find_claim(table, tenant, msg.key)
        decision = decide(
            None if found is None else found[1],
            msg.key,
            position,
            msg.value,
            self._capabilities,
            now_ms,
            max_input_bytes=self._max_input_bytes,
            verification=self._auth.check(msg, table),
            allow_unsigned=self._auth.allow_unsigned,
            row_key=None if found is None else found[0],
        )
        if self._observe is not None:
            self._observe(decision, msg, now_ms)
        emits = _emits(decision)
        remembered = self._remembered(decision, msg, table)
        if remembered is not None:
            emits.append(remembered)
        letter = dead_letter_for(decision, msg, now_ms, self._topic_prefix)
        return emits if letter is None else [*emits, letter]

    def _remembered(self, decision: Decision, msg: Incoming, table: Lookup) -> Emit | None:
        """Refused once, refused for the window: the refused request's signature as a row of
        the claims table, committed with the refusal, so the same signed bytes produced again
        (after their key was registered, say) are refused too — after a restart or on a new
        owner of the partition as well, since the table is restored."""
        if not isinstance(decision, Refused):
            return None
        refused = refusal_of(msg.key, msg.headers, decision.code.value, msg.timestamp_ms)
        if refused is None or isinstance(table(refused[0]), RefusedSignature):
            return None  # unsigned, or remembered already (this is the replay)
        row, record = refused
        self._expiring[row] = record
        return Emit("admission.claims", row, record, partition_key=msg.key)

    def tick(self, state: State, now_ms: int) -> Sequence[Emit]:
        """Tombstone the refused signatures whose window has passed (twice over, for clock
        skew between this host and the broker that stamps the records): by then the window
        check refuses their bytes anyway."""
        if self._rescan:  # after a rebalance: what the restored table holds
            self._expiring = {
                k: v for k, v in state.items("claims") if isinstance(v, RefusedSignature)
            }
            self._rescan = False
        horizon = now_ms - 2 * self._auth.window_ms
        done = [row for row, r in self._expiring.items() if r.signed_ms < horizon]
        emits = []
        for row in done:
            record = self._expiring.pop(row)
            emits.append(Emit("admission.claims", row, None, partition_key=record.admission_key))
        return emits

    def on_assign(self, partitions: Sequence[int]) -> None:
        self._rescan = True

    def on_revoke(self, partitions: Sequence[int]) -> None:
        self._rescan = True  # never tombstone a row of a partition another instance owns
        self._expiring = {}

    def on_undecodable(
        self, topic: str, key: str, data: bytes, error: WireError, now_ms: int
    ) -> Sequence[Emit]:
        decision = refuse_unreadable(key, read_request_leniently(data), str(error), now_ms)
        if decision is None:
            return []
        if self._observe is not None:
            self._observe(decision, None, now_ms)
        return _emits(decision)

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
        return _emits(decision)


def _emits(decision: Decision) -> list[Emit]:
    return [Emit(t, k, r, partition_key=partition_key(r)) for t, k, r in outputs(decision)]
