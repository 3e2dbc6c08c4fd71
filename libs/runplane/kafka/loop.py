"""The skeleton every transactional loop shares: one consumer group, one transactional
producer, restore-on-assign, rewind after an abort, adaptive batches, lag, a clean stop.

The shared processor (admission, cases, worklist), the executor and the journal service each
own a :class:`TxnLoop` and supply two hooks; what they do between a batch's first record
and its commit is theirs (docs/decisions.md §13).

``restore(partitions, deadline)``
    Called on assignment, *after* :func:`await_previous_owner` saw every transaction of the
    previous owner on those partitions end (a zombie that sent its offsets before stalling
    can still commit: reading state before it ends would miss rows the committed offsets
    already account for). Rebuild the partitions' state; raise ``RetryableError`` when that
    cannot be done by ``deadline``. Called again by :meth:`TxnLoop.restart_from_committed`.
``revoke(partitions, lost)``
    Called when partitions go away (``lost``: the group already moved on, so nothing
    uncommitted may be committed any more). Drop their state; a revoked (not lost) owner
    may first commit what it holds.

Zombie fencing is the producer's stable ``transactional.id`` (a restart aborts its
predecessor's open transaction) plus the group metadata sent with every offset commit
(KIP-447). Rebalances are eager (``range``: partition p of every input goes to one member,
which co-partitioned tables need). Stopping: ``Stopping`` out of a rebalance callback means
the stop event was set during a restore or a wait; the owner's ``run`` returns cleanly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from runplane.config import Settings
from runplane.errors import ConfigError
from runplane.kafka.acls import authorization_hint
from runplane.kafka.clients import consumer_config, transactional_producer_config
from runplane.kafka.restore import Restorer, Stopping, await_previous_owner
from runplane.kafka.txn import TransactionalProducer, TxnFatal
from runplane.serving.health import Probe
from runplane.signing.journal import Signer, journal_headers

__all__ = ["LoopConfig", "LoopHooks", "TxnLoop", "lag_behind", "usable"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopHooks:
    """What the owner of a loop does when partitions come and go (module docstring)."""

    restore: Callable[[list[int], float], None]
    revoke: Callable[[list[int], bool], None]


@dataclass(frozen=True)
class LoopConfig:
    """One loop's Kafka identity. ``topics`` and ``group_id`` are full names."""

    service: str
    group_id: str
    topics: tuple[str, ...]
    transactional_id: str
    # One deadline for the whole of on_assign (the previous owner's transaction, then every
    # table): above the producers' transaction.timeout.ms, well under max.poll.interval.ms
    # (300 s by default), which a rebalance callback counts against.
    restore_timeout_s: float = 120.0
    consumer_overrides: Mapping[str, Any] = field(default_factory=dict)
    producer_overrides: Mapping[str, Any] = field(default_factory=dict)
    # A chain writer's key (the executor, admission's seq 0, the cases service's sealed sweep
    # runs): what the loop's producer writes on ``journal`` is signed with it. The service's
    # settings read it (RUNPLANE_JOURNAL_SIGNING_KEY); None: journal records go unsigned.
    journal_signer: Signer | None = None

    def __post_init__(self) -> None:
        if not self.service or not self.group_id or not self.transactional_id:
            raise ConfigError("a loop needs a service name, a group id and a transactional id")
        if not self.topics:
            raise ConfigError("a loop needs at least one input topic")


