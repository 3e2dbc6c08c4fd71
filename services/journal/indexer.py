"""The run indexer: folds the ``audit`` topic into the Redis run index.

Delivery: at least once into Redis, made exactly-once in effect by the index's per-run
``last_seq`` guard (see ``runplane.journal.index``). Offsets live in Redis beside the index (written after
the records they cover), so a lost Redis means both are gone together and we start over from
the beginning of ``audit`` — the rebuild. Every instance indexes every audit partition (no
group): the writes are idempotent, and a query served by any instance sees every run.

A flushed Redis is noticed while running too: the offsets hash disappears, and the indexer
seeks every partition back to the beginning. The loop is ``runplane.kafka.feed.TopicFeed``,
the worklist's read model's too; this module says how audit records land in the index.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from confluent_kafka import Message

from runplane.config import Settings
from runplane.errors import WireError
from runplane.journal.index import RunIndex
from runplane.kafka.feed import TopicFeed
from runplane.serving.health import Probe
from runplane.wire import AuditRecord, serde_for
from services.journal import metrics as m

log = logging.getLogger(__name__)


class Indexer(TopicFeed):
    """Reads ``audit`` (read_committed) into a :class:`RunIndex` until stopped."""

    def __init__(self, settings: Settings, index: RunIndex, *, probe: Probe | None = None) -> None:
        super().__init__(
            settings,
            "audit",
            reader="runplane-indexer",
            probe=probe,
            batch=1000,
            poll_s=0.2,
            fetch_wait_ms=100,
        )
        self._index = index
        self._serde = serde_for(settings)

    def stored_offsets(self) -> dict[int, int] | None:
        return self._index.offsets()

    def start_rebuild(self) -> None:
        m.INDEX_REBUILDS.inc()
        self._index.mark_started()

    def apply(self, messages: Sequence[Message], offsets: Mapping[int, int]) -> None:
        audits = [a for a in map(self._decoded, messages) if a is not None]
        if audits:
            self._index.apply(audits)
            m.INDEXED.inc(len(audits))
        self._index.set_offsets(offsets)

    def _decoded(self, msg: Message) -> AuditRecord | None:
        value = msg.value()
        if value is None:
            return None
        try:
            rec = self._serde.decode("audit", value if isinstance(value, bytes) else value.encode())
        except WireError as exc:
            log.warning(
                "skipping undecodable audit record",
                extra={"partition": msg.partition(), "reason": str(exc)},
            )
            return None
        return rec if isinstance(rec, AuditRecord) else None
