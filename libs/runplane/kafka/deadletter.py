"""Dead letters: what a service does with a record it cannot decode or validate.

Nothing is dropped and nothing crashes a service: the record is written to ``deadletter``
(key = the original key) with the reason and its source coordinates, the input offset moves
on, and a metric counts it. The processor writes the dead letter inside the same transaction
that commits the input offset, so a record is dead-lettered exactly once.
"""

from __future__ import annotations

import time
from typing import Protocol

from runplane.wire import DeadLetter

# A reason is for a human reading the dead-letter topic; an unbounded one (a huge validation
# error echoing the payload) would only duplicate the value we already carry.
MAX_REASON_CHARS = 2000


class SourceMessage(Protocol):
    """The parts of a confluent-kafka ``Message`` a dead letter needs."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def key(self) -> str | bytes | None: ...
    def value(self) -> str | bytes | None: ...


def _as_bytes(data: str | bytes | None) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    return data.encode("utf-8")


def dead_letter(
    msg: SourceMessage, reason: str, service: str, *, at_ms: int | None = None
) -> DeadLetter:
    """The DeadLetter record for ``msg`` (raw key and value kept byte for byte)."""
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 1] + "…"
    partition, offset = msg.partition(), msg.offset()
    return DeadLetter(
        source_topic=msg.topic() or "",
        partition=-1 if partition is None else partition,
        offset=-1 if offset is None else offset,
        service=service,
        reason=reason or "unspecified",
        key=_as_bytes(msg.key()),
        value=_as_bytes(msg.value()),
        at_ms=int(time.time() * 1000) if at_ms is None else at_ms,
    )
