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
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from runplane.core import (
    AgentRegistry,
    Event,
    Generation,
    LiveCall,
    ModelProvider,
    Outcome,
    Runtime,
    Step,
    Tool,
    UnknownCapability,
)
from runplane.core.engine import fail_from_snapshot, fail_unstartable, withdrawal
from runplane.errors import TerminalError, WireError
from runplane.kafka.clients import consumer_config, transactional_producer_config
from runplane.kafka.deadletter import dead_letter
from runplane.kafka.partition import partition_for
from runplane.kafka.restore import Restorer, await_previous_owner
from runplane.kafka.txn import TransactionalProducer, TxnAbortable, TxnFatal
from runplane.service import Probe
from runplane.wire import (
    CancelDeadline,
    CaseReply,
    CloseTask,
    Cost,
    GetCaseState,
    JournalKind,
    MeetDeadline,
    OpenTask,
    PutCaseState,
    Record,
    RegisterDeadline,
    RunStatus,
    RunStatusUpdate,
    Serde,
    SessionSnapshot,
    Signal,
    StartRun,
    TaskDecision,
    Wake,
)
from services.executor.batch import Batch, Out
from services.executor.committer import Committer
from services.executor.live import CallPolicy, LiveCallRunner, LiveOutcome, Verdict
from services.executor.metrics import executor_metrics
from services.executor.settings import ExecutorSettings
from services.executor.state import ENDED, WAITING, PartitionState, restore_partitions, results_key
from services.executor.topology import INPUT, OUTPUTS, SERVICE, group_id

log = logging.getLogger(__name__)

_CASE_COMMANDS = (GetCaseState, PutCaseState, RegisterDeadline, MeetDeadline, CancelDeadline)
# One deadline for everything an assignment does before serving (the previous owner's
# transaction, then both tables): above transaction.timeout.ms, well under the consumer's
# max.poll.interval.ms (300 s), which a rebalance callback counts against.
RESTORE_DEADLINE_S = 120.0


@dataclass
class Resident:
    """A run's runtime kept in memory between messages."""

    runtime: Runtime
    partition: int
    last_active: float


