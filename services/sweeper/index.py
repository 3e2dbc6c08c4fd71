"""The due-time index in Redis: a rebuildable cache of what ``cases`` says is pending.

Per partition *p* of ``cases`` (names under ``runplane:sweeper:<topic prefix>``):

- ``due:<p>``      sorted set, member = :attr:`Entry.member`, score = when to act (ms);
- ``members:<p>``  hash, case id → JSON list of that case's members (to replace them when
  the case changes);
- ``offsets``      hash, p → the next ``cases`` offset to read for that partition;
- ``sent:<p>``     hash, member → when its decision was first sent (ms), until the case's
  next record replaces it: how long the cases service has left it unconfirmed.

The index of a batch of case records and the offset after it are written in one MULTI/EXEC,
so the index is always exactly "``cases`` up to that offset". Kafka offsets are never
committed as the index's position: the offset lives with the index (the Faust consumer's
group offsets only say where to start fetching, see :mod:`services.sweeper.sweeper`). When Redis is flushed, the offset goes with the
index and the sweeper reads the partition from the beginning again — ``cases`` is compacted
and holds every open obligation, so nothing is lost, and because every decision is named
from the obligation, nothing is decided twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import redis

from services.sweeper.decide import Entry

__all__ = ["DueIndex"]


class DueIndex:
    """Thin wrapper over the Redis keys above; every method is one round trip or one MULTI."""

    def __init__(self, client: redis.Redis, namespace: str) -> None:
        self._r = client
        self._ns = f"runplane:sweeper:{namespace}"

    def _due(self, p: int) -> str:
        return f"{self._ns}:due:{p}"

    def _members(self, p: int) -> str:
        return f"{self._ns}:members:{p}"

    def _sent(self, p: int) -> str:
        return f"{self._ns}:sent:{p}"

    @property
    def _offsets(self) -> str:
        return f"{self._ns}:offsets"

    def offset(self, p: int) -> int | None:
        """The next offset to read for ``p``; None when the index of ``p`` is missing."""
        raw = self._r.hget(self._offsets, str(p))
        return None if raw is None else int(raw)

    def reset(self, p: int) -> None:
        """Forget partition ``p``'s index; it is rebuilt by reading ``cases`` from offset 0."""
        pipe = self._r.pipeline(transaction=True)
        pipe.delete(self._due(p), self._members(p), self._sent(p))
        pipe.hset(self._offsets, str(p), 0)
        pipe.execute()

    def apply(self, p: int, cases: Mapping[str, Iterable[Entry]], next_offset: int) -> None:
        """Replace the entries of each case in ``cases`` and record ``next_offset``, atomically."""
        ids = list(cases)
        old_lists = self._r.hmget(self._members(p), ids) if ids else []
        pipe = self._r.pipeline(transaction=True)
        for case_id, old in zip(ids, old_lists, strict=True):
            if old is not None:
                stale = json.loads(old)
                if stale:
                    pipe.zrem(self._due(p), *stale)
                    pipe.hdel(self._sent(p), *stale)
            entries = list(cases[case_id])
            if entries:
                pipe.zadd(self._due(p), {e.member: e.at_ms for e in entries})
                pipe.hset(self._members(p), case_id, json.dumps([e.member for e in entries]))
            else:
                pipe.hdel(self._members(p), case_id)
        pipe.hset(self._offsets, str(p), next_offset)
        pipe.execute()

    def due(self, p: int, now_ms: int, limit: int = 1000) -> list[Entry]:
        """Entries of ``p`` whose time is ``<= now_ms``, earliest first."""
        # redis-py types the reply loosely; with withscores=True it is (member, score) pairs.
        rows: list[tuple[bytes | str, float]] = self._r.zrangebyscore(  # type: ignore[assignment]
            self._due(p), "-inf", now_ms, start=0, num=limit, withscores=True
        )
        return [Entry.from_member(_text(m), int(score)) for m, score in rows]

    def postpone(self, p: int, entries: Iterable[Entry], until_ms: int) -> None:
        """Look at these again at ``until_ms`` unless a case update replaced them meanwhile."""
        mapping = {e.member: until_ms for e in entries}
        if mapping:
            # XX: only entries still present; a case update that removed one wins.
            self._r.zadd(self._due(p), mapping, xx=True)

    def drop(self, p: int, entries: Iterable[Entry]) -> None:
        members = [e.member for e in entries]
        if members:
            pipe = self._r.pipeline(transaction=True)
            pipe.zrem(self._due(p), *members)
            pipe.hdel(self._sent(p), *members)
            pipe.execute()

    def first_sent(self, p: int, entries: Iterable[Entry], now_ms: int) -> dict[str, int]:
        """member → when its decision was first sent; ``now_ms`` for a first send."""
        members = [e.member for e in entries]
        if not members:
            return {}
        pipe = self._r.pipeline(transaction=True)
        for m in members:
            pipe.hsetnx(self._sent(p), m, now_ms)
        pipe.hmget(self._sent(p), members)
        *_, raw = pipe.execute()
        return {m: now_ms if v is None else int(v) for m, v in zip(members, raw, strict=True)}

    def confirmed_pending(self, p: int, entries: Iterable[Entry], now_ms: int) -> None:
        """These entries' obligations are committed: measure their wait from ``now_ms`` again."""
        mapping: dict[str | bytes, int] = {e.member: now_ms for e in entries}
        if mapping:
            # redis-py types the mapping with an invariant union key no plain dict matches.
            self._r.hset(self._sent(p), mapping=mapping)  # type: ignore[arg-type]

    def size(self, p: int) -> int:
        return int(self._r.zcard(self._due(p)))


def _text(member: bytes | str) -> str:
    return member.decode("utf-8") if isinstance(member, bytes) else member
