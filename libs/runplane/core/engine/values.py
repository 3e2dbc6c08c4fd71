"""The engine's value types: what the executor reports (``Outcome``), what it must perform
(``LiveCall``), and what a run's snapshot carries across restores (``InFlight``,
``OpenRequest``). Frozen, validated in their constructors, encoded as canonical JSON where a
snapshot holds them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from runplane.core.agents import Recovery, RetryPolicy
from runplane.core.canonical import canonical_json
from runplane.core.effect import Effect
from runplane.wire import Cost, ErrorInfo, Label, RunStatus

__all__ = [
    "InFlight",
    "LiveCall",
    "OpenRequest",
    "Outcome",
    "ReplayReport",
    "RequestKind",
    "doubts_from_json",
    "doubts_to_json",
]


class RequestKind(StrEnum):
    """What an ``OpenRequest`` waits for: a worklist task or a case command's reply."""

    TASK = "task"
    CASE = "case"


@dataclass(frozen=True)
class Outcome:
    """What the executor learned from performing a live call (retries already collapsed)."""

    ok: bool
    value: Any = None
    error: ErrorInfo | None = None
    attempts: int = 1
    cost: Cost | None = None
    label: Label | None = None

    def __post_init__(self) -> None:
        if self.ok == (self.error is not None):
            raise ValueError("an Outcome is ok with no error, or failed with an error")
        if self.attempts < 1:
            raise ValueError("attempts must be >= 1")

    @classmethod
    def success(
        cls, value: Any, *, attempts: int = 1, cost: Cost | None = None, label: Label | None = None
    ) -> Outcome:
        return cls(ok=True, value=value, attempts=attempts, cost=cost, label=label)

    @classmethod
    def failure(
        cls,
        type_: str,
        message: str,
        *,
        retryable: bool = False,
        attempts: int = 1,
        cost: Cost | None = None,
    ) -> Outcome:
        return cls(
            ok=False,
            error=ErrorInfo(type=type_, message=message, retryable=retryable),
            attempts=attempts,
            cost=cost,
        )


@dataclass(frozen=True)
class LiveCall:
    """A call the executor must perform, then report with ``Runtime.complete``.

    ``family``: generation (``target`` = provider name; request: provider, model, prompt,
    params), tool (``target`` = tool name; request: tool, args, idempotency_key) or probe
    (``target`` = the probe tool; request: tool, args and idempotency_key of the call in
    doubt, plus probe_for; its Outcome value: ``None`` = never happened, any other value = it
    happened and that is its result, or explicitly ``{"applied": bool, "result": value}``).
    ``announce_first``: commit this step before performing the call (see module docstring).
    ``idempotency_key``: the key to perform the call under (tools and probes): the agent's own
    key, or — for a mutating call that named none — ``<session>/<origin>``, where origin is
    the ``era/call_seq`` of the call's *first* announce. It is the same on every attempt, every
    replay, every owner, for the probe of a call in doubt, and in the later era a doubt is
    carried into (its slot moves, its origin does not), so a peer can deduplicate and a probe
    can look the call up.
    ``deadline_ms``: for a call a doubt must wait out (``doubt.deadline``: the journal's stamp
    of its announce plus its whole timeout budget), the instant after which no attempt of it
    may still be sent or awaited; None: no such bound (the executor's own timeouts alone).
    """

    session_id: str
    era: int
    call_seq: int
    family: str
    name: str
    target: str
    request: Mapping[str, Any]
    witness: str
    mutating: bool
    recovery: Recovery
    retry: RetryPolicy
    timeout_s: float
    announce_first: bool
    idempotency_key: str | None = None
    deadline_ms: int | None = None


