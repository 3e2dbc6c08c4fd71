"""The executor's I/O shell: Kafka in and out, live calls, resident runtimes.

Delivery guarantee (exactly once for recorded effects):

* Ownership follows ``runs.inbox`` partitions (one consumer group). On assignment we first
  wait until the previous owner's transaction on those partitions has ended (committed
  offsets read with require_stable: a zombie that sent its offsets before stalling can still
  commit, and a restore that read before it would lack its records — two writers of one
  chain, a recorded effect performed again), then the ``sessions`` and ``results`` tables of
  those partitions are read to the end (one deadline for all of it) before anything is
  served, and every run found RUNNING is rebuilt by replay and continued — a call found
  announced with no outcome follows its declared recovery (the core decides).
* A message or a live-call outcome whose handling raises (an engine bug, a record nothing
  can serve) does not stop the executor: that run is failed (RUN_FAILED from its last
  applied snapshot, its status update sent) and the message dead-lettered, so the same input
  cannot crash-loop every instance (``runplane_executor_poisoned_runs_total``).
* Every record an engine ``Step`` produces goes into the current group-commit batch; the batch
  is committed as one transaction together with the inbox positions, fenced by the consumer
  group metadata (``Committer``). An inbox message therefore counts as consumed exactly when
  its consequences are durable.
* Announce before act: a live call whose recovery is reconcile/operator starts only after the
  transaction carrying its EFFECT_ANNOUNCED committed (``Batch.after_commit``); a retry-safe
  call starts at once and its announce rides with whatever commit comes first.
* An aborted transaction voids everything since the last commit: the executor drops its
  runtimes and live calls, rewinds the consumer to the committed offsets and restores its
  partitions again — the same path as a fresh assignment, so it is the tested path.

The loop is a single asyncio task: Kafka calls are non-blocking polls (or short blocking polls
when no live call is outstanding), live calls are asyncio tasks bounded by ``LiveCallRunner``.

``Executor`` is the loop and nothing else; what it drives are collaborators it builds and
hands to each other (constructor injection, no shared ``self``):

* ``TxnLoop`` (``runplane.kafka.loop``): the Kafka skeleton — group, producer,
  restore-on-assign, rewind, lag, stop;
* ``RunTable`` (``state``): the owned partitions, the resident runtimes, the queue of runs to
  rebuild, and every read of the ``sessions`` and ``results`` tables;
* ``GroupCommit`` (``committer``): the pipelined group commit of the batch;
* ``Outbox`` (``outbox``): every record into the batch — a step's records through a
  ``RunSink``, commands by the one command table (``runplane.kafka.routes``), dead letters,
  signing;
* ``StepApplier`` (``stepping``): runtimes started and rebuilt, each step applied into the
  outbox, live calls launched (``calls.Performer``) and their outcomes drained back;
* ``RunEnds`` (``ending``): failing a run the engine could not serve (a poison pill, an
  unstartable StartRun);
* ``Timers`` (``timers``), ``VersionGate`` (``versions``), ``Repair`` (``repair``): due
  timers, stranded runs, repair orders and results retention.

An admission's StartRun, from arrival to commit: ``Executor._on_message`` (decode, checks) →
``VersionGate.unservable`` → ``Executor._start_run`` → ``StepApplier.start`` / ``apply`` →
``RunSink`` / ``Outbox`` (into the batch) → ``GroupCommit.maybe_commit`` (one transaction with
the inbox offset).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Message

from runplane.core import AgentRegistry, Event, ModelProvider, Tool, UnknownCapability
from runplane.errors import TerminalError, WireError
from runplane.kafka.acls import authorization_hint
from runplane.kafka.loop import LoopConfig, LoopHooks, TxnLoop, usable
from runplane.kafka.restore import Stopping
from runplane.kafka.txn import TxnAbortable, TxnFatal
from runplane.serving.health import Probe
from runplane.serving.tracing import current_headers, span_from_headers
from runplane.wire import (
    CaseReply,
    RunStatus,
    SessionSnapshot,
    Signal,
    StartRun,
    TaskDecision,
    Wake,
    serde_for,
)
from services.executor.calls import Performer
from services.executor.committer import Committer, GroupCommit
from services.executor.ending import RunEnds
from services.executor.metrics import executor_metrics
from services.executor.outbox import Outbox
from services.executor.policy import runtime_options
from services.executor.repair import Repair
from services.executor.settings import ExecutorSettings
from services.executor.state import PartitionState, RunTable
from services.executor.stepping import StepApplier
from services.executor.streaming import KafkaPublish, RunStreams
from services.executor.timers import Timers
from services.executor.topology import INPUT, OUTPUTS, SERVICE, group_id
from services.executor.versions import VersionGate

log = logging.getLogger(__name__)

# One deadline for everything an assignment does before serving (the previous owner's
# transaction, then both tables): above transaction.timeout.ms, well under the consumer's
# max.poll.interval.ms (300 s), which a rebalance callback counts against.
RESTORE_DEADLINE_S = 120.0


def loop_config(settings: ExecutorSettings) -> LoopConfig:
    """The executor's Kafka loop: its group, its transactional id, the consumer's timings."""
    return LoopConfig(
        service=SERVICE,
        group_id=group_id(settings.base),
        topics=(settings.base.topic(INPUT),),
        transactional_id=settings.transactional_id,
        restore_timeout_s=RESTORE_DEADLINE_S,
        journal_signer=settings.journal_signer,
        producer_overrides={"transaction.timeout.ms": settings.transaction_timeout_ms},
        consumer_overrides={
            "session.timeout.ms": settings.session_timeout_ms,
            "heartbeat.interval.ms": max(300, settings.session_timeout_ms // 6),
            "fetch.wait.max.ms": 20,
        },
    )


class Executor:
    """One executor instance. ``run(stop)`` blocks (as a coroutine) until ``stop`` is set."""

    def __init__(
        self,
        settings: ExecutorSettings,
        *,
        registry: AgentRegistry,
        tools: Mapping[str, Tool],
        providers: Mapping[str, ModelProvider],
        probe: Probe | None = None,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        calendars: Any = None,
    ) -> None:
        self.settings = settings
        base = settings.base
        self._registry = registry
        self._wall_ms = wall_ms
        # The topology's list, so what the executor writes is what its ACLs are derived from.
        self._topic = {name: base.topic(name) for name in (INPUT, *OUTPUTS)}
        self._serde = serde_for(base)
        metrics = self._metrics = executor_metrics()
        hooks = LoopHooks(restore=self._restore, revoke=self._revoke)
        self._loop = TxnLoop(base, loop_config(settings), hooks, probe=probe)
        self.ready = self._loop.ready
        self._group = GroupCommit(max_records=settings.batch_max, max_s=settings.batch_ms / 1000)
        self._table = RunTable(
            self._loop,
            self._serde,
            self._topic,
            partitions=base.partitions,
            retention_ms=settings.retention_ms,
            wall_ms=wall_ms,
            metrics=metrics,
        )
        # The live stream (runs.stream): produced outside the transactions, best effort.
        self._publish = KafkaPublish(base, self._serde) if settings.stream else None
        streams = None if self._publish is None else RunStreams(self._publish, wall_ms)
        self._outbox = Outbox(
            self._group,
            self._serde,
            self._topic,
            metrics=metrics,
            wall_ms=wall_ms,
            emitter_key=settings.emitter_key,
            streams=streams,
        )
        self._ends = RunEnds(self._table, self._outbox, metrics=metrics, wall_ms=wall_ms)
        # What every runtime is built with: calendars, tool declarations, limits, policy.
        engine = runtime_options(settings, calendars, {n: t.decl for n, t in tools.items()})
        performer = Performer(
            tools=tools,
            providers=providers,
            max_inflight=settings.max_inflight,
            call_timeout_s=settings.call_timeout_s,
            streams=streams,
        )
        self._steps = StepApplier(
            self._table,
            self._outbox,
            self._ends,
            registry=registry,
            engine=engine,
            performer=performer,
            tools=dict(tools),
            group=self._group,
            metrics=metrics,
            wall_ms=wall_ms,
        )
        self._timers = Timers(
            self._table, self._steps, self._outbox, self._ends, metrics=metrics, wall_ms=wall_ms
        )
        self._versions = VersionGate(
            registry,
            self._table,
            self._outbox,
            self._ends,
            serve=self._on_message,  # a released run's held records: the inbox path
            limits=settings.limits,
            metrics=metrics,
            wall_ms=wall_ms,
        )
        self._repair = Repair(
            registry, self._table, self._outbox, self._steps, metrics=metrics, wall_ms=wall_ms
        )
        self._last_housekeeping = 0.0
        self._last_poll = 0.0

    @property
    def stats(self) -> dict[str, int]:
        return self._group.stats

    # ------------------------------------------------------------------ lifecycle
    async def run(self, stop: threading.Event) -> None:
        self._loop.stop = stop
        steps, table = self._steps, self._table
        try:
            self._start()
            while not stop.is_set():
                busy = False
                if time.monotonic() - self._last_poll >= 0.002 or not steps.tasks:
                    # A zero-timeout consume still costs ~0.4 ms; while live calls keep the
                    # loop turning, asking Kafka every 2 ms is plenty.
                    self._last_poll = time.monotonic()
                    busy = self._poll()
                steps.drain()
                if table.to_rebuild:
                    self._rebuild_some()
                self._group.serve_delivery_reports()
                # Hot: work in hand, or a call launched just now that may finish within one
                # turn of the event loop (an instant tool does). Not hot: drained.
                hot = bool(busy or steps.completions or steps.launched or table.to_rebuild)
                now = time.monotonic()
                self._maybe_commit(now, drained=not hot)
                if now - self._last_housekeeping >= 0.5:
                    self._housekeeping(now)
                    self._versions.check()  # stranded runs: parked / released
                    self._timers.fire()
                self._loop.beat()
                # Yield to the live calls; sleep a little only when there is nothing to do.
                steps.launched = 0
                await asyncio.sleep(0 if hot else 0.0005)
            await self._drain_on_stop()
        except Stopping as exc:
            log.info("executor stopped during a rebalance: %s", exc)
        finally:
            self._close()

    def _start(self) -> None:
        self._loop.start()
        consumer = self._loop.consumer
        self._group.bind(self._loop.producer, Committer(self._loop.producer, consumer))
        meta = consumer.list_topics(self._topic[INPUT], timeout=30).topics.get(self._topic[INPUT])
        hint = (
            None
            if meta is None or meta.error is None
            else authorization_hint(meta.error.code(), SERVICE)
        )
        if hint is not None:
            raise TerminalError(f"cannot read topic {self._topic[INPUT]}: {hint}")
        if meta is None or meta.error is not None or not meta.partitions:
            raise TerminalError(f"topic {self._topic[INPUT]} does not exist")
        self._table.partitions = len(meta.partitions)
        self._loop.subscribe()

    async def _drain_on_stop(self, grace_s: float = 5.0) -> None:
        """Let outstanding live calls finish (briefly), commit what they produced, leave."""
        deadline = time.monotonic() + grace_s
        while self._steps.tasks and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
            self._steps.drain()
            self._maybe_commit(time.monotonic(), drained=True)
        self._group.settle()
        if not self._group.batch.empty:
            self._commit()

    def _close(self) -> None:
        # An abort here loses nothing: the next owner restores from what is durable.
        with contextlib.suppress(TxnAbortable):
            self._group.settle()
        self._group.close()
        self._steps.close()
        self._table.close()
        self._loop.close()
        if self._publish is not None:
            self._publish.close()

    # ------------------------------------------------------------------ rebalancing (hooks)
    def _revoke(self, partitions: list[int], lost: bool) -> None:
        numbers = set(partitions)
        # Drop first, so after-commit callbacks of the final batch start no call for them.
        self._drop(numbers)
        if lost:
            # Lost (not revoked): the group already moved on; anything uncommitted is void.
            with contextlib.suppress(TxnAbortable):
                self._group.settle()
            self._group.discard()
            if self._loop.producer.in_transaction:
                self._loop.producer.abort()
            return
        try:
            self._group.settle()
            if not self._group.batch.empty:
                self._group.commit_now()
        except TxnAbortable as exc:
            # Void: what the revoked partitions did since the last commit is redone by their
            # next owner; our remaining partitions are rebuilt on the coming assignment.
            log.warning("final commit before revocation aborted: %s", exc)
            self._group.discard()

    def _drop(self, numbers: set[int]) -> None:
        self._table.drop(numbers)
        self._steps.cancel(numbers)

    def _restore(self, numbers: list[int], deadline: float) -> None:
        self._table.restore(numbers, deadline)  # its RUNNING runs queued for _rebuild_some

    def _rebuild_some(self, limit: int = 16) -> None:
        """Rebuild up to ``limit`` RUNNING runs restored by an assignment (``RunTable.restore``)."""
        table = self._table
        done = 0
        while table.to_rebuild and done < limit:
            run_id, p = table.to_rebuild.popleft()
            part = table.parts.get(p)
            snap = part.sessions.get(run_id) if part is not None else None
            if snap is None or snap.status is not RunStatus.RUNNING or run_id in table.residents:
                continue  # revoked, ended or already rebuilt by a message meanwhile
            done += 1
            mark = self._outbox.mark()
            try:
                self._steps.rebuild(run_id, p, snap)
            except (TxnAbortable, TxnFatal):
                raise
            except Exception as exc:
                self._ends.poisoned(run_id, p, snap, mark, exc, "rebuild")

    # ------------------------------------------------------------------ inbox
    def _poll(self) -> bool:
        idle = (
            not self._steps.tasks
            and self._group.batch.empty
            and not self._steps.completions
            and not self._group.in_flight
        )
        consumer = self._loop.consumer
        msgs: list[Message] = []
        if idle:
            # poll() returns at the first message; consume() would wait out its timeout
            # trying to fill the batch, adding that wait to every run's latency.
            first = consumer.poll(0.05)
            if first is None:
                return False
            msgs.append(first)
        # One zero-timeout consume per turn (each costs ~0.4 ms): what is here now; the rest
        # is taken on the next turns while this batch is served and committed.
        msgs.extend(consumer.consume(self.settings.batch_max, timeout=0))
        for i, msg in enumerate(msgs, 1):
            self._on_message(msg)
            if i % 64 == 0:  # a long batch of work must not starve the commit in flight
                self._group.serve_delivery_reports()
        return bool(msgs)

    def _on_message(self, msg: Message) -> None:
        if not usable(msg):  # an event, not a record (raises on a fatal error or missing ACL)
            return
        self._group.batch.consumed(time.monotonic())
        p = msg.partition() or 0
        part = self._table.parts.get(p)
        if part is None:  # not restored (revoked meanwhile): the owner serves it
            return
        outbox = self._outbox
        raw = msg.value()
        try:
            record = self._serde.decode(INPUT, raw if isinstance(raw, bytes) else b"")
        except WireError as exc:
            outbox.dead_letter(msg, f"undecodable: {exc}", "undecodable")
            return
        if not isinstance(record, StartRun | Signal | TaskDecision | CaseReply | Wake):
            outbox.dead_letter(
                msg, f"{type(record).__name__} does not belong in the inbox", "wrong_type"
            )
            return
        run_id = record.session_id
        key = msg.key()
        key_text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
        if key_text != run_id:
            outbox.dead_letter(
                msg, f"key {key_text!r} does not match session_id {run_id!r}", "bad_key"
            )
            return
        if self._versions.unservable(msg, part, record):  # held for a stranded run, not failed
            return
        before = part.sessions.get(run_id)
        mark = outbox.mark()
        name = f"executor {type(record).__name__}"
        with span_from_headers(name, msg.headers(), {"runplane.run_id": run_id}) as span:
            outbox.trace = current_headers() if span is not None else None
            try:
                if isinstance(record, StartRun):
                    self._start_run(msg, part, p, record)
                else:
                    self._deliver(msg, part, p, record)
            except (TxnAbortable, TxnFatal):
                raise
            except Exception as exc:
                start = record if isinstance(record, StartRun) and before is None else None
                self._ends.poisoned(run_id, p, before, mark, exc, "message", start=start)
                reason = f"run {run_id}: serving it raised {type(exc).__name__}"
                outbox.dead_letter(msg, reason, "poisoned")
            finally:
                outbox.trace = None

    def _start_run(self, msg: Message, part: PartitionState, p: int, start: StartRun) -> None:
        if start.session_id in part.sessions or start.session_id in part.ended:
            self._outbox.dead_letter(
                msg, f"run {start.session_id} already started", "duplicate_start"
            )
            return
        now_ms = self._wall_ms()
        try:
            spec = self._registry.spec_for(start.capability, start.agent_version)
        except UnknownCapability as exc:
            self._ends.fail_unstartable(start, str(exc), now_ms, p)
            return
        self._steps.start(spec, start, p, now_ms)

    def _deliver(self, msg: Message, part: PartitionState, p: int, event: Event) -> None:
        run_id = event.session_id
        if isinstance(event, Wake) and self._repair.order(msg, part, p, event):
            return  # an operator's repair order (services/executor/repair.py)
        snap = part.sessions.get(run_id)
        if snap is None:
            self._refuse_unknown(msg, part, run_id)
            return
        res = self._table.residents.get(run_id) or self._steps.rebuild(run_id, p, snap)
        if res is None:
            self._refuse_unrebuilt(msg, part, run_id, snap)
            return
        step = res.runtime.deliver(event, now_ms=self._wall_ms())
        if step.rejected is not None:
            self._outbox.dead_letter(
                msg, f"run {run_id}: {step.rejected}", step.rejected_kind or "rejected"
            )
            return
        res.last_active = time.monotonic()
        self._steps.apply(run_id, p, res.runtime, step)

    def _refuse_unknown(self, msg: Message, part: PartitionState, run_id: str) -> None:
        ended = part.ended.get(run_id)
        if ended is not None:
            self._outbox.dead_letter(msg, f"run {run_id} already ended ({ended})", "run_ended")
        else:
            self._outbox.dead_letter(msg, f"unknown session {run_id}", "unknown_session")

    def _refuse_unrebuilt(
        self, msg: Message, part: PartitionState, run_id: str, snap: SessionSnapshot
    ) -> None:
        if run_id in part.ended:
            # The rebuild itself ended the run (e.g. its replay quarantined it).
            reason = f"run {run_id} ended during its rebuild ({part.ended[run_id]})"
            self._outbox.dead_letter(msg, reason, "run_ended")
        else:
            reason = f"run {run_id}: unknown capability {snap.capability!r}"
            self._outbox.dead_letter(msg, reason, "unknown_capability")

    # ------------------------------------------------------------------ commit
    def _maybe_commit(self, now: float, *, drained: bool = False) -> None:
        """Adaptive group commit (``GroupCommit``); an abort rebuilds what we own."""
        try:
            self._group.maybe_commit(now, drained=drained)
        except TxnAbortable as exc:
            log.warning("group commit aborted, rebuilding owned partitions: %s", exc)
            self._after_abort()

    def _commit(self) -> None:
        """Commit the current batch now, synchronously (stop)."""
        try:
            self._group.commit_now()
        except TxnAbortable as exc:
            log.warning("group commit aborted, rebuilding owned partitions: %s", exc)
            self._after_abort()

    def _after_abort(self) -> None:
        """Everything since the last commit is void: start over from what is durable."""
        self._drop(set(self._table.parts))
        self._steps.completions.clear()
        self._group.discard()  # built on the aborted state: void too
        self._loop.restart_from_committed()

    # ------------------------------------------------------------------ housekeeping
    def _housekeeping(self, now: float) -> None:
        self._last_housekeeping = now
        self._metrics.evictions.inc(self._table.evict_idle(now, self.settings.idle_grace_s))
        resident, parked, evicted = self._table.census()
        self._metrics.runtimes.labels("resident").set(resident)
        self._metrics.runtimes.labels("parked").set(parked)
        self._metrics.runtimes.labels("evicted").set(evicted)
        self._repair.expire(self._wall_ms())
        self._metrics.consumer_lag.set(self._loop.lag())

    # ------------------------------------------------------------------ introspection
    @property
    def resident_sessions(self) -> frozenset[str]:
        return frozenset(self._table.residents)

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._table.parts)
