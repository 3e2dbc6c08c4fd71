"""The audit loop: journal + results in, audit records out, exactly once.

Delivery guarantee: **exactly once to ``audit``**. Audit records, quarantine wakes, dead
letters and the input offsets of ``journal`` and ``results`` commit in one Kafka transaction
(``send_offsets_to_transaction`` with the consumer group metadata, so a zombie instance is
fenced by the group generation). A transaction commits only when no journal record is held
waiting for its body: every journal offset it commits has its audit record in it, so a
restart never re-reads an audited record nor loses a held one. ``results`` offsets are
committed at the lowest body still cached (bodies read before their record): re-reading a
body is harmless, losing one would turn into a false BODY_MISSING.

State on restart: **rebuilt from ``audit``**, not kept in a topic of our own. The chain tip of
a session is exactly its last audit record (seq, hash, break), and audit records commit in the
same transaction as the offsets, so what we read back is consistent with the committed
position by construction — no second source of truth, no extra topic to create, migrate or
keep co-partitioned. The price is reading the assigned audit partitions at assignment (last
record per session wins, ``runplane.kafka.restore``); a compacted tip topic is the upgrade
path when audit partitions get too long to read at a rebalance.

Assignment: the previous owner of a partition may have sent its offsets in a transaction it
has not committed yet (it stalled past the session timeout). Its audit records are then held
back from our restore, yet its commit would still succeed and move our starting position past
the journal records they cover: a false gap, and a quarantine of a healthy run. So
``on_assign`` first waits for that transaction to end (``await_previous_owner``: committed
offsets read with require_stable), and only then restores, all under one deadline.

Errors: an abortable transaction error aborts, rebuilds the partition states from audit and
rewinds to the committed offsets (the same as a restart, without the process restart);
fatal/fenced — of the producer or of the consumer — stops the loop (``TxnFatal``) for the
supervisor to restart.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from runplane.errors import WireError
from runplane.health import Probe
from runplane.kafka.clients import consumer_config, transactional_producer_config
from runplane.kafka.deadletter import dead_letter
from runplane.kafka.restore import Restorer, await_previous_owner
from runplane.kafka.txn import TransactionalProducer, TxnAbortable, TxnFatal
from runplane.runs import key_text, parse_result_key
from runplane.wire import AuditRecord, JournalRecord, Record, ResultEntry, Serde, Wake
from services.journal import metrics as m
from services.journal import topology as topo
from services.journal.decide import (
    AuditOut,
    JournalIn,
    Output,
    PartitionState,
    QuarantineOut,
    ResultIn,
    on_end,
    on_journal,
    on_result,
    quarantine_reason,
    restore,
    tick,
)
from services.journal.settings import JournalSettings

log = logging.getLogger(__name__)

NowMs = Callable[[], int]
R = TypeVar("R", bound=Record)


# One deadline for everything on_assign does (the previous owner's transaction, then the audit
# partitions): above the transaction timeout (60 s), well under max.poll.interval.ms (300 s).
RESTORE_DEADLINE_S = 120.0


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Txn:
    """What the open transaction carries, for metrics after it commits."""

    started: float
    messages: int = 0
    audits: list[AuditRecord] = field(default_factory=list)
    quarantines: int = 0
    deadletters: dict[str, int] = field(default_factory=dict)


class AuditLoop:
    """One journal service instance's consume-verify-publish loop."""

    def __init__(
        self, settings: JournalSettings, *, probe: Probe | None = None, now_ms: NowMs = _wall_ms
    ) -> None:
        self._s = settings
        self._base = settings.base
        self._probe = probe
        self._now = now_ms
        self._serde = Serde.from_settings(self._base)
        self._journal = self._base.topic("journal")
        self._results = self._base.topic("results")
        self._states: dict[int, PartitionState] = {}
        self._assignment: list[TopicPartition] = []
        self._paused = False
        self._txn: _Txn | None = None
        self._consumer: Consumer | None = None
        self._producer: TransactionalProducer | None = None
        self._restorer: Restorer | None = None
        self.ready = threading.Event()

    # --- lifecycle ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop``; raises ``TxnFatal`` when fenced or broken."""
        self._start()
        try:
            while not stop.is_set():
                self._step()
        finally:
            self._close()

    def _start(self) -> None:
        s = self._s
        self._producer = TransactionalProducer(
            transactional_producer_config(
                self._base,
                s.transactional_id,
                **{"transaction.timeout.ms": s.transaction_timeout_ms},
            )
        )
        self._producer.init()
        self._consumer = Consumer(
            consumer_config(
                self._base,
                self._base.topic_prefix + topo.GROUP_ID,
                **{
                    # range: partition p of journal and of results go to the same member.
                    "partition.assignment.strategy": "range",
                    "enable.partition.eof": True,
                    "session.timeout.ms": s.session_timeout_ms,
                    "fetch.wait.max.ms": 100,
                },
            )
        )
        self._restorer = Restorer(self._base)
        self._consumer.subscribe(
            [self._journal, self._results],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        if self._probe is not None:
            self._probe.set_ready(False, "waiting for partition assignment")

    def _close(self) -> None:
        if self._producer is not None:
            self._producer.abort()
        if self._consumer is not None:
            self._consumer.close()
        if self._restorer is not None:
            self._restorer.close()
        if self._producer is not None:
            self._producer.flush(5.0)

    # --- rebalancing -------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._assignment = list(partitions)
        numbers = sorted({tp.partition for tp in partitions})
        if self._probe is not None:
            self._probe.set_ready(False, f"restoring chain tips of partitions {numbers}")
        deadline = time.monotonic() + RESTORE_DEADLINE_S
        # Before reading audit: a previous owner's open transaction must have ended, or its
        # audit records would be missing from the tips our committed position already skips.
        await_previous_owner(consumer, partitions, timeout_s=deadline - time.monotonic())
        self._restore(numbers, deadline)
        log.info("journal partitions assigned", extra={"partitions": numbers})
        self.ready.set()
        if self._probe is not None:
            self._probe.set_ready(True)

    def _restore(self, numbers: list[int], deadline: float) -> None:
        assert self._restorer is not None
        audit_topic = self._base.topic(topo.AUDIT)
        restored = self._restorer.restore(
            audit_topic, numbers, self._decode_audit, deadline=deadline
        )
        for p in numbers:
            state = PartitionState(p, body_grace_ms=self._s.body_grace_ms)
            restore(state, restored.partitions.get(p, {}))
            self._states[p] = state

    def _decode_audit(self, data: bytes) -> AuditRecord:
        rec = self._serde.decode(topo.AUDIT, data)
        if not isinstance(rec, AuditRecord):
            raise WireError(f"{type(rec).__name__} on audit")
        return rec

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._producer is not None and self._producer.in_transaction:
            self._producer.abort()
            self._txn = None
        for tp in partitions:
            self._states.pop(tp.partition, None)
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._assignment = [tp for tp in self._assignment if (tp.topic, tp.partition) not in gone]
        self._paused = False
        log.info("journal partitions revoked", extra={"partitions": sorted({p for _, p in gone})})

    # --- the loop ----------------------------------------------------------------------------

    def _step(self) -> None:
        assert self._consumer is not None
        msgs = self._consumer.consume(num_messages=self._s.batch_max, timeout=0.1)
        if self._probe is not None:
            self._probe.beat()
        now = self._now()
        outputs: list[Output] = []
        try:
            for msg in msgs:
                outputs.extend(self._handle(msg, now))
            for state in list(self._states.values()):
                outputs.extend(tick(state, now))
            if outputs:
                self._ensure_txn()
                for out in outputs:
                    self._produce(out)
            self._maybe_commit(now)
        except TxnAbortable as exc:
            log.warning("audit transaction aborted: %s", exc)
            self._abort_and_rewind()
        m.HELD.set(sum(s.held_count() for s in self._states.values()))

    def _handle(self, msg: Message, now: int) -> list[Output]:
        err = msg.error()
        p = msg.partition() or 0
        state = self._states.get(p)
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF and state is not None:
                on_end(state, "journal" if msg.topic() == self._journal else "results", now)
            elif err.fatal():
                # A fatal consumer error does not go away by aborting: stop and be restarted.
                raise TxnFatal(f"consumer fatal error: {err.str()}", code=err.code())
            return []
        if state is None:
            return []  # not ours any more (a rebalance is under way)
        self._ensure_txn()
        assert self._txn is not None
        self._txn.messages += 1
        if msg.topic() == self._journal:
            return self._handle_journal(msg, state, now)
        return self._handle_result(msg, state, now)

    def _handle_journal(self, msg: Message, state: PartitionState, now: int) -> list[Output]:
        try:
            rec = self._decode(msg, "journal", JournalRecord)
            if rec is None:
                raise WireError("tombstone on journal")
            key = key_text(msg)
            if key != rec.session_id:
                raise WireError(f"key {key!r} is not the record's session {rec.session_id!r}")
        except WireError as exc:
            self._dead_letter(msg, str(exc), "journal", now)
            return []
        return on_journal(state, JournalIn(rec, msg.partition() or 0, msg.offset() or 0), now)

    def _handle_result(self, msg: Message, state: PartitionState, now: int) -> list[Output]:
        key = parse_result_key(key_text(msg) or "")
        try:
            if key is None:
                raise WireError(f"results key {key_text(msg)!r} is not session/era/call_seq")
            entry = self._decode(msg, "results", ResultEntry)
        except WireError as exc:
            self._dead_letter(msg, str(exc), "results", now)
            return []
        return on_result(state, ResultIn(key, entry, msg.partition() or 0, msg.offset() or 0), now)

    def _decode(self, msg: Message, topic: str, cls: type[R]) -> R | None:
        value = msg.value()
        if value is None:
            return None
        rec = self._serde.decode(topic, value if isinstance(value, bytes) else value.encode())
        if not isinstance(rec, cls):
            raise WireError(f"{type(rec).__name__} on {topic}")
        return rec

    # --- the transaction ---------------------------------------------------------------------

    def _ensure_txn(self) -> None:
        if self._txn is None:
            assert self._producer is not None
            self._producer.begin()
            self._txn = _Txn(started=time.monotonic())

    def _produce(self, out: Output) -> None:
        assert self._producer is not None and self._txn is not None
        if isinstance(out, AuditOut):
            value = self._serde.encode(topo.AUDIT, out.record)
            self._producer.produce(
                self._base.topic(topo.AUDIT),
                out.record.session_id.encode(),
                value,
                partition=out.partition,
            )
            self._txn.audits.append(out.record)
        elif isinstance(out, QuarantineOut):
            wake = Wake(
                session_id=out.session_id, reason=quarantine_reason(out), sent_ms=self._now()
            )
            # Keyed by session with murmur2: lands on the run's inbox partition, i.e. its executor.
            self._producer.produce(
                self._base.topic(topo.INBOX),
                out.session_id.encode(),
                self._serde.encode(topo.INBOX, wake),
            )
            self._txn.quarantines += 1

    def _dead_letter(self, msg: Message, reason: str, topic: str, now: int) -> None:
        assert self._producer is not None and self._txn is not None
        dl = dead_letter(msg, reason, topo.SERVICE, at_ms=now)
        raw_key = msg.key()
        key = raw_key if isinstance(raw_key, bytes) or raw_key is None else raw_key.encode()
        self._producer.produce(
            self._base.topic(topo.DEADLETTER), key, self._serde.encode(topo.DEADLETTER, dl)
        )
        self._txn.deadletters[topic] = self._txn.deadletters.get(topic, 0) + 1

    def _held(self) -> int:
        return sum(s.held_count() for s in self._states.values())

    def _maybe_commit(self, now: int) -> None:
        txn = self._txn
        if txn is None:
            return
        age_ms = (time.monotonic() - txn.started) * 1000
        due = age_ms >= self._s.batch_ms or txn.messages >= self._s.batch_max
        if not due:
            return
        if self._held():
            # Records wait for bodies: keep the transaction open (its offsets would skip them),
            # and past max_hold stop reading more journal so it cannot outgrow its timeout.
            if age_ms >= self._s.max_hold_ms and not self._paused:
                self._pause_journal(True)
            return
        self._commit()
        if self._paused:
            self._pause_journal(False)

    def _pause_journal(self, pause: bool) -> None:
        assert self._consumer is not None
        tps = [tp for tp in self._assignment if tp.topic == self._journal]
        if pause:
            self._consumer.pause(tps)
        else:
            self._consumer.resume(tps)
        self._paused = pause

    def _commit(self) -> None:
        assert self._consumer is not None and self._producer is not None and self._txn is not None
        offsets = self._offsets()
        started = time.monotonic()
        self._producer.commit(offsets, self._consumer.consumer_group_metadata())
        m.COMMIT_SECONDS.observe(time.monotonic() - started)
        self._count(self._txn)
        self._txn = None
        self._update_lag(offsets)

    def _offsets(self) -> list[TopicPartition]:
        assert self._consumer is not None
        out = []
        for tp in self._consumer.position(self._assignment):
            if tp.offset < 0:
                continue  # nothing consumed on this partition yet
            state = self._states.get(tp.partition)
            if tp.topic == self._results and state is not None:
                floor = state.results_floor()
                if floor is not None and floor < tp.offset:
                    tp = TopicPartition(tp.topic, tp.partition, floor)
            out.append(tp)
        return out

    def _count(self, txn: _Txn) -> None:
        now = self._now()
        for a in txn.audits:
            m.RECORDS.labels(str(a.verdict)).inc()
            if a.cost is not None:
                cap = a.capability or "unknown"
                m.COST_TOKENS.labels(cap, "in").inc(a.cost.tokens_in)
                m.COST_TOKENS.labels(cap, "out").inc(a.cost.tokens_out)
                m.COST_UNITS.labels(cap).inc(a.cost.units)
        if txn.audits:
            m.AUDIT_DELAY.set(max(0.0, (now - txn.audits[-1].stamp_ms) / 1000))
        # One quarantine per broken run (the handler sends it at the first break only).
        m.CHAIN_BREAKS.inc(txn.quarantines)
        m.QUARANTINES.inc(txn.quarantines)
        for topic, n in txn.deadletters.items():
            m.DEADLETTERS.labels(topic).inc(n)

    def _update_lag(self, offsets: list[TopicPartition]) -> None:
        assert self._consumer is not None
        lag = 0
        for tp in offsets:
            if tp.topic != self._journal:
                continue
            try:
                _, high = self._consumer.get_watermark_offsets(tp, cached=True)
            except Exception:  # no cached watermark yet; next time
                continue
            if high >= 0:
                lag += max(0, high - tp.offset)
        m.AUDIT_LAG.set(lag)

    def _abort_and_rewind(self) -> None:
        """Forget the open transaction and everything it saw: as a restart would."""
        assert self._producer is not None and self._consumer is not None
        self._producer.abort()
        self._txn = None
        numbers = sorted({tp.partition for tp in self._assignment})
        deadline = time.monotonic() + RESTORE_DEADLINE_S
        # Offsets first (stable ones), then the tips they are consistent with, as on assign.
        committed = await_previous_owner(
            self._consumer, self._assignment, timeout_s=deadline - time.monotonic()
        )
        self._restore(numbers, deadline)
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            self._consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
        if self._paused:
            self._pause_journal(False)
