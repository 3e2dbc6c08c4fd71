"""The run index in Redis: summaries, a time-ordered run list, cost per case and capability.

Redis holds only what can be rebuilt: every value here is a fold over the ``audit`` topic
(``summary.apply``), and the index remembers how far it has read each audit partition. When
the offsets key is missing (a new deployment, or someone flushed Redis) the indexer reads
``audit`` from the beginning again, so flushing Redis loses nothing.

Idempotent by construction: a run's summary carries ``last_seq`` and a record at or below it
changes nothing (except a BROKEN one, which breaks the verdict once and is never dropped), so re-reading audit (after a crash between a Redis write and the offsets
write, or from two journal instances indexing the same partition) never counts cost twice.
The run summary and the case/capability cost increments are written in one MULTI under a
WATCH of the summary, so a concurrent writer makes us retry instead of double counting.

Keys (``<topic prefix>journal:`` + …)::

    run:<id>                 JSON RunSummary
    runs                     sorted set: run id by started_ms
    cost:case:<case>         hash tokens_in / tokens_out / units
    cost:capability:<cap>    hash tokens_in / tokens_out / units
    offsets                  hash audit partition -> next offset to read
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from runplane.journal.summary import CostTotals, RunSummary, apply
from runplane.serving.auth import DEFAULT_TENANT
from runplane.wire import AuditRecord, RunStatus, Verdict


def summary_from_json(run_id: str, raw: str | bytes) -> RunSummary:
    data = json.loads(raw)
    cost = data.get("cost") or {}
    status = data.get("status")
    return RunSummary(
        run_id=run_id,
        status=None if status is None else RunStatus(status),
        capability=data.get("capability"),
        tenant=data.get("tenant"),
        case_id=data.get("case_id"),
        era=int(data.get("era", 0)),
        last_seq=int(data.get("last_seq", -1)),
        records=int(data.get("records", 0)),
        cost=CostTotals(
            int(cost.get("tokens_in", 0)),
            int(cost.get("tokens_out", 0)),
            float(cost.get("units", 0.0)),
        ),
        started_ms=data.get("started_ms"),
        updated_ms=data.get("updated_ms"),
        ended_ms=data.get("ended_ms"),
        parked_on=data.get("parked_on"),
        verdict=Verdict(data.get("verdict", "VERIFIED")),
        broken_at_seq=data.get("broken_at_seq"),
        ended_reason=data.get("ended_reason"),
        error_type=data.get("error_type"),
        cancelled_by=data.get("cancelled_by"),
        reason=data.get("reason"),
        body_missing=int(data.get("body_missing", 0)),
        erased_bodies=data.get("erased_bodies"),
        erased_by=data.get("erased_by"),
    )


@dataclass(frozen=True, slots=True)
class RunFilter:
    """``GET /runs`` filters; None means "any"."""

    status: RunStatus | None = None
    capability: str | None = None
    case_id: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    limit: int = 100
    tenant: str | None = None  # the asking principal's; a run without one is DEFAULT_TENANT's

    def matches(self, s: RunSummary) -> bool:
        return (
            (self.tenant is None or (s.tenant or DEFAULT_TENANT) == self.tenant)
            and (self.status is None or s.status == self.status)
            and (self.capability is None or s.capability == self.capability)
            and (self.case_id is None or s.case_id == self.case_id)
        )


_MARKER = -1


class RunIndex:
    """Reads and writes the index for one deployment (one topic prefix)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._r = client
        self._p = f"{prefix}journal:"

    @classmethod
    def from_url(cls, url: str, prefix: str) -> RunIndex:
        return cls(redis.Redis.from_url(url, socket_timeout=5.0), prefix)

    def key(self, *parts: str) -> str:
        return self._p + ":".join(parts)

    # -- writing -------------------------------------------------------------------------

    def apply(self, audits: Sequence[AuditRecord]) -> int:
        """Fold ``audits`` into the index; returns how many records changed a summary."""
        by_run: dict[str, list[AuditRecord]] = {}
        for a in audits:
            by_run.setdefault(a.session_id, []).append(a)
        # Topic order, not seq order: see summary.apply (a forged record carries an old seq).
        return sum(self._apply_run(run_id, recs) for run_id, recs in by_run.items())

    def _apply_run(self, run_id: str, audits: list[AuditRecord]) -> int:
        key = self.key("run", run_id)
        with self._r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                    raw = pipe.get(key)
                    before = RunSummary(run_id) if raw is None else summary_from_json(run_id, raw)
                    after, applied = before, 0
                    for a in audits:
                        nxt = apply(after, a)
                        applied += nxt is not after
                        after = nxt
                    if not applied:
                        pipe.unwatch()
                        return 0
                    pipe.multi()
                    self._write(pipe, before, after)
                    pipe.execute()
                    return applied
                except redis.WatchError:
                    continue

    def _write(self, pipe: Any, before: RunSummary, after: RunSummary) -> None:
        pipe.set(self.key("run", after.run_id), json.dumps(after.to_json()))
        pipe.zadd(self.key("runs"), {after.run_id: after.started_ms or 0})
        delta = (
            after.cost.tokens_in - before.cost.tokens_in,
            after.cost.tokens_out - before.cost.tokens_out,
            after.cost.units - before.cost.units,
        )
        if delta == (0, 0, 0.0):
            return
        for scope, name in (("case", after.case_id), ("capability", after.capability)):
            if name:
                k = self.key("cost", scope, name)
                pipe.hincrby(k, "tokens_in", delta[0])
                pipe.hincrby(k, "tokens_out", delta[1])
                pipe.hincrbyfloat(k, "units", delta[2])

    def set_offsets(self, offsets: Mapping[int, int]) -> None:
        if offsets:
            self._r.hset(self.key("offsets"), mapping={str(p): o for p, o in offsets.items()})

    def offsets(self) -> dict[int, int] | None:
        """The next audit offset per partition, or None when the index is missing.

        "Missing" is judged by the marker ``mark_started`` writes, not by the hash being
        empty: offsets written after a flush (by a write racing the flush) must not pass for
        an index that is whole.
        """
        raw = {int(p): int(o) for p, o in self._r.hgetall(self.key("offsets")).items()}
        if _MARKER not in raw:
            return None
        del raw[_MARKER]
        return raw

    def mark_started(self) -> None:
        """Record that a rebuild began (so an empty audit topic is not "missing" forever)."""
        self._r.hset(self.key("offsets"), str(_MARKER), 0)

    # -- reading -------------------------------------------------------------------------

    def get(self, run_id: str) -> RunSummary | None:
        raw = self._r.get(self.key("run", run_id))
        return None if raw is None else summary_from_json(run_id, raw)

    def list(self, f: RunFilter) -> list[RunSummary]:
        """Runs newest first, filtered; scans the time range page by page until ``limit``."""
        lo = "-inf" if f.since_ms is None else f.since_ms
        hi = "+inf" if f.until_ms is None else f.until_ms
        out: list[RunSummary] = []
        start, page = 0, max(50, f.limit)
        while len(out) < f.limit:
            ids = self._r.zrevrangebyscore(self.key("runs"), hi, lo, start=start, num=page)
            if not ids:
                break
            start += len(ids)
            keys = [self.key("run", i.decode() if isinstance(i, bytes) else str(i)) for i in ids]
            for i, raw in zip(ids, self._r.mget(keys), strict=True):
                if raw is None:
                    continue
                s = summary_from_json(i.decode() if isinstance(i, bytes) else str(i), raw)
                if f.matches(s):
                    out.append(s)
        return out[: f.limit]

    def cost(self, scope: str, name: str) -> CostTotals:
        raw = self._r.hgetall(self.key("cost", scope, name))
        get = {k.decode() if isinstance(k, bytes) else str(k): v for k, v in raw.items()}
        return CostTotals(
            int(get.get("tokens_in", 0)),
            int(get.get("tokens_out", 0)),
            float(get.get("units", 0.0)),
        )

    def clear(self, keys: Iterable[str] = ()) -> None:
        """Delete this prefix's index (tests; an operator forcing a rebuild)."""
        for k in self._r.scan_iter(match=self._p + "*"):
            self._r.delete(k)
        for k in keys:
            self._r.delete(k)
