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
    collect what is waiting (drained → commit at once; ≤ batch_max, ≤ batch_ms) ──► begin
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message, TopicPartition

from runplane.config import Settings
from runplane.errors import ConfigError, RetryableError, TerminalError, WireError
from runplane.kafka.deadletter import dead_letter
from runplane.kafka.handler import Clock, Emit, Handler, Incoming, State, SystemClock, Ticks
from runplane.kafka.loop import LoopConfig, LoopHooks, TxnLoop, usable
from runplane.kafka.metrics import (
    ABORTS,
    BATCH_SIZE,
    COMMIT_SECONDS,
    DEADLETTERS,
    LAG,
    MESSAGES,
    RESTORE_SECONDS,
    TABLE_ROWS,
    TICK_ERRORS,
    UNREADABLE_ROWS,
)
from runplane.kafka.partition import partition_for
from runplane.kafka.restore import Stopping
from runplane.kafka.txn import TxnAbortable, TxnFatal
from runplane.serving.health import Probe
from runplane.serving.tracing import current_headers, span_from_headers
from runplane.signing.journal import Signer as JournalSigner
from runplane.wire import Record, Serde, serde_for

__all__ = ["Processor", "ProcessorConfig", "ProcessorStopped"]

log = logging.getLogger(__name__)