class TxnLoop:
    """The consumer, the transactional producer and the restorer of one loop instance."""

    def __init__(
        self,
        settings: Settings,
        config: LoopConfig,
        hooks: LoopHooks,
        *,
        probe: Probe | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.settings = settings
        self.config = config
        self._hooks = hooks
        self._probe = probe
        self.stop = stop or threading.Event()
        self.generation = 0  # bumped by every rebalance: a batch collected across one is void
        self.assignment: list[TopicPartition] = []
        # Committed offsets read at assignment (what a commit sends for a partition nothing
        # has been consumed from yet, so that it is still fenced by the group).
        self.assigned_offsets: dict[tuple[str, int], int] = {}
        self.ready = threading.Event()  # set once the first assignment is restored
        self._consumer: Consumer | None = None
        self._producer: TransactionalProducer | None = None
        self._restorer: Restorer | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def consumer(self) -> Consumer:
        assert self._consumer is not None, "TxnLoop.start() first"
        return self._consumer

    @property
    def producer(self) -> TransactionalProducer:
        assert self._producer is not None, "TxnLoop.start() first"
        return self._producer

    @property
    def restorer(self) -> Restorer:
        assert self._restorer is not None, "TxnLoop.start() first"
        return self._restorer

    def start(self) -> None:
        """Register the transactional id (fencing a predecessor), then join the group."""
        cfg = self.config
        self._producer = TransactionalProducer(
            transactional_producer_config(
                self.settings, cfg.transactional_id, **dict(cfg.producer_overrides)
            ),
            headers=journal_headers(cfg.journal_signer, self.settings.topic("journal")),
        )
        self._producer.init()
        self._consumer = Consumer(
            consumer_config(
                self.settings,
                cfg.group_id,
                **{"partition.assignment.strategy": "range", **dict(cfg.consumer_overrides)},
            )
        )
        self._restorer = Restorer(self.settings, timeout_s=cfg.restore_timeout_s)

    def subscribe(self) -> None:
        self.consumer.subscribe(
            list(self.config.topics),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        if self._probe is not None:
            self._probe.set_ready(False, "waiting for partition assignment")

    def close(self) -> None:
        """Abort what is open, leave the group (partitions move on at once), flush."""
        if self._producer is not None:
            try:
                self._producer.abort()
            except TxnFatal:
                log.warning("abort on close failed; the next init of this id aborts it")
        if self._consumer is not None:
            self._consumer.close()  # revokes (our hook runs) and leaves the group
        if self._restorer is not None:
            self._restorer.close()
        if self._producer is not None:
            try:
                self._producer.flush(5.0)
            except Exception as exc:  # a fenced producer refuses even to flush
                log.warning("producer flush on close failed: %s", exc)

    def beat(self) -> None:
        if self._probe is not None:
            self._probe.beat()

    # --- rebalancing -------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.generation += 1
        self.assignment = list(partitions)
        numbers = sorted({tp.partition for tp in partitions})
        if self._probe is not None:
            self._probe.set_ready(False, f"restoring partitions {numbers}")
        started = time.monotonic()
        deadline = started + self.config.restore_timeout_s
        # First: the previous owner's transaction must be over, or the state restored below
        # could miss rows that the offsets we are about to resume from already account for.
        committed = await_previous_owner(
            consumer, partitions, timeout_s=deadline - started, stop=self.stop
        )
        self.assigned_offsets = {
            (tp.topic, tp.partition): tp.offset for tp in committed if tp.offset >= 0
        }
        self._hooks.restore(numbers, deadline)
        log.info(
            "partitions assigned and restored",
            extra={
                "service": self.config.service,
                "partitions": numbers,
                "seconds": round(time.monotonic() - started, 3),
            },
        )
        self.ready.set()
        if self._probe is not None:
            self._probe.set_ready(True)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._gone(partitions, lost=False)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._gone(partitions, lost=True)

    def _gone(self, partitions: list[TopicPartition], *, lost: bool) -> None:
        self.generation += 1
        numbers = sorted({tp.partition for tp in partitions})
        self._hooks.revoke(numbers, lost)
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self.assignment = [tp for tp in self.assignment if (tp.topic, tp.partition) not in gone]
        log.info(
            "partitions lost" if lost else "partitions revoked",
            extra={"service": self.config.service, "partitions": numbers},
        )
        if self._probe is not None and not self.assignment:
            self._probe.set_ready(False, "waiting for partition assignment")

    # --- after an abort ----------------------------------------------------------------------

    def rewind(self, deadline: float | None = None) -> None:
        """Seek every assigned partition back to its committed offset (stable ones: a
        transaction of ours or a previous owner's still open is waited for)."""
        if not self.assignment:
            return
        if deadline is None:
            deadline = time.monotonic() + self.config.restore_timeout_s
        try:
            committed = await_previous_owner(
                self.consumer,
                self.assignment,
                timeout_s=deadline - time.monotonic(),
                stop=self.stop,
            )
        except (TxnFatal, Stopping):
            raise
        except Exception as exc:
            # A consumer that cannot read its offsets cannot go on: restart from scratch.
            raise TxnFatal(f"cannot read committed offsets to rewind: {exc}") from exc
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            try:
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            except Exception as exc:
                # The partition is no longer ours (a rebalance is under way): its new owner
                # starts from the committed offset anyway.
                log.info("seek skipped for %s[%d]: %s", tp.topic, tp.partition, exc)

    def restart_from_committed(self) -> None:
        """Everything since the last commit is void: rewind, then restore the state again —
        the same path as a fresh assignment, so it is the tested path."""
        numbers = sorted({tp.partition for tp in self.assignment})
        deadline = time.monotonic() + self.config.restore_timeout_s
        self.rewind(deadline)
        if numbers:
            self._hooks.restore(numbers, deadline)

    # --- batches ------------------------------------------------------------------------------

    def take(self, *, wait_s: float, max_records: int, max_s: float) -> list[Message]:
        """Adaptive batching: wait up to ``wait_s`` for the first record, then take what the
        consumer already holds, again and again, and stop the moment it comes back empty.

        A lone record is committed at once (low latency when quiet); under load the records
        that arrived during the previous commit are all waiting and ride in one transaction.
        ``max_records`` / ``max_s`` only bound a batch whose input never drains. Records of
        a rebalance that happened meanwhile are given back (rewound) and [] returned."""
        generation = self.generation
        first = self.consumer.poll(wait_s) if wait_s > 0 else None
        batch: list[Message] = [] if first is None else [first]
        if wait_s <= 0 or batch:
            deadline = time.monotonic() + max_s
            while len(batch) < max_records and not self.stop.is_set():
                # timeout=0: only what is here. Waiting for more would add its wait to every
                # lone record's latency; what arrives meanwhile goes in the next batch.
                more = self.consumer.consume(num_messages=max_records - len(batch), timeout=0)
                if not more:
                    break
                batch.extend(more)
                if time.monotonic() >= deadline:
                    break
        if self.generation != generation:
            # These records belong to an old assignment: nothing was produced for them; the
            # owners fetch them again from the committed offsets (and so do we).
            self.rewind()
            return []
        return batch

    def positions(self) -> list[TopicPartition]:
        """What a commit now sends: the position of every assigned partition, or the offset
        committed at assignment for one nothing has been consumed from yet (so the commit
        still carries it, fenced by the group)."""
        out = []
        for tp in self.consumer.position(self.assignment):
            offset = tp.offset
            if offset < 0:
                offset = self.assigned_offsets.get((tp.topic, tp.partition), -1)
            if offset >= 0:
                out.append(TopicPartition(tp.topic, tp.partition, offset))
        return out

    def lag(self, topics: Sequence[str] | None = None) -> int:
        """Records behind the cached high watermarks of the assigned partitions."""
        if not self.assignment:
            return 0
        return lag_behind(self.consumer, self.consumer.position(self.assignment), topics)


def lag_behind(
    consumer: Consumer, positions: Sequence[TopicPartition], topics: Sequence[str] | None = None
) -> int:
    """High watermark minus position, summed (cached watermarks; none yet counts 0)."""
    total = 0
    for tp in positions:
        if topics is not None and tp.topic not in topics:
            continue
        try:
            _, high = consumer.get_watermark_offsets(tp, cached=True)
        except Exception:  # no cached watermark yet; next time
            continue
        if tp.offset >= 0 and high >= 0:
            total += max(0, high - tp.offset)
    return total


def usable(msg: Message) -> bool:
    """False for a consumer event that is not a record (EOF, a transient error logged);
    raises ``TxnFatal`` on a fatal consumer error (aborting does not make it go away)."""
    err = msg.error()
    if err is None:
        return True
    if err.fatal():
        raise TxnFatal(f"consumer fatal error: {err.str()}", code=err.code())
    hint = authorization_hint(err.code())
    if hint is not None:
        # Waiting does not grant an ACL: stop with what to do instead of polling forever.
        raise TxnFatal(f"consumer error: {err.str()}: {hint}", code=err.code())
    if err.code() != KafkaError._PARTITION_EOF:
        log.warning("consumer error: %s", err.str())
    return False
