"""The worklist's read model: the ``tasks`` topic folded into Redis, rebuildable at any time.

Redis holds only what ``tasks`` holds (Kafka is the record): every TaskRecord's latest
version, and how far each partition has been read. Keys (``<topic prefix>worklist:`` + …)::

    tasks      hash task id -> the TaskRecord, wire-encoded (decoding re-validates it)
    taskoff    hash task id -> the ``tasks`` offset that version came from
    ixof       hash task id -> JSON [[index key, member], …]: the indexes that version is in
    ix:<STATUS>:<dimension>   sorted sets (score 0, ordered by member) — see ``index.py``
    offsets    hash partition -> next offset to read ("rebuild" marks a rebuild in progress,
               "ixv" the index layout the model was built with)

A version is written only if its offset is newer than the stored one (one Lua script, atomic
with the offsets), so two API instances indexing the same partitions — or one rebuilding from
the beginning while another is current — can never put an older version over a newer one. The
same script moves the task between indexes (out of the ones its previous version was in, into
the new ones), so a task that becomes final leaves the active indexes in the same step. The
script names index keys from a prefix it is given: a single Redis (not Cluster), as before.

A model built by an older layout (no "ixv", or another value) is dropped and rebuilt from
``tasks`` on start, like a flushed one.

Rebuild: when ``offsets`` is missing (a new deployment, or someone flushed Redis) the indexer
reads ``tasks`` from the beginning again; it notices a flush while running too. Flushing
Redis loses nothing.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import redis
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from runplane.config import Settings
from runplane.errors import WireError
from runplane.kafka.clients import consumer_config
from runplane.service import Probe
from runplane.wire import Serde, TaskRecord, decode, encode
from services.worklist.index import memberships
from services.worklist.topology import TABLE, redis_namespace

__all__ = ["Indexer", "TaskStore"]

log = logging.getLogger(__name__)

_REBUILD = "rebuild"
_LAYOUT_FIELD = "ixv"
_LAYOUT = "1"

# KEYS: tasks, taskoff, offsets, ixof, index key prefix.
# ARGV: n, then n × (task id, offset, "S"|"D", value, memberships JSON), then pairs
# (partition, next offset).
_APPLY = """
local n = tonumber(ARGV[1])
local i = 2
for _ = 1, n do
  local id, off, op, val, ix = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local cur = tonumber(redis.call('HGET', KEYS[2], id) or '-1')
  if off > cur then
    redis.call('HSET', KEYS[2], id, off)
    local old = redis.call('HGET', KEYS[4], id)
    if old then
      for _, pair in ipairs(cjson.decode(old)) do
        redis.call('ZREM', KEYS[5] .. pair[1], pair[2])
      end
    end
    if op == 'S' then
      redis.call('HSET', KEYS[1], id, val)
      for _, pair in ipairs(cjson.decode(ix)) do
        redis.call('ZADD', KEYS[5] .. pair[1], 0, pair[2])
      end
      redis.call('HSET', KEYS[4], id, ix)
    else
      redis.call('HDEL', KEYS[1], id)
      redis.call('HDEL', KEYS[4], id)
    end
  end
  i = i + 5
end
while i <= #ARGV do
  local p, nxt = ARGV[i], tonumber(ARGV[i + 1])
  local cur = tonumber(redis.call('HGET', KEYS[3], p) or '-1')
  if nxt > cur then redis.call('HSET', KEYS[3], p, nxt) end
  i = i + 2