# The handler contract (Incoming, Emit, State, Handler, Clock) lives in runplane.kafka.handler,
# which imports no Kafka client: import it from there (one import path per name).


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
    # service signs its follow-up AdmissionRequests: runplane.signing.admission, docs/security.md).
    signers: Mapping[str, Signer] = field(default_factory=dict)
    # The journal signer of a chain writer (``LoopConfig.journal_signer``).
    journal_signer: JournalSigner | None = None

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
        self._serde = serde or serde_for(settings)
        self._before_commit = before_commit  # a test hook: crash or stall at the worst moment
        self._svc = config.service
        self.state = State(handler.tables)
        self._full_to_logical = {settings.topic(t): t for t in config.inputs}
        self._table_topics = {name: settings.topic(t) for name, t in handler.tables.items()}
        self._partition_counts: dict[str, int] = {}
        self._last_tick_ms = 0
        self._last_lag = 0.0
        self._loop = TxnLoop(
            settings,
            LoopConfig(
                service=config.service,
                group_id=config.group_id,
                topics=tuple(self._full_to_logical),
                transactional_id=config.transactional_id(settings),
                restore_timeout_s=config.restore_timeout_s,
                consumer_overrides=config.consumer_overrides,
                producer_overrides=config.producer_overrides,
                journal_signer=config.journal_signer,
            ),
            LoopHooks(restore=self._restore, revoke=self._revoke),
            probe=probe,
        )
        self.ready = self._loop.ready  # set once the first assignment is restored

    # --- lifecycle ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop``; raises ``ProcessorStopped`` on a fenced or fatal error."""
        cfg = self._config
        loop = self._loop
        loop.stop = stop
        try:
            self._start()
            while not stop.is_set():
                batch = loop.take(
                    wait_s=cfg.poll_ms / 1000, max_records=cfg.batch_max, max_s=cfg.batch_ms / 1000
                )
                loop.beat()
                batch = [m for m in batch if usable(m)]
                if batch:
                    self._process(batch)
                self._maybe_tick()
                self._maybe_update_lag()
        except Stopping as exc:
            log.info("processor stopped during a rebalance: %s", exc)
        except TxnFatal as exc:
            log.error("processor stopping: %s", exc, extra={"fenced": exc.fenced})
            raise ProcessorStopped(f"{self._svc}: {exc}") from exc
        except RetryableError as exc:
            # Raised out of a rebalance callback (a restore that could not reach the end):
            # restarting is the clean way to retry from a fresh assignment.
            log.error("processor stopping: %s", exc)
            raise ProcessorStopped(f"{self._svc}: {exc}") from exc
        finally:
            loop.close()

    def _start(self) -> None:
        cfg = self._config
        self._loop.start()
        self._load_partition_counts()
        self._loop.subscribe()
        log.info(
            "processor started",
            extra={"service": self._svc, "group": cfg.group_id, "inputs": list(cfg.inputs)},
        )

    def _load_partition_counts(self) -> None:
        wanted = set(self._full_to_logical) | set(self._table_topics.values())
        wanted.add(self._settings.topic("deadletter"))
        metadata = self._loop.consumer.list_topics(timeout=30)
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
            topic = self._loop.consumer.list_topics(full_topic, timeout=10).topics.get(full_topic)
            if topic is None or topic.error is not None or not topic.partitions:
                raise ConfigError(f"topic {full_topic} does not exist")
            n = self._partition_counts[full_topic] = len(topic.partitions)
        return n

    # --- rebalancing (TxnLoop hooks) ---------------------------------------------------------

    def _restore(self, numbers: list[int], deadline: float) -> None:
        """Every table's partitions ``numbers`` from its compacted topic, to the end."""
        started = time.monotonic()
        for table, topic in self._table_topics.items():
            restored = self._loop.restorer.restore(
                topic, numbers, self._decode_table(table), deadline=deadline, stop=self._loop.stop
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

    def _revoke(self, numbers: list[int], lost: bool) -> None:
        if self._loop.producer.in_transaction:
            self._discard()
        for table in self._table_topics:
            for p in numbers:
                self.state._drop(table, p)
            TABLE_ROWS.labels(self._svc, table).set(self.state._committed_size(table))
        self.state.assigned = self.state.assigned - set(numbers)
        hook = getattr(self._handler, "on_revoke", None)
        if hook is not None:
            hook(numbers)

    def _decode_table(self, table: str) -> Callable[[bytes], Record]:
        logical = self._handler.tables[table]
        return lambda data: self._serde.decode(logical, data)

    # --- the batch ---------------------------------------------------------------------------

    def _process(self, batch: list[Message]) -> None:
        producer = self._loop.producer
        consumer = self._loop.consumer
        now = self._clock.now_ms()
        positions: dict[tuple[str, int], int] = {}
        try:
            producer.begin()
            for msg in batch:
                # A span per record under the record's trace context (none without one and
                # without an SDK); what the record causes carries that span's context.
                with span_from_headers(f"{self._svc} {msg.topic()}", msg.headers()) as span:
                    trace = current_headers() if span is not None else None
                    for emit in self._handle(msg, now):
                        if emit.trace_parent is None:
                            self._produce(emit, trace)
                            continue
                        stored = [("traceparent", emit.trace_parent.encode("latin-1"))]
                        with span_from_headers(f"{self._svc} {emit.topic}", stored):
                            self._produce(emit, current_headers())
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
            letter = self._dead_letter(msg, f"undecodable: {exc}", "decode", now_ms)
            return [*self._answer_dead_letter(logical, key, raw_value, exc, now_ms), letter]
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

    def _answer_dead_letter(
        self, topic: str, key: str, raw: str | bytes | None, exc: WireError, now_ms: int
    ) -> Sequence[Emit]:
        """The handler's answer to a record dead-lettered as undecodable, when it has one."""
        answer = getattr(self._handler, "answer_dead_letter", None)
        if answer is None or raw is None:
            return []
        data = raw if isinstance(raw, bytes) else raw.encode()
        try:
            return list(answer(topic, key, data, exc, now_ms))
        except WireError:  # an answer that cannot be built: the dead letter alone, as before
            log.exception("answer to a dead letter failed; dead-lettering only")
            return []

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

    def _produce(self, emit: Emit, trace: list[tuple[str, bytes]] | None = None) -> None:
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
        if trace:
            headers = [*(headers or ()), *trace]
        self._loop.producer.produce(full, key_bytes, value, partition, headers)
        for table, topic in self._handler.tables.items():
            if topic == emit.topic:
                self.state._stage(table, partition, emit.key, emit.value)

    def _discard(self) -> None:
        """Throw the open transaction and the table overlay away."""
        ABORTS.labels(self._svc).inc()
        self._loop.producer.abort()
        self.state._discard()
        hook = getattr(self._handler, "on_abort", None)
        if hook is not None:
            hook()

    def _abort(self) -> None:
        """Discard the open transaction and go back to the last committed positions."""
        self._discard()
        self._loop.rewind()

    # --- periodic work -----------------------------------------------------------------------

    def _maybe_tick(self) -> None:
        cfg = self._config
        if cfg.tick_ms is None or not isinstance(self._handler, Ticks) or not self._loop.assignment:
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
        producer = self._loop.producer
        try:
            producer.begin()
            for emit in emits:
                self._produce(emit)
            # The positions (unchanged: every batch committed before we got here) with the
            # group metadata: a zombie's tick is refused like its batches, and a new owner's
            # on_assign waits for a tick transaction still open.
            producer.commit(self._loop.positions(), self._loop.consumer.consumer_group_metadata())
        except TxnAbortable as exc:
            log.warning("tick transaction aborted: %s", exc)
            self._abort()
            return
        self.state._commit()

    def _maybe_update_lag(self) -> None:
        now = time.monotonic()
        if now - self._last_lag < self._config.lag_every_ms / 1000 or not self._loop.assignment:
            return
        self._last_lag = now
        LAG.labels(self._svc).set(self._loop.lag())


def _headers(msg: Message) -> tuple[tuple[str, bytes | None], ...]:
    """A consumed record's headers (librdkafka hands out a list of (name, bytes) pairs)."""
    raw = msg.headers()
    if not raw:
        return ()
    pairs = raw.items() if isinstance(raw, dict) else raw
    return tuple((k, v.encode() if isinstance(v, str) else v) for k, v in pairs)


@dataclass(frozen=True)
class _RawKeyEmit(Emit):
    """A dead letter keeps the original key bytes, even when they are not valid UTF-8."""

    raw_key: bytes | None = None