@dataclass(frozen=True)
class Completion:
    """A finished live call, waiting for the loop to hand it to its runtime."""

    session_id: str
    runtime: Runtime
    call: LiveCall
    outcome: LiveOutcome


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
        self._tools = dict(tools)
        self._tool_decls = {name: tool.decl for name, tool in tools.items()}
        self._providers = dict(providers)
        self._probe = probe
        self._wall_ms = wall_ms
        self._calendars = calendars
        self._serde = Serde.from_settings(base)
        # The topology's list, so what the executor writes is what its ACLs are derived from.
        self._topic = {name: base.topic(name) for name in (INPUT, *OUTPUTS)}
        self._metrics = executor_metrics()
        self._live_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._runner = LiveCallRunner(settings.max_inflight)
        self._parts: dict[int, PartitionState] = {}
        self._residents: dict[str, Resident] = {}
        self._completions: deque[Completion] = deque()
        self._tasks: dict[asyncio.Task[None], str] = {}
        self._batch = Batch()
        self._to_rebuild: deque[tuple[str, int]] = deque()
        self._npart = base.partitions
        self._consumer: Consumer | None = None
        self._producer: TransactionalProducer | None = None
        self._committer: Committer | None = None
        self._restorer: Restorer | None = None
        self._last_housekeeping = 0.0
        self.ready = threading.Event()
        self.stats = {"commits": 0, "records": 0}
        self._launched = 0
        self._last_poll = 0.0
        # One worker: transactions of one producer are sequential; the loop keeps serving
        # (and filling the next batch) while the previous one commits.
        self._commit_pool = ThreadPoolExecutor(1, thread_name_prefix="executor-commit")
        self._in_commit: tuple[Future[None], Batch] | None = None

    # ------------------------------------------------------------------ lifecycle
    async def run(self, stop: threading.Event) -> None:
        self._start()
        try:
            while not stop.is_set():
                busy = False
                if time.monotonic() - self._last_poll >= 0.002 or not self._tasks:
                    # A zero-timeout consume still costs ~0.4 ms; while live calls keep the
                    # loop turning, asking Kafka every 2 ms is plenty.
                    self._last_poll = time.monotonic()
                    busy = self._poll()
                self._drain_completions()
                if self._to_rebuild:
                    self._rebuild_some()
                self._serve_delivery_reports()
                now = time.monotonic()
                self._maybe_commit(now)
                if now - self._last_housekeeping >= 0.5:
                    self._housekeeping(now)
                if self._probe is not None:
                    self._probe.beat()
                # Yield to the live calls; sleep a little only when there is nothing to do
                # (a call launched just now may finish within one turn of the event loop).
                hot = busy or self._completions or self._launched or self._to_rebuild
                self._launched = 0
                await asyncio.sleep(0 if hot else 0.0005)
            await self._drain_on_stop()
        finally:
            self._close()

    def _start(self) -> None:
        base = self.settings.base
        self._producer = TransactionalProducer(
            transactional_producer_config(
                base,
                self.settings.transactional_id,
                **{"transaction.timeout.ms": self.settings.transaction_timeout_ms, "linger.ms": 1},
            )
        )
        self._producer.init()
        self._consumer = Consumer(
            consumer_config(
                base,
                group_id(base),
                **{
                    "session.timeout.ms": self.settings.session_timeout_ms,
                    "heartbeat.interval.ms": max(300, self.settings.session_timeout_ms // 6),
                    "partition.assignment.strategy": "range",
                    "fetch.wait.max.ms": 20,
                },
            )
        )
        self._committer = Committer(self._producer, self._consumer)
        self._restorer = Restorer(base)
        meta = self._consumer.list_topics(self._topic[INPUT], timeout=30).topics.get(
            self._topic[INPUT]
        )
        if meta is None or meta.error is not None or not meta.partitions:
            raise TerminalError(f"topic {self._topic[INPUT]} does not exist")
        self._npart = len(meta.partitions)
        self._consumer.subscribe(
            [self._topic[INPUT]],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        if self._probe is not None:
            self._probe.set_ready(False, "waiting for partition assignment")

    async def _drain_on_stop(self, grace_s: float = 5.0) -> None:
        """Let outstanding live calls finish (briefly), commit what they produced, leave."""
        deadline = time.monotonic() + grace_s
        while self._tasks and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
            self._drain_completions()
            self._maybe_commit(time.monotonic())
        self._settle_commit()
        if not self._batch.empty:
            self._commit()

    def _close(self) -> None:
        # An abort here loses nothing: the next owner restores from what is durable.
        with contextlib.suppress(TxnAbortable):
            self._settle_commit()
        self._commit_pool.shutdown(wait=True)
        for task in list(self._tasks):
            task.cancel()
        for res in self._residents.values():
            res.runtime.close()
        self._residents.clear()
        if self._producer is not None:
            try:
                self._producer.abort()
            except TxnFatal:
                log.warning("abort on close failed; the next init of this id aborts it")
        if self._consumer is not None:
            self._consumer.close()  # leaves the group: partitions move at once
        if self._restorer is not None:
            self._restorer.close()
        if self._producer is not None:
            self._producer.flush(5.0)

    # ------------------------------------------------------------------ rebalancing
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = sorted({tp.partition for tp in partitions})
        if self._probe is not None:
            self._probe.set_ready(False, f"restoring partitions {numbers}")
        deadline = time.monotonic() + RESTORE_DEADLINE_S
        # Before reading any table: the previous owner's open transaction must be over.
        await_previous_owner(consumer, partitions, timeout_s=deadline - time.monotonic())
        self._restore(numbers, deadline)
        log.info("executor partitions assigned and restored", extra={"partitions": numbers})
        self.ready.set()
        if self._probe is not None:
            self._probe.set_ready(True)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = {tp.partition for tp in partitions}
        # Drop first, so after-commit callbacks of the final batch start no call for them.
        self._drop(numbers)
        try:
            self._settle_commit()
            if not self._batch.empty:
                self._commit_or_raise()
        except TxnAbortable as exc:
            # Void: what the revoked partitions did since the last commit is redone by their
            # next owner; our remaining partitions are rebuilt on the coming assignment.
            log.warning("final commit before revocation aborted: %s", exc)
            self._batch = Batch()
        log.info("executor partitions revoked", extra={"partitions": sorted(numbers)})

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Lost (not revoked): the group already moved on; anything uncommitted is void.
        self._drop({tp.partition for tp in partitions})
        with contextlib.suppress(TxnAbortable):
            self._settle_commit()
        self._batch = Batch()
        if self._producer is not None and self._producer.in_transaction:
            self._producer.abort()

    def _drop(self, numbers: set[int]) -> None:
        for sid, res in list(self._residents.items()):
            if res.partition in numbers:
                res.runtime.close()
                del self._residents[sid]
        for task, sid in list(self._tasks.items()):
            if partition_for(sid, self._npart) in numbers:
                task.cancel()
                del self._tasks[task]
        for p in numbers:
            self._parts.pop(p, None)

    def _restore(self, numbers: list[int], deadline: float) -> None:
        assert self._restorer is not None
        restored = restore_partitions(
            self._restorer,
            self._serde,
            self._topic["sessions"],
            self._topic["results"],
            numbers,
            deadline=deadline,
        )
        self._parts.update(restored)
        # RUNNING runs are rebuilt by the loop after this returns, a few per turn — not here:
        # a rebalance callback that replays every run of its partitions counts against
        # max.poll.interval.ms. A message for one of them meanwhile rebuilds it on demand.
        for p in numbers:
            for sid, snap in self._parts[p].sessions.items():
                if snap.status is RunStatus.RUNNING:
                    self._to_rebuild.append((sid, p))

    def _rebuild_some(self, limit: int = 16) -> None:
        """Rebuild up to ``limit`` RUNNING runs restored by an assignment (see ``_restore``)."""
        done = 0
        while self._to_rebuild and done < limit:
            sid, p = self._to_rebuild.popleft()
            part = self._parts.get(p)
            snap = part.sessions.get(sid) if part is not None else None
            if snap is None or snap.status is not RunStatus.RUNNING or sid in self._residents:
                continue  # revoked, ended or already rebuilt by a message meanwhile
            done += 1
            mark = self._batch.mark()
            try:
                self._rebuild(sid, p, snap)
            except (TxnAbortable, TxnFatal):
                raise
            except Exception as exc:
                self._poisoned(sid, p, snap, mark, exc, "rebuild")

    # ------------------------------------------------------------------ inbox
    def _poll(self) -> bool:
        assert self._consumer is not None
        idle = (
            not self._tasks
            and self._batch.empty
            and not self._completions
            and self._in_commit is None
        )
        msgs: list[Message] = []
        if idle:
            # poll() returns at the first message; consume() would wait out its timeout
            # trying to fill the batch, adding that wait to every run's latency.
            first = self._consumer.poll(0.05)
            if first is None:
                return False
            msgs.append(first)
        msgs.extend(self._consumer.consume(self.settings.batch_max, timeout=0))
        for i, msg in enumerate(msgs, 1):
            self._on_message(msg)
            if i % 64 == 0:  # a long batch of work must not starve the commit in flight
                self._serve_delivery_reports()
        return bool(msgs)

    def _on_message(self, msg: Message) -> None:
        err = msg.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                log.warning("inbox consumer error: %s", err.str())
            return
        self._batch.consumed(time.monotonic())
        p = msg.partition() or 0
        part = self._parts.get(p)
        if part is None:  # not restored (revoked meanwhile): the owner serves it
            return
        raw = msg.value()
        try:
            record = self._serde.decode(INPUT, raw if isinstance(raw, bytes) else b"")
        except WireError as exc:
            self._dead_letter(msg, f"undecodable: {exc}", "undecodable")
            return
        if not isinstance(record, StartRun | Signal | TaskDecision | CaseReply | Wake):
            self._dead_letter(
                msg, f"{type(record).__name__} does not belong in the inbox", "wrong_type"
            )
            return
        sid = record.session_id
        key = msg.key()
        key_text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
        if key_text != sid:
            self._dead_letter(msg, f"key {key_text!r} does not match session_id {sid!r}", "bad_key")
            return
        before = part.sessions.get(sid)
        mark = self._batch.mark()
        try:
            if isinstance(record, StartRun):
                self._start_run(msg, part, p, record)
            else:
                self._deliver(msg, part, p, record)
        except (TxnAbortable, TxnFatal):
            raise
        except Exception as exc:
            start = record if isinstance(record, StartRun) and before is None else None
            self._poisoned(sid, p, before, mark, exc, "message", start=start)
            self._dead_letter(msg, f"run {sid}: serving it raised {type(exc).__name__}", "poisoned")

    def _start_run(self, msg: Message, part: PartitionState, p: int, start: StartRun) -> None:
        if start.session_id in part.sessions or start.session_id in part.ended:
            self._dead_letter(msg, f"run {start.session_id} already started", "duplicate_start")
            return
        now_ms = self._wall_ms()
        try:
            spec = self._registry.spec(start.capability)
        except UnknownCapability as exc:
            self._fail_unstartable(start, str(exc), now_ms, p)
            return
        runtime, step = Runtime.start(
            spec, start, now_ms=now_ms, calendars=self._calendars, tools=self._tool_decls
        )
        self._metrics.runs_started.inc()
        self._residents[start.session_id] = Resident(runtime, p, time.monotonic())
        self._apply(start.session_id, p, runtime, step, previous=None)

    def _deliver(self, msg: Message, part: PartitionState, p: int, event: Event) -> None:
        sid = event.session_id
        snap = part.sessions.get(sid)
        if snap is None:
            ended = part.ended.get(sid)
            if ended is not None:
                self._dead_letter(msg, f"run {sid} already ended ({ended})", "run_ended")
            else:
                self._dead_letter(msg, f"unknown session {sid}", "unknown_session")
            return
        res = self._residents.get(sid) or self._rebuild(sid, p, snap)
        if res is None:
            if sid in part.ended:
                # The rebuild itself ended the run (e.g. its replay quarantined it).
                self._dead_letter(
                    msg, f"run {sid} ended during its rebuild ({part.ended[sid]})", "run_ended"
                )
            else:
                self._dead_letter(
                    msg, f"run {sid}: unknown capability {snap.capability!r}", "unknown_capability"
                )
            return
        previous = part.sessions.get(sid)
        step = res.runtime.deliver(event, now_ms=self._wall_ms())
        if step.rejected is not None:
            self._dead_letter(msg, f"run {sid}: {step.rejected}", step.rejected_kind or "rejected")
            return
        res.last_active = time.monotonic()
        self._apply(sid, p, res.runtime, step, previous=previous)

    def _rebuild(self, sid: str, p: int, snap: SessionSnapshot) -> Resident | None:
        """Bring a non-resident run back by replaying its result journal."""
        try:
            spec = self._registry.spec(snap.capability)
        except UnknownCapability:
            log.error("cannot rebuild run %s: unknown capability %s", sid, snap.capability)
            return None
        results = self._parts[p].results_of(sid)
        runtime, step = Runtime.restore(
            spec,
            snap,
            results,
            now_ms=self._wall_ms(),
            calendars=self._calendars,
            tools=self._tool_decls,
        )
        self._metrics.replays.inc()
        self._metrics.replay_length.observe(step.replayed)
        res = Resident(runtime, p, time.monotonic())
        self._residents[sid] = res
        self._apply(sid, p, runtime, step, previous=snap)
        return res if not runtime.ended else None

    def _fail_unstartable(
        self,
        start: StartRun,
        reason: str,
        now_ms: int,
        p: int,
        *,
        error_type: str = "UnknownCapability",
    ) -> None:
        """A StartRun nobody can run: the engine closes its chain (RUN_FAILED) and tells
        admission; the step is applied like any other."""
        step = fail_unstartable(start, reason, now_ms=now_ms, error_type=error_type)
        self._apply(start.session_id, p, None, step, previous=None)

    # ------------------------------------------------------------------ applying a step
    def _apply(
        self,
        sid: str,
        p: int,
        runtime: Runtime | None,
        step: Step,
        previous: SessionSnapshot | None,
    ) -> None:
        now = time.monotonic()
        part = self._parts[p]
        for record in step.records:
            self._out("journal", sid, record, now)
            if record.kind is JournalKind.EFFECT_IN_DOUBT:
                self._metrics.in_doubt.labels(record.attrs.get("recovery", "unknown")).inc()
        for entry in step.results:
            self._out(
                "results", results_key(sid, entry.era, entry.call_seq), entry, now, partition=p
            )
            part.results_of(sid)[(entry.era, entry.call_seq)] = entry
        for command in step.commands:
            self._out_command(command, now)
        if step.records or step.results:
            self._out("sessions", sid, step.snapshot, now)
            part.sessions[sid] = step.snapshot
        if step.end is not None:
            self._ended(sid, step, previous, now)
            return
        if runtime is None:  # pragma: no cover - only the engine's failure steps lack one; they end
            return
        for call in step.live_calls:
            if call.announce_first:
                self._batch.after_commit(functools.partial(self._launch, sid, runtime, call), now)
            else:
                self._launch(sid, runtime, call)

    def _ended(self, sid: str, step: Step, previous: SessionSnapshot | None, now: float) -> None:
        status = step.end
        assert status is not None
        self._metrics.runs_ended.labels(str(status).lower()).inc()
        parked = previous.parked_on if previous is not None else None
        close = withdrawal(parked, step, clock=self._wall_ms)
        if close is not None:
            # The run ended while a person was asked something: withdraw the task.
            self._out("tasks.commands", close.task_id, close, now)
        res = self._residents.pop(sid, None)
        if res is not None:
            res.runtime.close()
        part = self._parts.get(partition_for(sid, self._npart))
        if part is not None:
            part.end(sid, status)

    def _out_command(self, command: Record, now: float) -> None:
        if isinstance(
            command, (OpenTask, CloseTask)
        ):  # CloseTask: the core withdraws a task carried across eras
            self._out("tasks.commands", command.task_id, command, now)
        elif isinstance(command, _CASE_COMMANDS):
            self._out("cases.commands", command.case_id, command, now)
        elif isinstance(command, RunStatusUpdate):
            self._out("admission", command.admission_key, command, now)
        else:
            # The core's Command union grew and this shell was not told: losing a command
            # silently would strand a run, so stop and let the supervisor show the error.
            raise TerminalError(f"no route for command {type(command).__name__}")

    def _out(
        self, topic: str, key: str, record: Record, now: float, *, partition: int | None = None
    ) -> None:
        if topic == "sessions":
            # Encoded at commit, once per run per batch: later steps replace earlier rows.
            lazy = functools.partial(self._serde.encode, topic, record)
            out = Out(self._topic[topic], key.encode("utf-8"), None, partition, lazy=lazy)
            self._batch.add(out, now, last_wins=True)
            return
        value = self._serde.encode(topic, record)
        self._batch.add(Out(self._topic[topic], key.encode("utf-8"), value, partition), now)

    def _dead_letter(self, msg: Message, reason: str, kind: str) -> None:
        self._metrics.deadletters.labels(kind).inc()
        letter = dead_letter(msg, reason, SERVICE, at_ms=self._wall_ms())
        key = letter.key or b""
        value = self._serde.encode("deadletter", letter)
        self._batch.add(Out(self._topic["deadletter"], key, value), time.monotonic())
        log.info("dead-lettered inbox record", extra={"reason": reason})

    # ------------------------------------------------------------------ live calls
    def _launch(self, sid: str, runtime: Runtime, call: LiveCall) -> None:
        res = self._residents.get(sid)
        if res is None or res.runtime is not runtime:
            return  # revoked, evicted or rebuilt meanwhile: the new owner decides
        task = asyncio.get_running_loop().create_task(self._perform(sid, runtime, call))
        self._launched += 1
        self._tasks[task] = sid
        task.add_done_callback(lambda t: self._tasks.pop(t, None))

    async def _perform(self, sid: str, runtime: Runtime, call: LiveCall) -> None:
        policy = CallPolicy(
            timeout_s=min(call.timeout_s, self.settings.call_timeout_s),
            max_attempts=call.retry.max_attempts,
            initial_backoff_s=call.retry.initial_backoff_s,
            backoff_multiplier=call.retry.multiplier,
            max_backoff_s=call.retry.max_backoff_s,
            # A retry-declared effect is safe to repeat even when in doubt.
            mutating=call.mutating and call.recovery.value != "retry",
        )
        outcome = await self._runner.run(lambda: self._call_once(call), policy)
        calls, seconds = self._live_metrics(call.family, outcome.verdict.value)
        calls.inc()
        seconds.observe(outcome.elapsed_s)
        self._completions.append(Completion(sid, runtime, call, outcome))

    def _live_metrics(self, family: str, verdict: str) -> tuple[Any, Any]:
        # labels() locks and looks the child up on every call; the label sets are few.
        key = (family, verdict)
        children = self._live_children.get(key)
        if children is None:
            children = (
                self._metrics.live_calls.labels(family, verdict),
                self._metrics.live_call_seconds.labels(family),
            )
            self._live_children[key] = children
        return children

    async def _call_once(self, call: LiveCall) -> Any:
        request = call.request
        if call.family == "generation":
            provider = self._providers.get(call.target)
            if provider is None:
                raise TerminalError(f"no model provider named {call.target!r}")
            gen = await provider.generate(
                str(request.get("model", "")),
                request.get("prompt"),
                dict(request.get("params") or {}),
            )
            return gen
        tool = self._tools.get(call.target)
        if tool is None:
            raise TerminalError(f"no tool named {call.target!r}")
        # The core derives the key (the agent's, or one from the call's first announce) so
        # that a probe and a later era use the very same one.
        return await tool.call(
            dict(request.get("args") or {}), idempotency_key=call.idempotency_key
        )

    def _drain_completions(self) -> None:
        served = 0
        while self._completions:
            served += 1
            if served % 64 == 0:  # as in _poll: keep the commit in flight moving
                self._serve_delivery_reports()
            done = self._completions.popleft()
            res = self._residents.get(done.session_id)
            if res is None or res.runtime is not done.runtime:
                continue  # stale: the run moved or was rebuilt; its journal decides
            res.last_active = time.monotonic()
            # The last snapshot applied is the runtime's current state (every step that
            # changes it carries records); it names the call in flight.
            previous = self._parts[res.partition].sessions[done.session_id]
            mark = self._batch.mark()
            try:
                self._complete(done, res, previous)
            except (TxnAbortable, TxnFatal):
                raise
            except Exception as exc:
                self._poisoned(done.session_id, res.partition, previous, mark, exc, "completion")

    def _complete(self, done: Completion, res: Resident, previous: SessionSnapshot) -> None:
        if done.outcome.verdict is Verdict.IN_DOUBT:
            # The outcome is unknown (timeout after send, 5xx): the core runs the declared
            # recovery (retry, probe, operator task) at the same era and slot — no rebuild, so
            # a checkpointed run does not restart an era and re-pay what followed its checkpoint.
            step = res.runtime.in_doubt(done.call.call_seq, now_ms=self._wall_ms())
        else:
            step = res.runtime.complete(
                done.call.call_seq, _to_outcome(done.outcome), now_ms=self._wall_ms()
            )
        if step.rejected is not None:
            log.warning("live call outcome not applied: %s", step.rejected)
            return
        self._apply(done.session_id, res.partition, res.runtime, step, previous=previous)

    def _poisoned(
        self,
        sid: str,
        p: int,
        before: SessionSnapshot | None,
        mark: tuple[int, int],
        exc: Exception,
        where: str,
        *,
        start: StartRun | None = None,
    ) -> None:
        """Serving run ``sid`` raised: undo the half-applied work and fail the run, so that the
        same input cannot crash every instance in turn (a poison pill). The run's chain goes
        on from ``before`` — the last snapshot applied before this work began."""
        log.exception("serving run %s raised (%s); failing the run", sid, where, exc_info=exc)
        self._metrics.poisoned.labels(where).inc()
        self._batch.rollback(mark)
        res = self._residents.pop(sid, None)
        if res is not None:
            res.runtime.close()
        part = self._parts.get(p)
        if part is None:
            return
        reason = f"executor error while serving the run ({where}): {type(exc).__name__}: {exc}"
        if before is None:
            part.sessions.pop(sid, None)
            part.forget_results(sid)
            if start is not None:
                self._fail_unstartable(
                    start, reason, self._wall_ms(), p, error_type="ExecutorError"
                )
            return
        part.ended.pop(sid, None)
        part.sessions[sid] = before
        if before.status not in ENDED:
            self._fail_from(before, p, reason)

    def _fail_from(self, snap: SessionSnapshot, p: int, reason: str) -> None:
        """Close a run's chain with RUN_FAILED after ``snap`` and tell admission and the
        worklist (a task it was parked on is withdrawn): the engine's step, applied."""
        step = fail_from_snapshot(snap, reason, now_ms=self._wall_ms())
        self._apply(snap.session_id, p, None, step, previous=snap)

    # ------------------------------------------------------------------ commit
    def _serve_delivery_reports(self) -> None:
        """Serve the producer's delivery reports here, on the loop thread, while a commit runs.

        confluent-kafka takes the GIL once per delivered message to run its delivery-report
        callback. ``commit_transaction`` (on the commit worker) waits for every message of the
        transaction to be reported, and with this thread busy each of those GIL hand-offs
        waited for a switch interval: a 1,000-record commit took 100-300 ms instead of ~10.
        Served from the thread that already holds the GIL, the same reports cost microseconds;
        librdkafka allows polling from any thread while another commits.
        """
        if self._in_commit is not None and self._producer is not None:
            self._producer.poll(0)

    def _maybe_commit(self, now: float) -> None:
        """Pipelined group commit: seal the batch when due and commit it on the worker while
        the loop goes on; collect the previous commit's result first."""
        if self._in_commit is not None:
            if not self._in_commit[0].done():
                return
            try:
                self._settle_commit()
            except TxnAbortable as exc:
                log.warning("group commit aborted, rebuilding owned partitions: %s", exc)
                self._after_abort()
                return
        if not self._batch.due(now, self.settings.batch_max, self.settings.batch_ms / 1000):
            return
        assert self._committer is not None
        batch, self._batch = self._batch, Batch()
        offsets, metadata = self._committer.seal()
        future = self._commit_pool.submit(self._committer.commit_sealed, batch, offsets, metadata)
        self._in_commit = (future, batch)

    def _settle_commit(self) -> None:
        """Wait for the commit in flight, if any; run its after-commit work (raises
        ``TxnAbortable`` when it aborted, ``TxnFatal`` when the producer is gone)."""
        if self._in_commit is None:
            return
        future, batch = self._in_commit
        self._in_commit = None
        future.result()
        self._committed(batch)

    def _committed(self, batch: Batch) -> None:
        self.stats["commits"] += 1
        self.stats["records"] += len(batch.records)
        for fn in batch.callbacks:
            fn()

    def _commit(self) -> None:
        """Commit the current batch now, synchronously (stop, revocation)."""
        try:
            self._commit_or_raise()
        except TxnAbortable as exc:
            log.warning("group commit aborted, rebuilding owned partitions: %s", exc)
            self._after_abort()

    def _commit_or_raise(self) -> None:
        assert self._committer is not None
        self._settle_commit()
        batch, self._batch = self._batch, Batch()
        offsets, metadata = self._committer.seal()
        self._committer.commit_sealed(batch, offsets, metadata)
        self._committed(batch)

    def _after_abort(self) -> None:
        """Everything since the last commit is void: start over from what is durable."""
        assert self._consumer is not None
        owned = sorted(self._parts)
        self._drop(set(owned))
        self._completions.clear()
        self._batch = Batch()  # built on the aborted state: void too
        deadline = time.monotonic() + RESTORE_DEADLINE_S
        assignment = self._consumer.assignment()
        if assignment:
            # Stable offsets first, then the tables they are consistent with (as on assign).
            committed = await_previous_owner(
                self._consumer, assignment, timeout_s=deadline - time.monotonic()
            )
            for tp in committed:
                offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                try:
                    self._consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
                except Exception as exc:  # partition being revoked: its next owner rewinds
                    log.info("seek skipped for %s[%d]: %s", tp.topic, tp.partition, exc)
        self._restore(owned, deadline)

    # ------------------------------------------------------------------ housekeeping
    def _housekeeping(self, now: float) -> None:
        self._last_housekeeping = now
        grace = self.settings.idle_grace_s
        for sid, res in list(self._residents.items()):
            if res.runtime.evictable(now - res.last_active, grace):
                res.runtime.close()
                del self._residents[sid]
                self._metrics.evictions.inc()
        parked = evicted = 0
        for part in self._parts.values():
            for sid, snap in part.sessions.items():
                if snap.status in ENDED or sid in self._residents:
                    continue
                if snap.status in WAITING:
                    parked += 1
                else:
                    evicted += 1
        self._metrics.runtimes.labels("resident").set(len(self._residents))
        self._metrics.runtimes.labels("parked").set(parked)
        self._metrics.runtimes.labels("evicted").set(evicted)
        self._update_lag()

    def _update_lag(self) -> None:
        assert self._consumer is not None
        assignment = self._consumer.assignment()
        if not assignment:
            return
        total = 0
        for tp in self._consumer.position(assignment):
            try:
                _, high = self._consumer.get_watermark_offsets(tp, cached=True)
            except Exception:  # no cached watermark yet; next time
                continue
            if tp.offset >= 0 and high >= 0:
                total += max(0, high - tp.offset)
        self._metrics.consumer_lag.set(total)

    # ------------------------------------------------------------------ introspection
    @property
    def resident_sessions(self) -> frozenset[str]:
        return frozenset(self._residents)

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self._parts)


def _to_outcome(out: LiveOutcome) -> Outcome:
    if out.verdict is Verdict.OK:
        value = out.value
        cost = None
        if isinstance(value, Generation):
            cost = Cost(
                tokens_in=value.tokens_in, tokens_out=value.tokens_out, units=value.cost_units
            )
            value = value.to_json()
        return Outcome.success(value, attempts=out.attempts, cost=cost)
    return Outcome.failure(
        out.error_type or "Error",
        out.error_message or "",
        retryable=out.retryable,
        attempts=out.attempts,
    )
