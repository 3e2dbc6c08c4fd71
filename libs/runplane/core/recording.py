"""A recorded run as a file holds it: the chain, the bodies, the input — and a check of all three.

``runplane journal export`` writes recordings, ``runplane replay`` and
``runplane.testing.assert_replays`` read them. One recording is the golden-journal shape
(``{"snapshot", "journal", "results"}``) plus, optionally, ``requests``: the request bodies of
recorded calls, keyed ``"era/call_seq"``. The journal commits to a request only by its witness
(a hash), so a body is accepted only when its witness is the recorded one — an export made
where the recorded code is still importable can attach them (``attach_requests`` in
``runplane.core.engine``), and a divergence report then shows both requests in full.

An export file is ``{"format": FORMAT, "runs": [recording, …]}``; a single recording (a golden
journal) is read as a file of one run. Pure: values in, values out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from runplane.core.chain import request_witness
from runplane.core.verify import verify_chain
from runplane.errors import RunplaneError
from runplane.wire import (
    JournalKind,
    JournalRecord,
    ResultEntry,
    SessionSnapshot,
    from_dict,
    to_dict,
)

__all__ = [
    "ENDED_KINDS",
    "FORMAT",
    "Recording",
    "RecordingError",
    "dump_recordings",
    "load_recordings",
    "recorded_calls",
]

FORMAT: Final = "runplane.journal-export/1"
ENDED_KINDS: Final = frozenset(
    {JournalKind.RUN_COMPLETED, JournalKind.RUN_FAILED, JournalKind.RUN_QUARANTINED}
)

Slot = tuple[int, int]  # (era, call_seq)
CallKey = tuple[str, str, str]  # (family, name, witness)


class RecordingError(RunplaneError):
    """A recording (or an export file) that cannot be read: not the format, not a record."""


def _slot_key(slot: Slot) -> str:
    return f"{slot[0]}/{slot[1]}"


def _parse_slot(key: str) -> Slot:
    era, sep, call_seq = key.partition("/")
    if not sep:
        raise RecordingError(f"request key {key!r} is not era/call_seq")
    return int(era), int(call_seq)


@dataclass(frozen=True)
class Recording:
    """One run: its latest snapshot (for the input), its chain in order, its result bodies and
    the request bodies known for its calls."""

    snapshot: SessionSnapshot
    journal: tuple[JournalRecord, ...]
    results: Mapping[Slot, ResultEntry]
    requests: Mapping[Slot, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.journal:
            raise RecordingError(f"run {self.snapshot.session_id}: no journal records")
        object.__setattr__(self, "journal", tuple(self.journal))

    @property
    def session_id(self) -> str:
        return self.snapshot.session_id

    @property
    def capability(self) -> str:
        return self.snapshot.capability

    @property
    def ended(self) -> JournalRecord | None:
        """The record that ended the run, or None while it is in flight."""
        last = self.journal[-1]
        return last if last.kind in ENDED_KINDS else None

    def problems(self) -> list[str]:
        """Why this recording cannot be trusted (empty: the chain verifies, the input is the one
        the chain committed to, every attached request has its recorded witness)."""
        out: list[str] = []
        verdict = verify_chain(self.journal, self.results)
        if not verdict.ok:
            out.append(f"chain {verdict}")
        first = self.journal[0]
        try:
            witness = request_witness(json.loads(self.snapshot.input_json))
        except ValueError as exc:
            witness = f"undecodable input: {exc}"
        if first.kind is not JournalKind.RUN_ADMITTED or first.request_witness != witness:
            out.append("the input is not the one the chain's RUN_ADMITTED committed to")
        calls = recorded_calls(self.journal)
        for slot, request in self.requests.items():
            call = calls.get(slot)
            if call is None or call[2] != request_witness(request):
                out.append(f"request at {_slot_key(slot)} does not have the recorded witness")
        return out

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "snapshot": to_dict(self.snapshot),
            "journal": [to_dict(r) for r in self.journal],
            "results": [to_dict(e) for _, e in sorted(self.results.items())],
        }
        if self.requests:
            data["requests"] = {_slot_key(s): r for s, r in sorted(self.requests.items())}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Recording:
        try:
            snapshot = from_dict(SessionSnapshot, data["snapshot"])
            journal = tuple(from_dict(JournalRecord, r) for r in data["journal"])
            entries = (from_dict(ResultEntry, r) for r in data.get("results", ()))
            requests = {_parse_slot(k): v for k, v in dict(data.get("requests") or {}).items()}
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordingError(f"not a recorded run: {type(exc).__name__}: {exc}") from None
        results = {(e.era, e.call_seq): e for e in entries}
        return cls(snapshot, journal, results, requests)


def recorded_calls(journal: Iterable[JournalRecord]) -> dict[Slot, CallKey]:
    """What the chain says each slot held: (family, name, witness) of the first record naming it
    (an announce, a result, an opened task) — including slots with no result yet."""
    calls: dict[Slot, CallKey] = {}
    for r in journal:
        if r.call_seq is None or r.family is None or r.name is None or r.request_witness is None:
            continue
        calls.setdefault((r.era, r.call_seq), (r.family, r.name, r.request_witness))
    return calls


def dump_recordings(recordings: Iterable[Recording]) -> str:
    """An export file's text (stable: sorted keys, one run after another in the given order)."""
    data = {"format": FORMAT, "runs": [r.to_json() for r in recordings]}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def load_recordings(text: str) -> list[Recording]:
    """The runs of an export file, or of a single recording (a golden journal)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RecordingError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RecordingError("not an export file: the top level is not an object")
    if "snapshot" in data:
        return [Recording.from_json(data)]
    if data.get("format") != FORMAT:
        raise RecordingError(f"not an export file: format is {data.get('format')!r}, not {FORMAT}")
    return [Recording.from_json(r) for r in data.get("runs", ())]
