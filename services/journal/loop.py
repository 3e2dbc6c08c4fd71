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
path when audit partitions get too long to read at a rebalance. One part of a tip the audit
cannot give back: its slot states (one start per slot, ``SlotStates``), since the audit is
body-free. For the chains that can still take records (neither broken nor closed for good)
they are folded from ``journal`` itself, read up to the group's committed offsets — exactly
the records the restored audit covers — so a second announce or record of a slot is
``duplicate_slot`` whether or not the service restarted in between.

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

from confluent_kafka import KafkaError, Message, TopicPartition

from runplane.core.chain import SlotStates
from runplane.errors import WireError
from runplane.kafka.acls import authorization_hint
from runplane.kafka.deadletter import dead_letter
from runplane.kafka.loop import LoopConfig, LoopHooks, TxnLoop, lag_behind
from runplane.kafka.restore import Stopping
from runplane.kafka.txn import TxnAbortable, TxnFatal
from runplane.runs.read import key_text, parse_result_key
from runplane.serving.health import Probe
from runplane.signing.journal import header_of
from runplane.wire import AuditRecord, JournalRecord, Record, ResultEntry, Wake, serde_for
from services.journal import metrics as m
from services.journal import topology as topo
from services.journal.decide import (
    AuditOut,
    JournalIn,
    Output,
    PartitionState,
    QuarantineOut,
    ResultIn,
    fold_slots,
    on_end,
    on_journal,
    on_result,
    quarantine_reason,
    restore,
    restore_tip,
    takes_records,
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
        self._serde = serde_for(self._base)
        self._journal = self._base.topic("journal")
        self._results = self._base.topic("results")
        self._states: dict[int, PartitionState] = {}
        self._paused = False
        self._txn: _Txn | None = None
        self._loop = TxnLoop(
            self._base,
            LoopConfig(
                service=topo.SERVICE,
                group_id=self._base.topic_prefix + topo.GROUP_ID,
                topics=(self._journal, self._results),
                transactional_id=settings.transactional_id,
                restore_timeout_s=RESTORE_DEADLINE_S,
                producer_overrides={"transaction.timeout.ms": settings.transaction_timeout_ms},
                consumer_overrides={
                    # EOF events: a partition read to its end releases records held for bodies.
                    "enable.partition.eof": True,
                    "session.timeout.ms": settings.session_timeout_ms,
                    "fetch.wait.max.ms": 100,
                },
            ),
            LoopHooks(restore=self._restore, revoke=self._revoke),
            probe=probe,
        )
        self.ready = self._loop.ready

    # --- lifecycle ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop``; raises ``TxnFatal`` when fenced or broken."""
        self._loop.stop = stop
        try:
            self._loop.start()
            self._loop.subscribe()
            while not stop.is_set():
                self._step()
        except Stopping as exc:
            log.info("journal loop stopped during a rebalance: %s", exc)
        finally:
            self._loop.close()

    # --- rebalancing (TxnLoop hooks) ---------------------------------------------------------

    def _restore(self, numbers: list[int], deadline: float) -> None:
        audit_topic = self._base.topic(topo.AUDIT)
        restored = self._loop.restorer.restore(
            audit_topic, numbers, self._decode_audit, deadline=deadline, stop=self._loop.stop
        )
        audits = restored.merged()
        slots = self._restore_slots(numbers, audits, deadline)
        for p in numbers:
            state = PartitionState(p, body_grace_ms=self._s.body_grace_ms)
            restore(state, restored.partitions.get(p, {}), slots)
            self._states[p] = state

    def _restore_slots(
        self, numbers: list[int], audits: dict[str, AuditRecord], deadline: float
    ) -> dict[str, SlotStates]:
        """The slot states of the chains that can still take records, folded from ``journal``
        up to the committed offsets (``fold_slots``): what the audit cannot restore."""
        live = {run_id for run_id, a in audits.items() if takes_records(restore_tip(a))}
        slots: dict[str, SlotStates] = {}
        if not live:
            return slots
        committed = self._loop.consumer.committed(
            [TopicPartition(self._journal, p) for p in numbers],
            timeout=max(0.1, deadline - time.monotonic()),
        )
        # No committed offset (-1001): nothing audited yet from the group, nothing to fold.
        until = {tp.partition: max(tp.offset, 0) for tp in committed}

        def visit(_p: int, key: str | bytes | None, value: str | bytes | None) -> None:
            run_id = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
            if run_id not in live or value is None:
                return
            try:
                rec = self._serde.decode(
                    "journal", value if isinstance(value, bytes) else value.encode()
                )
            except WireError:
                return  # dead-lettered when it was read: it never reached a tip
            if isinstance(rec, JournalRecord) and rec.session_id in live:
                fold_slots(slots, rec)

        self._loop.restorer.read(
            self._journal, numbers, visit, until=until, deadline=deadline, stop=self._loop.stop
        )
        return slots

    def _decode_audit(self, data: bytes) -> AuditRecord:
        rec = self._serde.decode(topo.AUDIT, data)
        if not isinstance(rec, AuditRecord):
            raise WireError(f"{type(rec).__name__} on audit")
        return rec

    def _revoke(self, numbers: list[int], lost: bool) -> None:
        # Partition p of journal and of results go together (range), so a batch's offsets
        # never straddle an assignment: abort what is open, its next owner redoes it.
        if self._loop.producer.in_transaction:
            self._loop.producer.abort()
        self._txn = None
        for p in numbers:
            self._states.pop(p, None)
        self._paused = False

    # --- the loop ----------------------------------------------------------------------------

    def _step(self) -> None:
        msgs = self._take()
        self._loop.beat()
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
            self._maybe_commit(now, drained=not msgs)
        except TxnAbortable as exc:
            log.warning("audit transaction aborted: %s", exc)
            self._abort_and_rewind()
        m.HELD.set(sum(s.held_count() for s in self._states.values()))

    def _take(self) -> list[Message]:
        """What the consumer holds now; with no transaction open, wait up to 100 ms for it.

        consume(n, t) waits for n records or t, so a lone journal record used to wait out the
        timeout; poll() returns at the first one, and the rest is taken without waiting."""
        # With a transaction open (and not held for bodies) nothing is waited for; with none
        # open, or one held open for bodies, wait for the next record (briefly when held, so
        # the body grace is checked often) instead of spinning.
        held = self._txn is not None and self._held()
        wait_s = 0.01 if held else (0.1 if self._txn is None else 0.0)
        return self._loop.take(
            wait_s=wait_s, max_records=self._s.batch_max, max_s=self._s.batch_ms / 1000
        )

    def _handle(self, msg: Message, now: int) -> list[Output]:
        err = msg.error()
        p = msg.partition() or 0
        state = self._states.get(p)
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF and state is not None:
                on_end(state, "journal" if msg.topic() == self._journal else "results", now)
            elif err.fatal() or authorization_hint(err.code()) is not None:
                # A fatal consumer error (or a missing ACL) does not go away by aborting:
                # stop and be restarted, saying what to grant.
                hint = authorization_hint(err.code(), "journal")
                raise TxnFatal(
                    f"consumer error: {err.str()}" + (f": {hint}" if hint else ""), code=err.code()
                )
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
        keyring = self._s.keyring
        problem = (
            None
            if keyring is None
            else keyring.problem(msg.value() or b"", header_of(msg.headers()))
        )
        return on_journal(
            state, JournalIn(rec, msg.partition() or 0, msg.offset() or 0, problem), now
        )

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
            self._loop.producer.begin()
            self._txn = _Txn(started=time.monotonic())

    def _produce(self, out: Output) -> None:
        assert self._txn is not None
        producer = self._loop.producer
        if isinstance(out, AuditOut):
            value = self._serde.encode(topo.AUDIT, out.record)
            producer.produce(
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
            producer.produce(
                self._base.topic(topo.INBOX),
                out.session_id.encode(),
                self._serde.encode(topo.INBOX, wake),
            )
            self._txn.quarantines += 1

    def _dead_letter(self, msg: Message, reason: str, topic: str, now: int) -> None:
        assert self._txn is not None
        dl = dead_letter(msg, reason, topo.SERVICE, at_ms=now)
        raw_key = msg.key()
        key = raw_key if isinstance(raw_key, bytes) or raw_key is None else raw_key.encode()
        self._loop.producer.produce(
            self._base.topic(topo.DEADLETTER), key, self._serde.encode(topo.DEADLETTER, dl)
        )
        self._txn.deadletters[topic] = self._txn.deadletters.get(topic, 0) + 1

    def _held(self) -> int:
        return sum(s.held_count() for s in self._states.values())

    def _maybe_commit(self, now: int, *, drained: bool = False) -> None:
        """Commit when the input is ``drained`` (the last take came back empty) — at once
        when quiet, while under load the batch grows as long as records keep coming, bounded
        by batch_ms and batch_max."""
        txn = self._txn
        if txn is None:
            return
        age_ms = (time.monotonic() - txn.started) * 1000
        due = drained or age_ms >= self._s.batch_ms or txn.messages >= self._s.batch_max
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
        tps = [tp for tp in self._loop.assignment if tp.topic == self._journal]
        if pause:
            self._loop.consumer.pause(tps)
        else:
            self._loop.consumer.resume(tps)
        self._paused = pause

    def _commit(self) -> None:
        assert self._txn is not None
        offsets = self._offsets()
        started = time.monotonic()
        self._loop.producer.commit(offsets, self._loop.consumer.consumer_group_metadata())
        m.COMMIT_SECONDS.observe(time.monotonic() - started)
        self._count(self._txn)
        self._txn = None
        self._update_lag(offsets)

    def _offsets(self) -> list[TopicPartition]:
        out = []
        for tp in self._loop.consumer.position(self._loop.assignment):
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
        m.AUDIT_LAG.set(lag_behind(self._loop.consumer, offsets, topics=[self._journal]))

    def _abort_and_rewind(self) -> None:
        """Forget the open transaction and everything it saw: as a restart would."""
        self._loop.producer.abort()
        self._txn = None
        # Offsets first (stable ones), then the tips they are consistent with, as on assign.
        self._loop.restart_from_committed()
        if self._paused:
            self._pause_journal(False)
