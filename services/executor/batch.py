"""Group commit: many runs' records gathered into one Kafka transaction.

Throughput comes from here: a transaction costs a few broker round trips whatever it holds, so
the executor gathers every record produced while it serves messages and live-call outcomes,
and commits them together as soon as it has nothing more in hand (``GroupCommit``), or when
the batch is full (``batch_max`` records) or its oldest record has waited ``batch_ms``. Work that may only start once its records are durable (a live call
whose announce must be committed first) is attached with :meth:`Batch.after_commit` and runs
only after the commit succeeded — never after an abort.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple


class Out(NamedTuple):
    """One record to produce: full topic name, key, value (None = tombstone), partition.

    ``lazy`` encodes the value at commit time instead: a table row that a newer row for the
    same key may replace before the commit is then never encoded at all.

    A named tuple (immutable, like the frozen dataclass it was) because one is built per
    record on the hot path and a tuple is several times cheaper to build."""

    topic: str
    key: bytes
    value: bytes | None
    partition: int | None = None
    lazy: Callable[[], bytes] | None = None
    headers: list[tuple[str, bytes]] | None = None  # W3C trace context (runplane.serving.tracing)


@dataclass
class Batch:
    records: list[Out] = field(default_factory=list)
    callbacks: list[Callable[[], None]] = field(default_factory=list)
    opened_at: float | None = None
    inputs: int = 0
    _latest: dict[tuple[str, bytes], int] = field(default_factory=dict)

    def add(self, out: Out, now: float, *, last_wins: bool = False) -> None:
        """Queue ``out``. ``last_wins``: a table row (compacted topic) — a newer row for the
        same key in the same transaction replaces the older one, since readers of a
        compacted topic only ever need the last value and a run writes its snapshot once
        per step, many times per batch."""
        if self.opened_at is None:
            self.opened_at = now
        if last_wins:
            slot = self._latest.get((out.topic, out.key))
            if slot is not None:
                self.records[slot] = out
                return
            self._latest[(out.topic, out.key)] = len(self.records)
        self.records.append(out)

    def consumed(self, now: float) -> None:
        """An input message was served: its offset must be committed, even with no output."""
        if self.opened_at is None:
            self.opened_at = now
        self.inputs += 1

    def after_commit(self, fn: Callable[[], None], now: float) -> None:
        if self.opened_at is None:
            self.opened_at = now
        self.callbacks.append(fn)

    def mark(self) -> tuple[int, int]:
        """Where the batch stands now, for :meth:`rollback` (two ints: cheap per message)."""
        return len(self.records), len(self.callbacks)

    def rollback(self, mark: tuple[int, int]) -> None:
        """Drop what was added since ``mark`` (the work of a message whose handling raised).

        A table row that replaced an older one in place (``last_wins``) is not reverted; the
        caller writes that key's row again."""
        records, callbacks = mark
        del self.records[records:], self.callbacks[callbacks:]
        self._latest = {k: i for k, i in self._latest.items() if i < records}

    @property
    def empty(self) -> bool:
        return self.opened_at is None

    def due(self, now: float, max_records: int, max_wait_s: float) -> bool:
        if self.opened_at is None:
            return False
        return len(self.records) >= max_records or now - self.opened_at >= max_wait_s
