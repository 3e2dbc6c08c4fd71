"""The shared transactional processor: consume → pure handler → produce, exactly once.

Delivery guarantee: for every input record, its outputs, the table changes they imply and the
input offset commit in **one** Kafka transaction, or none of them do. Readers use
``read_committed``, so nothing of an aborted or unfinished transaction is ever visible. A
record is handled again only after an abort or a crash, and then against the state restored
from what *was* committed, so the handler — being pure — produces the same outputs again.

The loop, per instance::

    subscribe(inputs) ── on assign: wait until the previous owner's transaction has ended
        │                 (committed offsets read with require_stable), then restore every
        │                 table's partitions from its compacted topic to the end (EOF = last
        │                 stable offset under read_committed), all under one deadline; serve
        ▼
    collect a batch (≤ batch_max records or batch_ms) ──► begin
        for each record: decode → handler.handle(state, msg, now) → Emits
                         (undecodable / WireError → a DeadLetter in the same transaction)
        send_offsets_to_transaction(positions, group metadata) ──► commit
        ├─ TxnAbortable → abort, rewind to the committed offsets, drop the overlay
        └─ TxnFatal     → raise ProcessorStopped: exit non-zero, the supervisor restarts us

Zombies are fenced twice: a restarted instance reuses the stable ``transactional.id``
(``<topic prefix><service>-<instance_id>``) so ``init_transactions`` aborts its predecessor's open
transaction, and the offsets are committed with the consumer group metadata (KIP-447), so an
instance that lost its partitions in a rebalance cannot *send offsets* in a late
transaction. A zombie that had already sent them before it stalled can still commit (the
coordinator does not check the generation at commit): that is why ``on_assign`` first waits
for every pending transaction on the assigned offsets to end before it reads any table
(``runplane.kafka.restore.await_previous_owner``). Tick transactions carry the current
positions and the group metadata too, so they are fenced and waited for the same way.

Tables are dicts keyed like their compacted topic, co-partitioned with the inputs: a table's
partition *p* is restored when input partition *p* is assigned and dropped when it is
revoked. An Emit to a table's topic updates an overlay the next record sees at once; commit
folds the overlay in, abort throws it away.

Rebalances use the eager protocol (``range``): every partition is revoked before any is
assigned, and no consume() happens while a transaction is open, so a revocation never lands
in the middle of a batch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from prometheus_client import Counter, Gauge, Histogram

from runplane.config import Settings
from runplane.errors import ConfigError, RetryableError, TerminalError, WireError
from runplane.health import Probe
from runplane.kafka.clients import consumer_config, transactional_producer_config
from runplane.kafka.deadletter import dead_letter
from runplane.kafka.partition import partition_for
from runplane.kafka.restore import Restorer, await_previous_owner
from runplane.kafka.txn import TransactionalProducer, TxnAbortable, TxnFatal
from runplane.wire import Record, Serde

__all__ = [
    "Clock",
    "Emit",
    "Handler",
    "Incoming",
    "Processor",
    "ProcessorConfig",
    "ProcessorStopped",
    "State",
    "SystemClock",
]

log = logging.getLogger(__name__)

# --- metrics (process-wide; labelled by service so `runplane serve all` keeps them apart) ---
MESSAGES = Counter(
    "runplane_processor_messages_total", "Input records handled and committed", ["service"]
)
DEADLETTERS = Counter(
    "runplane_processor_deadletters_total", "Input records dead-lettered", ["service", "kind"]
)
ABORTS = Counter("runplane_processor_aborts_total", "Transactions aborted", ["service"])
COMMIT_SECONDS = Histogram(
    "runplane_processor_commit_seconds",
    "send_offsets + commit_transaction latency",
    ["service"],
    buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
)
BATCH_SIZE = Histogram(
    "runplane_processor_batch_records",
    "Input records per transaction",
    ["service"],
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
)
LAG = Gauge(
    "runplane_processor_consumer_lag_messages", "High watermark minus position", ["service"]
)
RESTORE_SECONDS = Histogram(
    "runplane_processor_restore_seconds", "Time to restore tables on assignment", ["service"]
)
UNREADABLE_ROWS = Counter(
    "runplane_processor_unreadable_rows_total",
    "Table keys dropped at restore because their newest row could not be decoded",
    ["service", "table"],
)
TICK_ERRORS = Counter(
    "runplane_processor_tick_errors_total", "Ticks that raised and were skipped", ["service"]
)
TABLE_ROWS = Gauge("runplane_processor_table_rows", "Rows held per table", ["service", "table"])


# --- the contract handlers are written against ---------------------------------------------


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


def _headers(msg: Message) -> tuple[tuple[str, bytes | None], ...]:
    """A consumed record's headers (librdkafka hands out a list of (name, bytes) pairs)."""
    raw = msg.headers()
    if not raw:
        return ()
    pairs = raw.items() if isinstance(raw, dict) else raw
    return tuple((k, v.encode() if isinstance(v, str) else v) for k, v in pairs)


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
    that fails validation, e.g. with a refusal; an empty answer means: dead-letter it).
    """

    tables: Mapping[str, str]  # table name -> logical compacted topic

    def handle(self, state: State, msg: Incoming, now_ms: int) -> Sequence[Emit]: ...


@runtime_checkable
class _Ticks(Protocol):
    def tick(self, state: State, now_ms: int) -> Sequence[Emit]: ...


class ProcessorStopped(TerminalError):
    """The processor cannot go on (fenced or fatal producer/consumer error): exit non-zero."""


# (key bytes, value bytes, signed-at ms) -> record headers; SigningKey.headers is one.
Signer = Callable[[bytes, bytes, int], Sequence[tuple[str, str | bytes | None]]]


@dataclass(frozen=True)
class ProcessorConfig:
    """How one processor instance runs. ``inputs`` are logical topic names."""

    service: str
    group_id: str
    inputs: tuple[str, ...]
    batch_max: int = 500
    batch_ms: int = 50
    poll_ms: int = 100
    tick_ms: int | None = 1000
    lag_every_ms: int = 5000
    instance_index: int | None = None
    # One deadline for the whole of on_assign (waiting for the previous owner's transaction,
    # then every table): it must stay well under the consumer's max.poll.interval.ms (300 s
    # by default) and above the producers' transaction.timeout.ms (60 s by default).
    restore_timeout_s: float = 120.0
    consumer_overrides: Mapping[str, Any] = field(default_factory=dict)
    producer_overrides: Mapping[str, Any] = field(default_factory=dict)
    # Logical topic -> headers signing a record's exact key and value bytes (the cases
    # service signs its follow-up AdmissionRequests: runplane.signing, docs/security.md).
    signers: Mapping[str, Signer] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.service or not self.group_id:
            raise ConfigError("ProcessorConfig needs a service name and a group id")
        if not self.inputs:
            raise ConfigError("ProcessorConfig needs at least one input topic")
        if self.batch_max < 1 or self.batch_ms < 0 or self.poll_ms < 1:
            raise ConfigError("batch_max >= 1, batch_ms >= 0 and poll_ms >= 1 are required")

    def transactional_id(self, settings: Settings) -> str:
        """Stable per instance, so a restart fences (and aborts) its predecessor.

        Prefixed with the topic prefix: transactional ids are cluster-wide, so two deployments
        (or two test runs) sharing a Kafka must not fence each other's ``admission-0``.
        """
        base = f"{settings.topic_prefix}{self.service}-{settings.instance_id}"
        return base if self.instance_index is None else f"{base}-{self.instance_index}"


BeforeCommit = Callable[[], None]


class Processor:
    """Runs one handler on the real broker until ``stop`` is set. See the module docstring."""

    def __init__(
        self,
        settings: Settings,
        config: ProcessorConfig,
        handler: Handler,
        *,
        clock: Clock | None = None,
        probe: Probe | None = None,
        serde: Serde | None = None,
        before_commit: BeforeCommit | None = None,
    ) -> None:
        self._settings = settings
        self._config = config
        self._handler = handler
        self._clock: Clock = clock or SystemClock()
        self._probe = probe
        self._serde = serde or Serde.from_settings(settings)
        self._before_commit = before_commit  # a test hook: crash or stall at the worst moment
        self._svc = config.service
        self.state = State(handler.tables)
        self._full_to_logical = {settings.topic(t): t for t in config.inputs}
        self._table_topics = {name: settings.topic(t) for name, t in handler.tables.items()}
        self._partition_counts: dict[str, int] = {}
        self._generation = 0
        self._assignment: list[TopicPartition] = []
        # Committed offsets read at assignment: what a tick's transaction sends for a partition
        # nothing has been consumed from yet (so the tick is still fenced by the group).
        self._assigned_offsets: dict[tuple[str, int], int] = {}
        self._last_tick_ms = 0
        self._last_lag = 0.0
        self._consumer: Consumer | None = None
        self._producer: TransactionalProducer | None = None
        self._restorer: Restorer | None = None
        self.ready = threading.Event()  # set once the first assignment is restored

    # --- lifecycle ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop``; raises ``ProcessorStopped`` on a fenced or fatal error."""
        self._start()
        try:
            while not stop.is_set():
                batch = self._collect(stop)
                self._beat()
                if batch:
                    self._process(batch)
                self._maybe_tick()
                self._maybe_update_lag()
        except TxnFatal as exc:
            log.error("processor stopping: %s", exc, extra={"fenced": exc.fenced})
            raise ProcessorStopped(f"{self._svc}: {exc}") from exc
        except RetryableError as exc:
            # Raised out of a rebalance callback (a restore that could not reach the end):
            # restarting is the clean way to retry from a fresh assignment.
            log.error("processor stopping: %s", exc)
            raise ProcessorStopped(f"{self._svc}: {exc}") from exc
        finally:
            self._close()

    def _start(self) -> None:
        cfg = self._config
        producer_conf = transactional_producer_config(
            self._settings, cfg.transactional_id(self._settings), **dict(cfg.producer_overrides)
        )
        self._producer = TransactionalProducer(producer_conf)
        self._producer.init()
        consumer_conf = consumer_config(
            self._settings,
            cfg.group_id,
            **{"partition.assignment.strategy": "range", **dict(cfg.consumer_overrides)},
        )
        self._consumer = Consumer(consumer_conf)
        self._restorer = Restorer(self._settings, timeout_s=cfg.restore_timeout_s)
        self._load_partition_counts()
        self._consumer.subscribe(
            list(self._full_to_logical),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        if self._probe is not None:
            self._probe.set_ready(False, "waiting for partition assignment")
        log.info(
            "processor started",
            extra={"service": self._svc, "group": cfg.group_id, "inputs": list(cfg.inputs)},
        )

    def _close(self) -> None:
        if self._producer is not None:
            try:
                self._producer.abort()
            except TxnFatal:
                log.warning("abort on close failed; the next instance's init will abort it")
        if self._consumer is not None:
            self._consumer.close()  # leaves the group: the partitions move on at once
        if self._restorer is not None:
            self._restorer.close()
        if self._producer is not None:
            try:
                self._producer.flush(5.0)
            except KafkaException as exc:  # a fenced producer refuses even to flush
                log.warning("producer flush on close failed: %s", exc)

    def _load_partition_counts(self) -> None:
        assert self._consumer is not None
        wanted = set(self._full_to_logical) | set(self._table_topics.values())
        wanted.add(self._settings.topic("deadletter"))
        metadata = self._consumer.list_topics(timeout=30)
        missing = [
            t for t in wanted if t not in metadata.topics or not metadata.topics[t].partitions
        ]
        if missing:
            raise ConfigError(f"topics missing: {sorted(missing)} (run `runplane topics create`)")
        # Every topic the cluster has, not only ours: a metadata round trip in the middle of
        # the first batch (for each output topic) costs hundreds of milliseconds.
        for name, topic in metadata.topics.items():
            if topic.error is None and topic.partitions:
                self._partition_counts[name] = len(topic.partitions)
        # A table's partition p is restored when input partition p is assigned: that only
        # means something when they are co-partitioned.
        counts = {t: self._partition_counts[t] for t in wanted if t in self._full_to_logical}
        counts |= {t: self._partition_counts[t] for t in self._table_topics.values()}
        if len(set(counts.values())) > 1:
            raise ConfigError(f"inputs and tables must have equal partition counts: {counts}")

    def _partitions_of(self, full_topic: str) -> int:
        n = self._partition_counts.get(full_topic)
        if n is None:
            assert self._consumer is not None
            topic = self._consumer.list_topics(full_topic, timeout=10).topics.get(full_topic)
            if topic is None or topic.error is not None or not topic.partitions:
                raise ConfigError(f"topic {full_topic} does not exist")
            n = self._partition_counts[full_topic] = len(topic.partitions)
        return n

    def _beat(self) -> None:
        if self._probe is not None:
            self._probe.beat()

    # --- rebalancing -------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._generation += 1
        self._assignment = list(partitions)
        numbers = sorted({tp.partition for tp in partitions})
        if self._probe is not None:
            self._probe.set_ready(False, f"restoring partitions {numbers}")
        started = time.monotonic()
        deadline = started + self._config.restore_timeout_s
        assert self._restorer is not None
        # First: the previous owner's transaction must be over, or the tables below could miss
        # rows that the offsets we are about to resume from already account for.
        committed = await_previous_owner(consumer, partitions, timeout_s=deadline - started)
        self._assigned_offsets = {
            (tp.topic, tp.partition): tp.offset for tp in committed if tp.offset >= 0
        }
        for table, topic in self._table_topics.items():
            restored = self._restorer.restore(
                topic, numbers, self._decode_table(table), deadline=deadline
            )
            for p, rows in restored.partitions.items():
                self.state._load(table, p, rows)
            if restored.unreadable:
                UNREADABLE_ROWS.labels(self._svc, table).inc(len(restored.unreadable))
                log.error(
                    "table keys dropped: newest row unreadable",
                    extra={"table": table, "keys": sorted(restored.unreadable)[:20]},
                )
            TABLE_ROWS.labels(self._svc, table).set(self.state._committed_size(table))
        self.state.assigned = frozenset(numbers)
        RESTORE_SECONDS.labels(self._svc).observe(time.monotonic() - started)
        hook = getattr(self._handler, "on_assign", None)
        if hook is not None:
            hook(numbers)
        log.info(
            "partitions assigned and restored",
            extra={"partitions": numbers, "seconds": round(time.monotonic() - started, 3)},
        )
        self.ready.set()
        if self._probe is not None:
            self._probe.set_ready(True)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._generation += 1
        if self._producer is not None and self._producer.in_transaction:
            self._abort()
        numbers = sorted({tp.partition for tp in partitions})
        for table in self._table_topics:
            for p in numbers:
                self.state._drop(table, p)
            TABLE_ROWS.labels(self._svc, table).set(self.state._committed_size(table))
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._assignment = [tp for tp in self._assignment if (tp.topic, tp.partition) not in gone]
        self.state.assigned = frozenset(tp.partition for tp in self._assignment)
        hook = getattr(self._handler, "on_revoke", None)
        if hook is not None:
            hook(numbers)
        log.info("partitions revoked", extra={"partitions": numbers})
        if self._probe is not None and not self._assignment:
            self._probe.set_ready(False, "waiting for partition assignment")

    def _decode_table(self, table: str) -> Callable[[bytes], Record]:
        logical = self._handler.tables[table]
        return lambda data: self._serde.decode(logical, data)

    # --- the batch ---------------------------------------------------------------------------

    def _collect(self, stop: threading.Event) -> list[Message]:
        """Up to batch_max records, waiting at most poll_ms for the first, batch_ms in all."""
        assert self._consumer is not None
        cfg = self._config
        generation = self._generation
        batch: list[Message] = []
        # poll() returns as soon as one record is there; consume(n, t) would wait for n or t.
        first = self._consumer.poll(cfg.poll_ms / 1000)
        if first is not None:
            batch.append(first)
        deadline = time.monotonic() + cfg.batch_ms / 1000
        while batch and len(batch) < cfg.batch_max and not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            more = self._consumer.consume(num_messages=cfg.batch_max - len(batch), timeout=left)
            if not more:
                break
            batch.extend(more)
        if self._generation != generation:
            # A rebalance happened while collecting: these records belong to an old
            # assignment. Nothing has been produced for them; they will be fetched again
            # from the committed offsets by whoever owns their partitions now — and records
            # of partitions still (or newly) ours moved our position past them, so go back.
            self._rewind()
            return []
        return [m for m in batch if self._usable(m)]

    def _usable(self, msg: Message) -> bool:
        err = msg.error()
        if err is None:
            return True
        if err.fatal():
            raise TxnFatal(f"consumer fatal error: {err.str()}", code=err.code())
        if err.code() != KafkaError._PARTITION_EOF:
            log.warning("consumer error: %s", err.str())
        return False

    def _process(self, batch: list[Message]) -> None:
        producer = self._producer
        consumer = self._consumer
        assert producer is not None and consumer is not None
        now = self._clock.now_ms()
        positions: dict[tuple[str, int], int] = {}
        try:
            producer.begin()
            for msg in batch:
                for emit in self._handle(msg, now):
                    self._produce(emit)
                topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                assert topic is not None and partition is not None and offset is not None
                positions[(topic, partition)] = offset + 1
            offsets = [TopicPartition(t, p, o) for (t, p), o in positions.items()]
            if self._before_commit is not None:
                self._before_commit()
            started = time.monotonic()
            producer.commit(offsets, consumer.consumer_group_metadata())
            COMMIT_SECONDS.labels(self._svc).observe(time.monotonic() - started)
        except TxnAbortable as exc:
            log.warning("transaction aborted: %s", exc)
            self._abort()
            return
        except RetryableError as exc:
            log.warning("batch retried after a transient error: %s", exc)
            self._abort()
            time.sleep(exc.retry_after or 0.5)
            return
        self.state._commit()
        MESSAGES.labels(self._svc).inc(len(batch))
        BATCH_SIZE.labels(self._svc).observe(len(batch))
        for table in self._table_topics:
            TABLE_ROWS.labels(self._svc, table).set(self.state._committed_size(table))

    def _handle(self, msg: Message, now_ms: int) -> Sequence[Emit]:
        """The handler's emits for ``msg``, or one DeadLetter emit when it is bad input."""
        full = msg.topic() or ""
        logical = self._full_to_logical.get(full, full)
        raw_key, raw_value = msg.key(), msg.value()
        try:
            key = raw_key.decode("utf-8") if isinstance(raw_key, bytes) else raw_key
        except UnicodeDecodeError:
            return [self._dead_letter(msg, "key is not UTF-8", "decode", now_ms)]
        if not key:
            return [self._dead_letter(msg, "record has no key", "decode", now_ms)]
        try:
            value = None
            if raw_value is not None:
                data = raw_value if isinstance(raw_value, bytes) else raw_value.encode()
                value = self._serde.decode(logical, data)
        except WireError as exc:
            rescue = getattr(self._handler, "on_undecodable", None)
            if rescue is not None and raw_value is not None:
                data = raw_value if isinstance(raw_value, bytes) else raw_value.encode()
                emits = list(rescue(logical, key, data, exc, now_ms))
                if emits:
                    DEADLETTERS.labels(self._svc, "refused").inc()
                    return emits
            return [self._dead_letter(msg, f"undecodable: {exc}", "decode", now_ms)]
        incoming = Incoming(
            logical,
            msg.partition() or 0,
            msg.offset() or 0,
            key,
            value,
            msg.timestamp()[1],
            headers=_headers(msg),
            raw_value=raw_value if isinstance(raw_value, bytes) else None,
        )
        try:
            return list(self._handler.handle(self.state, incoming, now_ms))
        except (WireError, ValueError) as exc:
            # Input that decoded but the handler cannot accept (or builds an invalid record
            # from): bad input, not a bug in the loop. ValueError covers Emit's own checks.
            return [self._dead_letter(msg, f"invalid: {exc}", "invalid", now_ms)]
        except RetryableError:
            raise
        except Exception as exc:
            # A handler bug must not become a poison pill that crash-loops the service:
            # the record is parked in the dead-letter topic with the error, loudly.
            log.exception("handler failed; dead-lettering the record")
            return [
                self._dead_letter(
                    msg, f"handler error: {type(exc).__name__}: {exc}", "handler", now_ms
                )
            ]

    def _dead_letter(self, msg: Message, reason: str, kind: str, now_ms: int) -> Emit:
        DEADLETTERS.labels(self._svc, kind).inc()
        log.warning(
            "dead-lettering",
            extra={
                "topic": msg.topic(),
                "partition": msg.partition(),
                "offset": msg.offset(),
                "reason": reason,
            },
        )
        record = dead_letter(msg, reason, self._svc, at_ms=now_ms)
        raw_key = msg.key()
        try:
            key = raw_key.decode("utf-8") if isinstance(raw_key, bytes) else (raw_key or "")
        except UnicodeDecodeError:
            key = ""
        raw = raw_key.encode("utf-8") if isinstance(raw_key, str) else raw_key
        return _RawKeyEmit("deadletter", key or "-", record, raw_key=raw)

    def _produce(self, emit: Emit) -> None:
        assert self._producer is not None
        full = self._settings.topic(emit.topic)
        n = self._partitions_of(full)
        value = None if emit.value is None else self._serde.encode(emit.topic, emit.value)
        if isinstance(emit, _RawKeyEmit):
            key_bytes = emit.raw_key
            partition = 0 if key_bytes is None else partition_for(key_bytes, n)
        else:
            key_bytes = emit.key.encode("utf-8")
            partition = partition_for(emit.partition_key or emit.key, n)
        signer = self._config.signers.get(emit.topic)
        headers = None
        if signer is not None and key_bytes is not None and value is not None:
            # Wall time, not the handler's clock: admission compares it with the record's
            # timestamp, which librdkafka stamps from the wall clock at this produce().
            headers = list(signer(key_bytes, value, time.time_ns() // 1_000_000))
        self._producer.produce(full, key_bytes, value, partition, headers)
        for table, topic in self._handler.tables.items():
            if topic == emit.topic:
                self.state._stage(table, partition, emit.key, emit.value)

    def _abort(self) -> None:
        """Throw the open transaction away and go back to the last committed positions."""
        assert self._producer is not None and self._consumer is not None
        ABORTS.labels(self._svc).inc()
        self._producer.abort()
        self.state._discard()
        hook = getattr(self._handler, "on_abort", None)
        if hook is not None:
            hook()
        self._rewind()

    def _rewind(self) -> None:
        assert self._consumer is not None
        if not self._assignment:
            return
        try:
            committed = self._consumer.committed(self._assignment, timeout=30)
        except Exception as exc:  # a consumer that cannot even read its offsets is done for
            raise TxnFatal(f"cannot read committed offsets to rewind: {exc}") from exc
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            try:
                self._consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            except Exception as exc:
                # The partition is no longer ours (a rebalance is under way): its new owner
                # starts from the committed offset anyway.
                log.info("seek skipped for %s[%d]: %s", tp.topic, tp.partition, exc)

    # --- periodic work -----------------------------------------------------------------------

    def _maybe_tick(self) -> None:
        cfg = self._config
        if cfg.tick_ms is None or not isinstance(self._handler, _Ticks) or not self._assignment:
            return
        now = self._clock.now_ms()
        if now - self._last_tick_ms < cfg.tick_ms:
            return
        self._last_tick_ms = now
        try:
            emits = list(self._handler.tick(self.state, now))
        except RetryableError as exc:
            log.warning("tick skipped after a transient error: %s", exc)
            TICK_ERRORS.labels(self._svc).inc()
            return
        except Exception:
            # A tick bug must not stop the service: its inputs keep being served, the next
            # tick tries again, and the counter says it is failing.
            log.exception("tick failed; skipped")
            TICK_ERRORS.labels(self._svc).inc()
            return
        if not emits:
            return
        assert self._producer is not None and self._consumer is not None
        try:
            self._producer.begin()
            for emit in emits:
                self._produce(emit)
            # The positions (unchanged: every batch committed before we got here) with the
            # group metadata: a zombie's tick is refused like its batches, and a new owner's
            # on_assign waits for a tick transaction still open.
            self._producer.commit(self._tick_offsets(), self._consumer.consumer_group_metadata())
        except TxnAbortable as exc:
            log.warning("tick transaction aborted: %s", exc)
            self._abort()
            return
        self.state._commit()

    def _tick_offsets(self) -> list[TopicPartition]:
        assert self._consumer is not None
        out = []
        for tp in self._consumer.position(self._assignment):
            offset = tp.offset
            if offset < 0:  # nothing consumed since assignment: still at the committed offset
                offset = self._assigned_offsets.get((tp.topic, tp.partition), -1)
            if offset >= 0:
                out.append(TopicPartition(tp.topic, tp.partition, offset))
        return out

    def _maybe_update_lag(self) -> None:
        now = time.monotonic()
        if now - self._last_lag < self._config.lag_every_ms / 1000 or not self._assignment:
            return
        self._last_lag = now
        assert self._consumer is not None
        total = 0
        for tp in self._consumer.position(self._assignment):
            try:
                _, high = self._consumer.get_watermark_offsets(tp, cached=True)
            except Exception:  # cached watermarks may not exist yet; try next time
                continue
            if tp.offset >= 0 and high >= 0:
                total += max(0, high - tp.offset)
        LAG.labels(self._svc).set(total)


@dataclass(frozen=True)
class _RawKeyEmit(Emit):
    """A dead letter keeps the original key bytes, even when they are not valid UTF-8."""

    raw_key: bytes | None = None
