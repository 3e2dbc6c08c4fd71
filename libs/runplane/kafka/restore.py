"""Rebuild a state table from its compacted topic: the given partitions, to their end.

"The end" is the end a ``read_committed`` reader can see — the last stable offset, not the
high watermark (an open or aborted transaction's records and its markers sit between the
two). librdkafka signals it with a PARTITION_EOF event when ``enable.partition.eof`` is on,
and under read_committed that event fires at the last stable offset; so we read until every
partition has reported EOF, and never loop "until position >= high watermark", which would
spin forever behind an open transaction or a trailing commit marker.

Compaction keeps at least the last value per key but readers may still see several versions:
last write in offset order wins, and a tombstone (value None) deletes the key. A row that
cannot be decoded deletes its key too (counted in ``Restored.unreadable``): keeping the older
row instead would revive a superseded state (an old ``next_seq``/``last_hash`` forks a chain).

A table whose rows must not change meaning under one key (``results``: one call's result per
slot) passes ``same``: a row that is not ``same`` as the row it replaces is a conflict, its key
counted in ``Restored.conflicts`` — seen only while compaction has not yet dropped the older
row, so it is a flag for the caller, not the guarantee (the journal's chain verifier is that).

Before restoring the partitions a new owner was assigned, call :func:`await_previous_owner`:
the previous owner may still have a transaction open that carries both table rows and the
input offsets, and a restore that reads before it ends misses rows the committed offsets
already account for (see its docstring).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from runplane.config import Settings
from runplane.errors import RetryableError, RunplaneError, WireError
from runplane.kafka.clients import consumer_config

log = logging.getLogger(__name__)

V = TypeVar("V")

# How often a long wait (a restore, a previous owner's transaction) looks at the stop event.
STOP_CHECK_S = 1.0


class Stopping(RunplaneError):
    """The service is stopping: a restore or wait in a rebalance callback gave up for it.

    Raised out of the callback (and so out of the consumer's poll): the loop catches it and
    shuts down cleanly, exit 0. The partitions are void for us; their next owner restores."""


class StopFlag(Protocol):
    def is_set(self) -> bool: ...


@dataclass
class Restored(Generic[V]):
    """A restored table: key -> value per partition, plus what was skipped and why."""

    partitions: dict[int, dict[str, V]] = field(default_factory=dict)
    records_read: int = 0
    skipped: int = 0
    # Keys whose newest row could not be decoded: dropped from the table, not reverted to an
    # older row. The caller decides what an unreadable key means (log, quarantine, alert).
    unreadable: set[str] = field(default_factory=set)
    # Keys a later row replaced with one not ``same`` as it (``Restorer.restore``'s ``same``).
    conflicts: set[str] = field(default_factory=set)

    def merged(self) -> dict[str, V]:
        out: dict[str, V] = {}
        for rows in self.partitions.values():
            out.update(rows)
        return out


class Restorer:
    """Reads compacted topics to the end with one reusable, group-less consumer."""

    def __init__(self, settings: Settings, *, timeout_s: float = 180.0) -> None:
        # A group id is required by librdkafka even for assign(); nothing is ever committed.
        config = consumer_config(
            settings,
            f"runplane-restore-{uuid.uuid4().hex[:12]}",
            **{"enable.partition.eof": True, "fetch.wait.max.ms": 50},
        )
        self._consumer = Consumer(config)
        self._timeout_s = timeout_s

    def restore(
        self,
        topic: str,
        partitions: Iterable[int],
        decode: Callable[[bytes], V],
        *,
        deadline: float | None = None,
        stop: StopFlag | None = None,
        same: Callable[[V, V], bool] | None = None,
    ) -> Restored[V]:
        """Read ``partitions`` of ``topic`` (full name) from the beginning to the end.

        Records that carry no UTF-8 key are skipped and counted; a row that fails ``decode``
        (``WireError``) deletes its key (see the module docstring). Raises ``RetryableError``
        when the end is not reached by ``deadline`` (``time.monotonic()``; default: the
        restorer's timeout from now), e.g. another producer's transaction is still open past
        its ``transaction.timeout.ms``. Pass one deadline to every restore of one assignment
        so that all of them together stay under ``max.poll.interval.ms``. Raises
        ``Stopping`` as soon as ``stop`` is set. ``same(old, new)``: whether a row may replace
        the key's row (a conflict is counted, see the module docstring); the newest row wins.
        """
        wanted = sorted(set(partitions))
        result: Restored[V] = Restored({p: {} for p in wanted})

        def apply(partition: int, key: str | bytes | None, value: str | bytes | None) -> None:
            self._apply(result, partition, key, value, decode, same)

        self.read(topic, wanted, apply, deadline=deadline, stop=stop)
        return result

    def read(
        self,
        topic: str,
        partitions: Iterable[int],
        visit: Callable[[int, str | bytes | None, str | bytes | None], None],
        *,
        until: Mapping[int, int] | None = None,
        deadline: float | None = None,
        stop: StopFlag | None = None,
    ) -> None:
        """Hand every message of ``partitions`` of ``topic`` to ``visit(partition, key,
        value)`` in offset order, from the beginning to the end — or, for a partition in
        ``until``, up to (not including) that offset: a log read as far as a consumer group's
        committed position, not a table (the journal service's slot states, folded from
        ``journal`` up to what it has audited). Deadline and stop as for ``restore``."""
        wanted = sorted(set(partitions))
        bound = dict(until or {})
        pending = {p for p in wanted if bound.get(p, 1) > 0}
        if not pending:
            return
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        if deadline is None:
            deadline = time.monotonic() + self._timeout_s
        try:
            while pending:
                if stop is not None and stop.is_set():
                    raise Stopping(f"stopped while restoring {topic}")
                if time.monotonic() > deadline:
                    raise RetryableError(
                        f"restore of {topic} partitions {sorted(pending)} did not reach the end "
                        "before the restore deadline",
                        retry_after=1.0,
                    )
                for msg in self._consumer.consume(num_messages=1000, timeout=0.2):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            pending.discard(msg.partition() or 0)
                            continue
                        if err.fatal():
                            raise KafkaException(err)
                        log.warning("restore consumer error on %s: %s", topic, err.str())
                        continue
                    p, offset = msg.partition() or 0, msg.offset() or 0
                    end = bound.get(p)
                    if p not in pending or (end is not None and offset >= end):
                        pending.discard(p)
                        continue
                    visit(p, msg.key(), msg.value())
                    if end is not None and offset + 1 >= end:
                        pending.discard(p)
        finally:
            self._consumer.unassign()

    @staticmethod
    def _apply(
        result: Restored[V],
        partition: int,
        raw_key: str | bytes | None,
        raw_value: str | bytes | None,
        decode: Callable[[bytes], V],
        same: Callable[[V, V], bool] | None = None,
    ) -> None:
        result.records_read += 1
        rows = result.partitions[partition]
        try:
            key = raw_key.decode("utf-8") if isinstance(raw_key, bytes) else raw_key
        except UnicodeDecodeError:
            key = None
        if key is None:
            result.skipped += 1
            return
        if raw_value is None:
            rows.pop(key, None)
            result.unreadable.discard(key)
            return
        try:
            data = raw_value if isinstance(raw_value, bytes) else raw_value.encode()
            row = decode(data)
            held = rows.get(key)
            if same is not None and held is not None and not same(held, row):
                result.conflicts.add(key)
            rows[key] = row
            result.unreadable.discard(key)
        except WireError as exc:
            # The newest row wins even when nobody can read it: an older row left in place
            # would be a state the writer had already moved past.
            rows.pop(key, None)
            result.unreadable.add(key)
            result.skipped += 1
            log.warning(
                "dropping key with undecodable table row", extra={"key": key, "reason": str(exc)}
            )

    def close(self) -> None:
        self._consumer.close()


def await_previous_owner(
    consumer: Consumer,
    partitions: Sequence[TopicPartition],
    *,
    timeout_s: float,
    stop: StopFlag | None = None,
) -> list[TopicPartition]:
    """Wait until no transaction of a previous owner is pending on ``partitions``' offsets.

    Call it first in every ``on_assign``, before restoring any state. The previous owner of
    a partition may have sent its offsets in a transaction that is still open (it stalled
    past the session timeout): its table rows are then held back from our restore by the last
    stable offset, yet once it commits — the coordinator checks the group generation when
    offsets are *sent*, not at commit — our position comes from its offsets, so we would
    never see its input and our state would lack its outputs (a zombie commit).

    Under ``isolation.level=read_committed`` librdkafka fetches committed offsets with
    ``require_stable`` (KIP-447): the broker answers UNSTABLE_OFFSET_COMMIT while such a
    transaction is open and the client retries, so this returns only once it has committed
    or aborted (at most its ``transaction.timeout.ms``). Kafka Streams orders it the same
    way. Returns the committed offsets; raises ``RetryableError`` when they cannot be read
    within ``timeout_s`` (restart and try again from a fresh assignment), ``Stopping`` once
    ``stop`` is set (asked again every second, so a stopping service does not wait out a
    zombie's transaction).
    """
    if not partitions:
        return []
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            committed = consumer.committed(
                list(partitions), timeout=max(0.001, min(left, STOP_CHECK_S))
            )
            break
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            timed_out = isinstance(err, KafkaError) and err.code() == KafkaError._TIMED_OUT
            if stop is not None and stop.is_set():
                raise Stopping("stopped while waiting for the previous owner") from exc
            if timed_out and time.monotonic() < deadline:
                continue
            raise RetryableError(
                f"committed offsets of {len(partitions)} partitions not stable within "
                f"{timeout_s:.1f}s (a previous owner's transaction is still open?): {exc}",
                retry_after=1.0,
            ) from exc
    failed = [tp for tp in committed if tp.error is not None]
    if failed:
        raise RetryableError(
            f"committed offsets unreadable for {[(tp.topic, tp.partition) for tp in failed]}: "
            f"{failed[0].error}",
            retry_after=1.0,
        )
    return list(committed)


def restore_table(
    settings: Settings,
    topic: str,
    partitions: Iterable[int],
    decode: Callable[[bytes], V],
    *,
    timeout_s: float = 180.0,
) -> dict[str, V]:
    """One-shot: the table in ``partitions`` of ``topic`` (full name), last write wins."""
    restorer = Restorer(settings, timeout_s=timeout_s)
    try:
        return restorer.restore(topic, partitions, decode).merged()
    finally:
        restorer.close()