end
return n
"""


@dataclass(frozen=True)
class Change:
    """One record of ``tasks``: its key, offset and value (None = tombstone)."""

    task_id: str
    offset: int
    record: TaskRecord | None


class TaskStore:
    """The Redis side of the read model."""

    def __init__(self, client: redis.Redis, namespace: str) -> None:
        self._r = client
        self._ns = namespace
        self._tasks = f"{namespace}tasks"
        self._taskoff = f"{namespace}taskoff"
        self._offsets = f"{namespace}offsets"
        self._ixof = f"{namespace}ixof"
        self._apply = client.register_script(_APPLY)

    @classmethod
    def from_settings(cls, settings: Settings) -> TaskStore:
        client = redis.Redis.from_url(settings.redis_url, socket_timeout=5)
        return cls(client, redis_namespace(settings))

    def get(self, task_id: str) -> TaskRecord | None:
        raw = self._r.hget(self._tasks, task_id)
        return None if raw is None else self._decode(raw)

    def get_many(self, task_ids: Sequence[str]) -> list[TaskRecord | None]:
        """The records of ``task_ids`` in order (None: gone, or unreadable)."""
        if not task_ids:
            return []
        out: list[TaskRecord | None] = []
        for raw in self._r.hmget(self._tasks, list(task_ids)):
            try:
                out.append(None if raw is None else self._decode(raw))
            except WireError:
                out.append(None)  # written by a newer schema we cannot read: invisible
        return out

    def scan(self, key: str, after: str, n: int) -> list[str]:
        """Up to ``n`` members of index ``key`` strictly after ``after`` ("" = from the start)."""
        low = b"(" + after.encode("utf-8") if after else b"-"
        found = self._r.zrangebylex(self._ns + key, low, b"+", start=0, num=n)
        return [m.decode("utf-8") if isinstance(m, bytes) else str(m) for m in found]

    def count(self, key: str) -> int:
        """How many members index ``key`` holds (benchmarks, tests)."""
        return int(self._r.zcard(self._ns + key))

    @staticmethod
    def _decode(raw: bytes | str) -> TaskRecord:
        # The client is made without decode_responses, so values are bytes.
        record = decode(raw if isinstance(raw, bytes) else raw.encode("latin-1"))
        if not isinstance(record, TaskRecord):
            raise WireError(f"read model holds a {type(record).__name__}, not a TaskRecord")
        return record

    def offsets(self) -> dict[int, int] | None:
        """Next offset per partition; None when the model is missing or was built by another
        index layout (rebuild)."""
        raw = self._r.hgetall(self._offsets)
        if not raw or raw.get(_LAYOUT_FIELD.encode()) != _LAYOUT.encode():
            return None
        markers = {_REBUILD.encode(), _LAYOUT_FIELD.encode()}
        return {int(k): int(v) for k, v in raw.items() if k not in markers}

    def mark_rebuilding(self) -> None:
        self._r.hset(self._offsets, mapping={_REBUILD: 1, _LAYOUT_FIELD: _LAYOUT})

    def reset(self) -> None:
        """Drop the whole model (records, per-task offsets, indexes) before a rebuild: the
        per-task offset guard would otherwise skip re-indexing what an older layout wrote."""
        doomed = [self._tasks, self._taskoff, self._offsets, self._ixof]
        doomed += list(self._r.scan_iter(match=f"{self._ns}ix:*", count=1000))
        for i in range(0, len(doomed), 500):
            self._r.delete(*doomed[i : i + 500])

    def apply(self, changes: Iterable[Change], offsets: Mapping[int, int]) -> None:
        args: list[bytes | str | int] = []
        n = 0
        for c in changes:
            value = b"" if c.record is None else encode(c.record)
            ix = "" if c.record is None else json.dumps(memberships(c.record), ensure_ascii=False)
            args += [c.task_id, c.offset, "S" if c.record is not None else "D", value, ix]
            n += 1
        for p, nxt in offsets.items():
            args += [p, nxt]
        if n or offsets:
            keys = [self._tasks, self._taskoff, self._offsets, self._ixof, self._ns]
            self._apply(keys=keys, args=[n, *args])


class Indexer:
    """Reads ``tasks`` (read_committed, every partition, no group) into a :class:`TaskStore`.

    Delivery: at least once into Redis, exactly once in effect (the per-task offset guard).
    ``positions`` (partition → next offset consumed) and ``changed`` (a Condition notified
    after every applied batch) let the API wait for the version its command produced.
    """

    def __init__(self, settings: Settings, store: TaskStore, *, probe: Probe | None = None) -> None:
        self._settings = settings
        self._store = store
        self._probe = probe
        self._serde = Serde.from_settings(settings)
        self._topic = settings.topic(TABLE)
        self._positions: dict[int, int] = {}
        self.changed = threading.Condition()
        self.caught_up = threading.Event()

    def position(self, partition: int) -> int:
        with self.changed:
            return self._positions.get(partition, -1)

    def run(self, stop: threading.Event) -> None:
        consumer = Consumer(
            consumer_config(
                self._settings,
                f"runplane-worklist-reader-{uuid.uuid4().hex[:12]}",  # never commits
                **{"enable.partition.eof": True, "fetch.wait.max.ms": 50},
            )
        )
        try:
            partitions = self._assign(consumer)
            at_end: set[int] = set()
            while not stop.is_set():
                try:
                    if self._store.offsets() is None:
                        self._rebuild(consumer, partitions)
                        at_end.clear()
                    self._step(consumer, at_end, len(partitions))
                except redis.RedisError as exc:
                    # Redis away: keep the consumer where it is and try again shortly; the
                    # API answers 503 meanwhile.
                    log.warning("read model unavailable: %s", exc)
                    if self._probe is not None:
                        self._probe.beat()
                    stop.wait(1.0)
        finally:
            consumer.close()

    def _assign(self, consumer: Consumer) -> list[int]:
        meta = consumer.list_topics(self._topic, timeout=30)
        topic = meta.topics.get(self._topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise WireError(f"topic {self._topic} does not exist")
        partitions = sorted(topic.partitions)
        stored = self._store.offsets()
        if stored is None:
            log.info("task read model missing (or an older layout): rebuilding from tasks")
            self._store.reset()
            self._store.mark_rebuilding()
            stored = {}
        consumer.assign(
            [TopicPartition(self._topic, p, stored.get(p, OFFSET_BEGINNING)) for p in partitions]
        )
        if self._probe is not None:
            self._probe.set_ready(True)
        return partitions

    def _rebuild(self, consumer: Consumer, partitions: list[int]) -> None:
        log.info("task read model vanished (Redis flushed?): rebuilding from tasks")
        self.caught_up.clear()
        self._store.reset()
        self._store.mark_rebuilding()
        with self.changed:
            self._positions.clear()
        for p in partitions:
            consumer.seek(TopicPartition(self._topic, p, OFFSET_BEGINNING))

    def _step(self, consumer: Consumer, at_end: set[int], n_partitions: int) -> None:
        msgs = consumer.consume(num_messages=500, timeout=0.1)
        if self._probe is not None:
            self._probe.beat()
        changes: list[Change] = []
        offsets: dict[int, int] = {}
        for msg in msgs:
            p = msg.partition() or 0
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(p)
                    # EOF under read_committed is the last stable offset: everything
                    # committed before it has been applied.
                    offsets[p] = max(offsets.get(p, 0), msg.offset() or 0)
                continue
            at_end.discard(p)
            offset = msg.offset() or 0
            offsets[p] = offset + 1
            change = self._change(msg.key(), msg.value(), offset, p)
            if change is not None:
                changes.append(change)
        if changes or offsets:
            self._store.apply(changes, offsets)
        if offsets:
            with self.changed:
                for p, nxt in offsets.items():
                    self._positions[p] = max(self._positions.get(p, -1), nxt)
                self.changed.notify_all()
        if len(at_end) >= n_partitions:
            self.caught_up.set()

    def _change(
        self, key: bytes | str | None, value: bytes | str | None, offset: int, p: int
    ) -> Change | None:
        task_id = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
        if not task_id:
            return None
        if value is None:
            return Change(task_id, offset, None)
        try:
            record = self._serde.decode(
                TABLE, value if isinstance(value, bytes) else value.encode()
            )
        except WireError as exc:
            log.warning(
                "skipping undecodable task record", extra={"partition": p, "reason": str(exc)}
            )
            return None
        return Change(task_id, offset, record) if isinstance(record, TaskRecord) else None