@dataclass(frozen=True)
class InFlight:
    """An announced call with no recorded outcome (persisted in the snapshot: the current
    era's as ``in_flight_json``, earlier eras' unresolved ones in ``doubts_json``).

    ``origin``: ``"era/call_seq"`` of the announce first found in doubt (a doubt carried into a
    new era moves to a new slot but keeps it). ``asks``: operator tasks already opened for
    this slot — a repeat gets a new task id, because the worklist ignores an OpenTask whose id
    it has seen (a run parked on an already decided task would wait forever).
    ``announced_ms``: the journal's stamp of the record that started the call's current
    attempt (its announce; a performing-again's record), so a restore can wait out the
    call's timeout before a probe asks (``doubt.deadline``); 0 = unknown (an older snapshot):
    the probe asks at once, as before.
    """

    era: int
    call_seq: int
    family: str
    name: str
    witness: str
    recovery: Recovery
    origin: str = ""
    asks: int = 0
    announced_ms: int = 0

    def __post_init__(self) -> None:
        if not self.origin:
            object.__setattr__(self, "origin", f"{self.era}/{self.call_seq}")
        if self.asks < 0:
            raise ValueError("InFlight.asks must be >= 0")

    def key(self) -> tuple[str, str, str]:
        return (self.family, self.name, self.witness)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "era": self.era,
            "call_seq": self.call_seq,
            "family": self.family,
            "name": self.name,
            "witness": self.witness,
            "recovery": str(self.recovery),
        }
        # Written only when they say something, so a snapshot with a plain in-flight call reads
        # the same as before doubts were carried.
        if self.origin != f"{self.era}/{self.call_seq}":
            d["origin"] = self.origin
        if self.asks:
            d["asks"] = self.asks
        if self.announced_ms:
            d["announced_ms"] = self.announced_ms
        return d

    def to_json(self) -> str:
        return canonical_json(self.to_dict())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InFlight:
        return cls(
            int(d["era"]),
            int(d["call_seq"]),
            str(d["family"]),
            str(d["name"]),
            str(d["witness"]),
            Recovery(d["recovery"]),
            str(d.get("origin") or ""),
            int(d.get("asks", 0)),
            int(d.get("announced_ms", 0)),
        )

    @classmethod
    def from_json(cls, text: str) -> InFlight:
        return cls.from_dict(json.loads(text))


def doubts_to_json(doubts: Sequence[InFlight]) -> str | None:
    return canonical_json([d.to_dict() for d in doubts]) if doubts else None


def doubts_from_json(text: str | None) -> list[InFlight]:
    return [InFlight.from_dict(d) for d in json.loads(text)] if text else []


@dataclass(frozen=True)
class OpenRequest:
    """A request the run sent and waits an answer for (persisted as ``open_request_json``).

    ``kind``: ``task`` (an approval; ``ref`` = task id) or ``case`` (a case command; ``ref`` =
    request id). ``era``/``call_seq``: the slot it was issued at — an early answer after a
    checkpointed restore is journaled there. ``value``: what the answer alone cannot
    rebuild (a deadline's resolved instant, resolved once when the request was issued).
    """

    kind: RequestKind
    ref: str
    era: int
    call_seq: int
    family: str
    name: str
    witness: str
    value: Any = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", RequestKind(self.kind))
        except ValueError:
            raise ValueError(f"OpenRequest.kind must be task or case, got {self.kind!r}") from None
        if not self.ref:
            raise ValueError("OpenRequest.ref must not be empty")

    def matches(self, effect: Effect, witness: str) -> bool:
        return (self.family, self.name, self.witness) == (effect.family, effect.name, witness)

    def to_json(self) -> str:
        return canonical_json(
            {
                "kind": self.kind.value,
                "ref": self.ref,
                "era": self.era,
                "call_seq": self.call_seq,
                "family": self.family,
                "name": self.name,
                "witness": self.witness,
                "value": self.value,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> OpenRequest:
        d = json.loads(text)
        return cls(
            RequestKind(d["kind"]),
            str(d["ref"]),
            int(d["era"]),
            int(d["call_seq"]),
            str(d["family"]),
            str(d["name"]),
            str(d["witness"]),
            d.get("value"),
        )


@dataclass(frozen=True)
class ReplayReport:
    """What replaying a recorded history found: ``live_calls`` must be 0 for a faithful
    history; ``divergence`` is the positioned diagnostic when it is not."""

    status: RunStatus
    output: Any
    replayed: int
    live_calls: int
    divergence: str | None
