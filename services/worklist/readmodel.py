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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import redis
from confluent_kafka import Message

from runplane.config import Settings
from runplane.errors import WireError
from runplane.kafka.feed import TopicFeed
from runplane.serving.health import Probe
from runplane.wire import TaskRecord, decode, encode, serde_for
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


class Indexer(TopicFeed):
    """Reads ``tasks`` (read_committed, every partition, no group) into a :class:`TaskStore`
    (the loop is ``runplane.kafka.feed.TopicFeed``, the journal's run index's too).

    Delivery: at least once into Redis, exactly once in effect (the per-task offset guard).
    ``positions`` (partition → next offset consumed) and ``changed`` (a Condition notified
    after every applied batch) let the API wait for the version its command produced. Redis
    away: the consumer stays where it is and tries again shortly; the API answers 503
    meanwhile.
    """

    def __init__(self, settings: Settings, store: TaskStore, *, probe: Probe | None = None) -> None:
        super().__init__(
            settings,
            TABLE,
            reader="runplane-worklist-reader",
            probe=probe,
            retry_on=(redis.RedisError,),
        )
        self._store = store
        self._serde = serde_for(settings)
        self._positions: dict[int, int] = {}
        self.changed = threading.Condition()

    def position(self, partition: int) -> int:
        with self.changed:
            return self._positions.get(partition, -1)

    def stored_offsets(self) -> dict[int, int] | None:
        return self._store.offsets()

    def start_rebuild(self) -> None:
        # Also when the model was built by an older index layout (offsets() is None then).
        self._store.reset()
        self._store.mark_rebuilding()
        with self.changed:
            self._positions.clear()

    def apply(self, messages: Sequence[Message], offsets: Mapping[int, int]) -> None:
        changes = [c for c in map(self._change, messages) if c is not None]
        self._store.apply(changes, offsets)
        if offsets:
            with self.changed:
                for p, nxt in offsets.items():
                    self._positions[p] = max(self._positions.get(p, -1), nxt)
                self.changed.notify_all()

    def _change(self, msg: Message) -> Change | None:
        key, value, offset, p = msg.key(), msg.value(), msg.offset() or 0, msg.partition() or 0
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
