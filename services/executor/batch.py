"""Group commit: many runs' records gathered into one Kafka transaction.

Throughput comes from here: a transaction costs a few broker round trips whatever it holds, so
the executor gathers every record produced while it serves messages and live-call outcomes,
and commits them together when the batch is full (``batch_max`` records) or its oldest record
has waited ``batch_ms``. Work that may only start once its records are durable (a live call
whose announce must be committed first) is attached with :meth:`Batch.after_commit` and runs
only after the commit succeeded — never after an abort.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Out:
    """One record to produce: full topic name, key, value (None = tombstone), partition."""

    topic: str
    key: bytes
    value: bytes | None
    partition: int | None = None


@dataclass
class Batch:
    records: list[Out] = field(default_factory=list)
    callbacks: list[Callable[[], None]] = field(default_factory=list)
    opened_at: float | None = None
    inputs: int = 0

    def add(self, out: Out, now: float) -> None:
        if self.opened_at is None:
            self.opened_at = now
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

    @property
    def empty(self) -> bool:
        return self.opened_at is None

    def due(self, now: float, max_records: int, max_wait_s: float) -> bool:
        if self.opened_at is None:
            return False
        return len(self.records) >= max_records or now - self.opened_at >= max_wait_s
