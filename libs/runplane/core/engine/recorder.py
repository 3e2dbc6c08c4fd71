"""The Recorder: the only place a run's record is sealed.

It owns the chain tip (``next_seq``, ``last_hash``), the labels records are written with, the
result journal as the run knows it, the logical clock a fresh record moves, and the buffer of
the step being built (``Out``). Handlers say *what* to record — a chain record (``seal``) or
a slot's result with its chain record (``result``) — never how it is hashed or labelled.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runplane.core.canonical import canonical_json
from runplane.core.chain import body_digest, default_label, record_hash
from runplane.core.engine.step import Command
from runplane.core.engine.values import LiveCall
from runplane.core.engine.vocab import Slot
from runplane.core.labels import at_source, join
from runplane.core.limits import DEFAULT_LIMITS, too_large
from runplane.wire import ZERO_HASH, Cost, ErrorInfo, JournalKind, JournalRecord, Label, ResultEntry

__all__ = ["Out", "Recorder"]


class Out:
    """What one step accumulates (two per step: a plain class, not default factories)."""

    __slots__ = ("commands", "live", "records", "replayed", "results")

    def __init__(self) -> None:
        self.records: list[JournalRecord] = []
        self.results: list[ResultEntry] = []
        self.commands: list[Command] = []
        self.live: list[LiveCall] = []
        self.replayed = 0


class Recorder:
    """Seals one run's records and result entries into its chain, in order."""

    __slots__ = (
        "_label",
        "_source_labels",
        "capability",
        "clock_ms",
        "decoded",
        "era",
        "last_hash",
        "max_result_bytes",
        "next_seq",
        "now",
        "out",
        "results",
        "session_id",
        "stamp_attrs",
    )

    def __init__(
        self,
        session_id: str,
        capability: str,
        *,
        era: int,
        next_seq: int,
        last_hash: str,
        results: Mapping[tuple[int, int], ResultEntry],
        now_ms: int,
    ) -> None:
        self.session_id = session_id
        self.capability = capability
        self.era = era
        self.next_seq = next_seq
        self.last_hash = last_hash
        self.results: dict[tuple[int, int], ResultEntry] = dict(results)
        self.now = now_ms  # the stamp of every record of the step being built
        self.clock_ms = now_ms  # the agent's logical clock (see StepCtx.now)
        self.out = Out()
        # The label of every record the engine writes without one of its own.
        self._label = default_label([f"agent/{capability}"])
        # at_source labels by (family, name): a Label is immutable, so one per source is shared.
        self._source_labels: dict[tuple[str, str], Label] = {}
        # The value result() just decoded, for decode.serve to hand over instead of decoding
        # the same text again. Taken once: only the first serve of that entry gets the object.
        self.decoded: tuple[ResultEntry, Any] | None = None
        # A body past this fails its call (``ResultTooLarge``): Kafka could not carry it.
        self.max_result_bytes = DEFAULT_LIMITS.max_result_bytes
        # Attrs for the next record sealed, once (the policy digest a run starts under).
        self.stamp_attrs: dict[str, str] | None = None

    def begin(self, now_ms: int) -> None:
        """Start a step stamped ``now_ms``, with an empty buffer (``out``; the previous one
        went into a Step). A value recorded but never served is not kept around."""
        self.now = now_ms
        self.out = Out()
        self.decoded = None

    def seal(
        self,
        kind: JournalKind,
        *,
        call_seq: int | None = None,
        family: str | None = None,
        name: str | None = None,
        witness: str | None = None,
        digest: str | None = None,
        label: Label | None = None,
        cost: Cost | None = None,
        attrs: Mapping[str, str] | None = None,
        era: int | None = None,
    ) -> JournalRecord:
        """Append one chain record to the step."""
        if self.stamp_attrs is not None:
            attrs, self.stamp_attrs = {**self.stamp_attrs, **(attrs or {})}, None
        # What chain.seal(Draft(...), last_hash) returns, without the Draft: the record is
        # built (and validated) once with the placeholder hash, then given the hash of its
        # canonical bytes, as seal does — record_hash is the one rule for that hash.
        record = JournalRecord(
            session_id=self.session_id,
            seq=self.next_seq,
            era=self.era if era is None else era,
            kind=kind,
            call_seq=call_seq,
            family=family,
            name=name,
            request_witness=witness,
            body_digest=digest,
            stamp_ms=self.now,
            label=label or self._label,
            cost=cost,
            attrs=dict(attrs) if attrs else {},
            prev_hash=self.last_hash,
            hash=ZERO_HASH,
        )
        object.__setattr__(record, "hash", record_hash(record))
        self.next_seq += 1
        self.last_hash = record.hash
        self.out.records.append(record)
        return record

    def at(
        self,
        kind: JournalKind,
        slot: Slot,
        attrs: Mapping[str, str] | None = None,
        *,
        witness: bool = True,
    ) -> JournalRecord:
        """A chain record about ``slot``'s effect that carries no result (an announce, a
        doubt, a park, a task opened or decided)."""
        effect = slot.effect
        return self.seal(
            kind,
            call_seq=slot.call_seq,
            family=effect.family,
            name=effect.name,
            witness=slot.witness if witness else None,
            attrs=attrs,
        )

    def result(
        self,
        slot: Slot,
        kind: JournalKind,
        *,
        value: Any = None,
        error: ErrorInfo | None = None,
        attempts: int = 1,
        cost: Cost | None = None,
        label: Label | None = None,
        attrs: Mapping[str, str] | None = None,
        era: int | None = None,
        source: Label | None = None,
    ) -> ResultEntry:
        """Write the slot's ResultEntry (a failure when ``error`` is given) and the chain
        record carrying its body digest. ``era``: the slot's era when it is not the current
        one (an early answer to a request carried from an earlier era; the chain record names
        it too, and the logical clock does not move: the agent is suspended elsewhere).
        ``source``: the policy's label at the source (a trusted signal), for ``at_source``."""
        effect, call_seq = slot.effect, slot.call_seq
        ok = error is None
        at_era = self.era if era is None else era
        value_json: str | None = None
        if ok:
            try:
                value_json = canonical_json(value)
            except (TypeError, ValueError) as exc:
                ok = False
                error = ErrorInfo(
                    type="NotJsonValue",
                    message=f"result is not canonical JSON: {exc}",
                    retryable=False,
                )
            else:
                error = too_large(value_json, self.max_result_bytes)
                ok = error is None
                value_json = value_json if ok else None
        # The agent sees the decoded canonical value on the first run too, so it cannot tell
        # a fresh serve from a replay (tuples become lists, 2.0 becomes 2, on both paths).
        decoded = json.loads(value_json) if ok and value_json is not None else None
        digest = body_digest(ok, decoded, None if ok else error)
        # Applied at the source; a label the performer supplies can add to it, never lower it.
        # (Inline, not a method: it runs once per result on the hot path.)
        key = (effect.family, effect.name)
        if source is None and (source := self._source_labels.get(key)) is None:
            source = self._source_labels[key] = at_source(*key, self.capability)
        label = source if label is None else join(source, label)
        entry = ResultEntry(
            session_id=self.session_id,
            era=at_era,
            call_seq=call_seq,
            family=effect.family,
            name=effect.name,
            request_witness=slot.witness,
            ok=ok,
            value_json=value_json,
            error=None if ok else error,
            stamp_ms=self.now,
            attempts=attempts,
            body_digest=digest,
            label=label,
        )
        self.results[(at_era, call_seq)] = entry
        self.out.results.append(entry)
        self.seal(
            kind,
            call_seq=call_seq,
            family=effect.family,
            name=effect.name,
            witness=slot.witness,
            digest=digest,
            cost=cost,
            label=label,
            attrs=attrs,
            era=at_era,
        )
        if era is None:
            self.clock_ms = self.now
        self.decoded = (entry, decoded)
        return entry
