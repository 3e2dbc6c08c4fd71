"""The sweeper's I/O shell on faust-streaming: index ``cases`` in Redis, tick, send decisions.

A Faust agent streams ``cases`` into the due-time index (:mod:`services.sweeper.index`); a
Faust timer ticks every ``tick_ms`` with the injected clock and sends the decisions of
:func:`services.sweeper.decide.decide_tick` to ``cases.commands`` — nothing else: the cases
service confirms each decision and alone writes its consequences (the obligation's status,
the sealed sweep run, the follow-up admission). No Faust tables: the index lives in Redis.

**Delivery guarantee: at least once, and harmless when repeated.** A decision is sent and its
delivery awaited before its index entry is postponed by ``retry_ms``; a crash in between sends
it again. Every command is named from (case, obligation, due) (:mod:`runplane.core.keys`),
so a repeat — or the same decision from a second sweeper during a rebalance — is a duplicate
to the cases service. A case record is applied to Redis before Faust acknowledges it, and the
index records, with each batch, the next offset it covers; Faust's committed group offsets
only say where fetching resumes (they lag the index, never lead it), and a record below the
index's offset is skipped as already indexed.

**The Faust caveat: at ``at_least_once`` the consumer reads uncommitted records**
(faust-streaming builds its aiokafka consumer with ``isolation_level="read_uncommitted"``
unless ``processing_guarantee="exactly_once"``, whose rebalance bugs we avoid). So the stream
can deliver a case record from a cases-service transaction that is later aborted, and the
index can briefly hold an obligation that never existed — a *ghost*. That is harmless:

- usually the cases service retries the aborted batch at once and commits a record for the
  same case, which replaces the case's entries like any later record does;
- a decision about a ghost reaches the cases service, which confirms every decision against
  the obligations it holds and refuses one it does not hold: nothing is written;
- an entry whose decision stays unconfirmed for ``revalidate_ms`` is checked against the
  ``read_committed`` view of its partition (:mod:`services.sweeper.committed`), read up to at
  least the index's offset so every record behind the index is decided: an entry that view
  does not hold is dropped (``runplane_sweeper_revalidations_total{result="ghost"}``), one it
  holds is kept and checked again after another ``revalidate_ms``. A ghost is never retried
  forever, and a real obligation whose confirmation is merely slow is never dropped.

**Rebuilding.** A partition whose index is missing (first start, or Redis was flushed) is
rebuilt from the same ``read_committed`` view, never from the uncommitted stream: ``cases`` is
compacted and holds every open obligation, so nothing is lost, and because decisions are
named from the obligation, nothing is decided twice. The stream then goes on from where Faust
fetches, skipping what the rebuild already covers.

**Schedules.** Each tick also fires the schedules of the partitions it owns
(:mod:`services.sweeper.schedules`): they are keyed like ``cases`` is partitioned, so the
owner of a ``cases`` partition is the single writer of that partition's ``schedules.fired``.

**Running inside ``serve(settings, stop)``.** :meth:`Sweeper.run` owns one event loop in the
calling thread (``runplane serve all`` runs each service in its own thread), starts the app as
a ``mode`` service — not through ``faust.Worker``, which installs signal handlers and so only
works in the main thread — and stops it when ``stop`` is set. Faust runs its aiokafka consumer
in a thread of its own. A failure in the agent or the timer (Redis unreachable, a committed
read that cannot finish) stops the app and is raised from ``run``: the service exits non-zero,
the supervisor restarts it, and it resumes from the positions stored with the index.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from aiokafka.errors import KafkaError
from faust.types import TP, EventT, Message, StreamT

from runplane.errors import WireError
from runplane.kafka.deadletter import dead_letter
from runplane.serving.health import Probe
from runplane.wire import CaseRecord, serde_for
from services.sweeper import metrics
from services.sweeper.committed import CommittedView, read_committed
from services.sweeper.decide import Entry, decide_tick, entries_for
from services.sweeper.faust_app import SweeperApp
from services.sweeper.index import DueIndex
from services.sweeper.schedules import ScheduleFiring
from services.sweeper.settings import SweeperSettings
from services.sweeper.topology import DEADLETTER, INPUT, OUTPUT, SERVICE

__all__ = ["Sweeper"]

log = logging.getLogger(__name__)

Clock = Callable[[], int]

# How long a batch of decisions may take to be acknowledged by the broker before the tick
# gives up on it (the entries stay due and the next tick sends them again).
SEND_TIMEOUT_S = 10.0


class Sweeper:
    """One sweeper instance. ``run(stop)`` blocks until ``stop`` is set (or a failure)."""

    def __init__(
        self,
        settings: SweeperSettings,
        *,
        clock: Clock | None = None,
        redis_client: redis.Redis | None = None,
        probe: Probe | None = None,
    ) -> None:
        self._s = settings
        base = settings.base
        self._clock: Clock = clock or (
            lambda: time.time_ns() // 1_000_000 + settings.clock_offset_ms
        )
        self._redis = redis_client or redis.Redis.from_url(base.redis_url)
        self._index = DueIndex(self._redis, base.topic_prefix)
        self._serde = serde_for(base)
        self._probe = probe
        self._assigned: set[int] = set()
        self._lock: asyncio.Lock | None = None
        self._failure: BaseException | None = None
        self._faust: SweeperApp | None = None
        self._schedules = ScheduleFiring(settings, self._serde)
        self.ready = threading.Event()

    # --- lifecycle -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve(loop, stop))
        finally:
            _close(loop)
            self._schedules.close()

    async def _serve(self, loop: asyncio.AbstractEventLoop, stop: threading.Event) -> None:
        sweeper_app = SweeperApp(self._s.base, loop)
        self._faust = sweeper_app
        app = sweeper_app.app
        app.agent(sweeper_app.cases, name=f"{SERVICE}-index")(self._index_stream)
        app.timer(self._s.tick_ms / 1000, name=f"{SERVICE}-tick")(self._guarded_tick)
        app.on_partitions_assigned.connect(self._on_assigned)
        app.on_partitions_revoked.connect(self._on_revoked)
        try:
            await app.start()
            while not stop.is_set() and self._failure is None and not app.should_stop:
                await asyncio.sleep(0.05)
        finally:
            await app.stop()
            shutil.rmtree(sweeper_app.datadir, ignore_errors=True)  # empty: no tables
        failure = self._failure or app.crash_reason
        if failure is not None:
            raise failure

    def _fail(self, exc: BaseException) -> None:
        """Remember the first failure; ``_serve`` stops the app and raises it."""
        log.error("sweeper failed: %r", exc)
        if self._failure is None:
            self._failure = exc

    # Faust signal receivers: (sender, *args, signal=..., **kwargs); args[0] is the TP set.
    async def _on_assigned(self, _app: Any, /, *args: Any, signal: Any, **_: Any) -> None:
        assigned: set[TP] = args[0]
        topic = self._s.base.topic(INPUT)
        self._assigned = {tp.partition for tp in assigned if tp.topic == topic}
        log.info("sweeper assigned", extra={"partitions": sorted(self._assigned)})
        self.ready.set()
        if self._probe is not None:
            self._probe.set_ready(True)

    async def _on_revoked(self, _app: Any, /, *args: Any, signal: Any, **_: Any) -> None:
        revoked: set[TP] = args[0]
        self._assigned -= {tp.partition for tp in revoked}
        if self._probe is not None and not self._assigned:
            self._probe.set_ready(False, "waiting for partition assignment")

    def _index_lock(self) -> asyncio.Lock:
        # The agent and the timer both change the index: one at a time (made in the loop).
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    # --- reading cases into the index ------------------------------------------------------

    async def _index_stream(self, stream: StreamT[bytes]) -> None:
        event: EventT[bytes]
        async for event in stream.events():
            if self._failure is not None:
                continue  # stopping: leave the rest unindexed (the index offset says where)
            try:
                await self._index_record(event.message)
            except Exception as exc:
                # Faust's supervisor would restart the agent and go on past this record: stop
                # the service instead (the index offset says where to resume).
                self._fail(exc)

    async def _index_record(self, msg: Message) -> None:
        p, offset = msg.partition, msg.offset
        async with self._index_lock():
            known = self._index.offset(p)
            if known is None:
                # Everything before this record must be in the rebuilt index.
                known = (await self._rebuild({p: offset}))[p]
            if offset < known:
                return  # already indexed (a rebuild, or Faust resuming behind the index)
            key = msg.key
            case_id = _case_id(key)
            if case_id is None:
                await self._dead_letter(msg, "case record without a UTF-8 key")
                self._index.apply(p, {}, offset + 1)
                return
            try:
                record = self._decode(msg.value)
            except WireError as exc:
                # Only the cases service writes this topic: an unreadable record is its bug.
                # Keep the case's entries (the cases service confirms every decision anyway).
                await self._dead_letter(msg, str(exc))
                self._index.apply(p, {}, offset + 1)
                return
            self._index.apply(p, {case_id: entries_for(record)}, offset + 1)

    def _decode(self, value: bytes | None) -> CaseRecord | None:
        if value is None:
            return None  # a tombstone: the case is gone, so are its entries
        record = self._serde.decode(INPUT, value)
        if not isinstance(record, CaseRecord):  # pragma: no cover - Serde checks the topic
            raise WireError(f"not a CaseRecord: {type(record).__name__}")
        return record

    async def _dead_letter(self, msg: Message, reason: str) -> None:
        metrics.UNREADABLE.inc()
        log.warning("unreadable case record dead-lettered: %s", reason)
        letter = dead_letter(_Source(msg), reason, SERVICE)
        assert self._faust is not None
        delivered = await self._faust.deadletter.send(
            key=msg.key, value=self._serde.encode(DEADLETTER, letter)
        )
        await asyncio.wait_for(delivered, SEND_TIMEOUT_S)

    async def _rebuild(self, at_least: dict[int, int]) -> dict[int, int]:
        """Rebuild these partitions' index from their committed records; returns the offsets.

        ``at_least``: partition → the offset Faust has fetched up to there; the committed read
        waits until the transactions below it are decided, so nothing the stream has already
        passed is missing from the rebuilt index.
        """
        log.warning("due-time index of partitions %s is missing; rebuilding", sorted(at_least))
        metrics.REBUILDS.inc(len(at_least))
        views = await asyncio.to_thread(read_committed, self._s.base, at_least)
        for p, view in views.items():
            self._index.reset(p)
            entries = {cid: entries_for(case) for cid, case in view.cases.items()}
            self._index.apply(p, entries, view.end)
        return {p: view.end for p, view in views.items()}

    # --- the tick --------------------------------------------------------------------------

    async def _guarded_tick(self) -> None:
        if self._failure is not None:
            return
        try:
            await self.tick()
        except Exception as exc:
            # Faust logs a failed timer and ends it: sweeping would stop silently. Stop the
            # service instead, so the supervisor restarts it.
            self._fail(exc)

    async def tick(self) -> int:
        """Send every decision whose time has come; returns how many commands were sent."""
        now = self._clock()
        if self._probe is not None:
            self._probe.beat()
        sent = 0
        assigned = sorted(self._assigned)
        async with self._index_lock():
            missing = [p for p in assigned if self._index.offset(p) is None]
            if missing:
                await self._rebuild({p: await self._position(p) for p in missing})
        for p in assigned:
            if p in missing:
                continue  # rebuilt just now: swept from the next tick on
            async with self._index_lock():
                sent += await self._sweep(p, now)
        metrics.INDEX_ENTRIES.set(self.index_size())
        assert self._faust is not None
        # Schedules live on partitions co-partitioned with cases: the same owner fires them.
        await self._schedules.sweep(self._faust, assigned, now)
        return sent

    async def _position(self, p: int) -> int:
        """Where Faust's fetcher stands on ``p``: a rebuild must cover what it has read."""
        assert self._faust is not None
        try:
            position = await self._faust.app.consumer.position(TP(self._s.base.topic(INPUT), p))
        except KafkaError:  # moved away mid-rebalance: nothing fetched here to wait for
            return 0
        return position or 0

    async def _sweep(self, p: int, now: int) -> int:
        decisions = decide_tick(self._index.due(p, now), now)
        if not decisions:
            return 0
        send = [(entry, cmd) for entry, cmd in decisions if cmd is not None]
        drop = [entry for entry, cmd in decisions if cmd is None]
        if send and not await self._send([cmd for _, cmd in send]):
            return 0  # not confirmed by the broker: the entries stay due, the next tick resends
        entries = [entry for entry, _ in send]
        for entry in entries:
            metrics.COMMANDS.labels(entry.action).inc()
            log.info(
                "sweeper decision sent",
                extra={"action": entry.action, "case_id": entry.case_id, "obligation": entry.name},
            )
        # The cases service's answer (a new case record) replaces these entries; until it
        # arrives they come back only after retry_ms, so a slow answer is not a storm.
        self._index.postpone(p, entries, now + self._s.retry_ms)
        self._index.drop(p, drop)
        first = self._index.first_sent(p, entries, now)
        overdue = [e for e in entries if now - first[e.member] >= self._s.revalidate_ms]
        if overdue:
            await self._revalidate(p, overdue, now)
        return len(send)

    async def _send(self, commands: list[Any]) -> bool:
        assert self._faust is not None
        try:
            pending = [
                await self._faust.commands.send(
                    key=cmd.case_id.encode("utf-8"), value=self._serde.encode(OUTPUT, cmd)
                )
                for cmd in commands
            ]
            await asyncio.wait_for(asyncio.gather(*pending), SEND_TIMEOUT_S)
        except (KafkaError, TimeoutError) as exc:
            log.warning("sweeper commands not delivered: %r", exc)
            return False
        return True

    async def _revalidate(self, p: int, overdue: list[Entry], now: int) -> None:
        """Keep what the committed records hold, drop the ghosts (see the module docstring)."""
        known = self._index.offset(p) or 0
        views = await asyncio.to_thread(read_committed, self._s.base, {p: known})
        view: CommittedView = views[p]
        ghosts: list[Entry] = []
        real: list[Entry] = []
        for entry in overdue:
            held = {e.member for e in entries_for(view.cases.get(entry.case_id))}
            (real if entry.member in held else ghosts).append(entry)
        self._index.drop(p, ghosts)
        self._index.confirmed_pending(p, real, now)
        metrics.REVALIDATIONS.labels("ghost").inc(len(ghosts))
        metrics.REVALIDATIONS.labels("committed").inc(len(real))
        for entry in ghosts:
            log.warning(
                "dropped an obligation no committed case record holds",
                extra={"case_id": entry.case_id, "obligation": entry.name},
            )

    def index_size(self) -> int:
        return sum(self._index.size(p) for p in list(self._assigned))


@dataclass(frozen=True)
class _Source:
    """A Faust message seen through the parts :func:`dead_letter` reads."""

    msg: Message

    def topic(self) -> str:
        return self.msg.topic

    def partition(self) -> int:
        return self.msg.partition

    def offset(self) -> int:
        return self.msg.offset

    def key(self) -> bytes | None:
        return self.msg.key

    def value(self) -> bytes | None:
        return self.msg.value


def _case_id(key: bytes | None) -> str | None:
    if key is None:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what the app left behind, then close the loop (it belongs to this thread)."""
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
