"""What a pure handler is written against: ``Incoming`` in, ``Emit`` out, ``State`` to read.

This module imports no Kafka or HTTP client (confluent-kafka, uvicorn), so a handler's unit
tests and property tests load only the handler and the wire types. The processor that runs
a handler on the broker is ``runplane.kafka.processor``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from runplane.wire import Record

__all__ = ["Clock", "Emit", "Handler", "Incoming", "State", "SystemClock", "Ticks"]


class Clock(Protocol):
    """Injected time, so tests never sleep."""

    def now_ms(self) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Incoming:
    """One decoded input record. ``value`` is None for a tombstone."""

    topic: str  # logical name, e.g. "admission"
    partition: int
    offset: int
    key: str
    value: Record | None
    timestamp_ms: int
    # The record as it arrived, for a handler that checks a signature over its exact bytes
    # (admission). Not part of equality: two deliveries of one record are the same input.
    headers: tuple[tuple[str, bytes | None], ...] = field(default=(), compare=False)
    raw_value: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Emit:
    """One output record. ``value=None`` is a tombstone.

    Produced to ``partition_for(partition_key or key, partitions)`` (murmur2, like Java), so a
    table row lands on the partition of the input it is co-partitioned with.
    """

    topic: str  # logical name
    key: str
    value: Record | None
    partition_key: str | None = None
    # A W3C traceparent this record continues instead of the handled record's: a run's
    # context stored with what it waited on (an OpenTask's), so an answer joins the run's trace.
    trace_parent: str | None = None

    def __post_init__(self) -> None:
        if not self.topic:
            raise ValueError("Emit.topic must not be empty")
        if not self.key:
            raise ValueError("Emit.key must not be empty")


class State:
    """The handler's read view of its tables: committed rows with the batch's overlay on top."""

    def __init__(self, tables: Mapping[str, str]) -> None:
        self._committed: dict[str, dict[str, Record]] = {t: {} for t in tables}
        self._by_partition: dict[str, dict[int, set[str]]] = {t: {} for t in tables}
        self._overlay: dict[str, dict[str, tuple[int, Record | None]]] = {t: {} for t in tables}
        self.assigned: frozenset[int] = frozenset()

    def get(self, table: str, key: str) -> Record | None:
        overlay = self._overlay[table]
        if key in overlay:
            return overlay[key][1]
        return self._committed[table].get(key)

    def __contains__(self, item: tuple[str, str]) -> bool:
        return self.get(*item) is not None

    def items(self, table: str) -> Iterator[tuple[str, Record]]:
        overlay = self._overlay[table]
        for key, value in self._committed[table].items():
            if key not in overlay:
                yield key, value
        for key, (_, maybe) in overlay.items():
            if maybe is not None:
                yield key, maybe

    def size(self, table: str) -> int:
        return sum(1 for _ in self.items(table))

    # -- the processor's side ----------------------------------------------------------------

    def _stage(self, table: str, partition: int, key: str, value: Record | None) -> None:
        self._overlay[table][key] = (partition, value)

    def _commit(self) -> None:
        for table, overlay in self._overlay.items():
            rows, index = self._committed[table], self._by_partition[table]
            for key, (partition, value) in overlay.items():
                if value is None:
                    rows.pop(key, None)
                    index.get(partition, set()).discard(key)
                else:
                    rows[key] = value
                    index.setdefault(partition, set()).add(key)
            overlay.clear()

    def _discard(self) -> None:
        for overlay in self._overlay.values():
            overlay.clear()

    def _load(self, table: str, partition: int, rows: Mapping[str, Record]) -> None:
        self._drop(table, partition)
        self._committed[table].update(rows)
        self._by_partition[table][partition] = set(rows)

    def _drop(self, table: str, partition: int) -> None:
        rows = self._committed[table]
        for key in self._by_partition[table].pop(partition, set()):
            rows.pop(key, None)

    def _committed_size(self, table: str) -> int:
        return len(self._committed[table])


class Handler(Protocol):
    """What a service supplies. ``handle`` must be pure: same state + message → same emits.

    Optional methods, called when present: ``tick(state, now_ms) -> Sequence[Emit]``
    (periodic; emits committed in their own transaction), ``on_assign(partitions)``,
    ``on_revoke(partitions)``, ``on_abort()`` (drop in-memory work of an aborted batch) and
    ``on_undecodable(topic, key, data, error, now_ms) -> Sequence[Emit]`` (answer a record
    that fails validation, e.g. with a refusal; an empty answer means: dead-letter it) and
    ``answer_dead_letter(topic, key, data, error, now_ms) -> Sequence[Emit]`` (emits produced
    besides the dead letter of such a record, e.g. a refusal its sender can read).
    """

    tables: Mapping[str, str]  # table name -> logical compacted topic

    def handle(self, state: State, msg: Incoming, now_ms: int) -> Sequence[Emit]: ...


@runtime_checkable
class Ticks(Protocol):
    """A handler with periodic work: ``tick``'s emits commit in their own transaction."""

    def tick(self, state: State, now_ms: int) -> Sequence[Emit]: ...
