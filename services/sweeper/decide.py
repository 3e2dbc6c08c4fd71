"""The sweeper's functional core: which obligations to watch, and what a tick decides. Pure.

The due-time index holds one :class:`Entry` per pending action:

- an OPEN obligation with a ``warn_ms`` before its due instant has a ``warn`` entry at
  ``warn_ms``;
- every OPEN or WARNED obligation has a ``breach`` entry at ``due_ms``;
- nothing else (met, cancelled, breached obligations; closed cases) is watched.

A tick takes the entries whose time has come and turns them into commands for the cases
service: ``WarnDeadline`` for a warn entry whose obligation is not yet due (once it is due,
the breach is the event that matters and the warning is skipped), ``BreachDeadline`` for a
breach entry. Commands are named by :mod:`runplane.core.keys`, so repeating a decision —
another tick, another sweeper, a restart — repeats the same command, which the cases service
answers as a duplicate. The cases service confirms every decision and, on the first breach,
seals the sweep run and starts the follow-up run (see :mod:`services.cases.breach`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from runplane.core.keys import breach_request_id, sweep_run_id, warn_request_id
from runplane.errors import WireError
from runplane.wire import BreachDeadline, CaseRecord, ObligationStatus, WarnDeadline

__all__ = ["Action", "Entry", "decide_tick", "entries_for"]

Action = Literal["warn", "breach"]
_WATCHED = (ObligationStatus.OPEN, ObligationStatus.WARNED)


@dataclass(frozen=True, order=True)
class Entry:
    """One pending action of the index: at ``at_ms``, ``action`` the obligation."""

    at_ms: int
    case_id: str
    name: str
    due_ms: int
    action: Action

    @property
    def member(self) -> str:
        """The entry's identity in the sorted set (its score is ``at_ms``)."""
        return json.dumps(
            [self.case_id, self.name, self.due_ms, self.action], separators=(",", ":")
        )

    @classmethod
    def from_member(cls, member: str, at_ms: int) -> Entry:
        try:
            case_id, name, due_ms, action = json.loads(member)
        except (ValueError, TypeError) as exc:
            raise WireError(f"not a sweeper index member: {member!r}") from exc
        if action not in ("warn", "breach") or not isinstance(due_ms, int):
            raise WireError(f"not a sweeper index member: {member!r}")
        return cls(at_ms, str(case_id), str(name), due_ms, action)


def entries_for(case: CaseRecord | None) -> list[Entry]:
    """The index entries a case needs now (none for a deleted or closed case)."""
    if case is None or case.closed:
        return []
    out: list[Entry] = []
    for ob in case.obligations:
        if ob.status not in _WATCHED:
            continue
        if ob.status == ObligationStatus.OPEN and ob.warn_ms is not None and ob.warn_ms < ob.due_ms:
            out.append(Entry(ob.warn_ms, case.case_id, ob.name, ob.due_ms, "warn"))
        out.append(Entry(ob.due_ms, case.case_id, ob.name, ob.due_ms, "breach"))
    return out


Command = WarnDeadline | BreachDeadline


def decide_tick(due: Iterable[Entry], now_ms: int) -> list[tuple[Entry, Command | None]]:
    """For each entry whose time has come, the command to send (None: drop the entry).

    Sorted by (time, case, name) so a case's warning precedes its breach in the topic.
    """
    out: list[tuple[Entry, Command | None]] = []
    for entry in sorted(due):
        if entry.at_ms > now_ms:
            continue
        out.append((entry, _command(entry, now_ms)))
    return out


def _command(entry: Entry, now_ms: int) -> Command | None:
    if entry.action == "warn":
        if now_ms >= entry.due_ms:
            return None  # already due: the breach entry speaks for it
        return WarnDeadline(
            case_id=entry.case_id,
            request_id=warn_request_id(entry.case_id, entry.name, entry.due_ms),
            name=entry.name,
            due_ms=entry.due_ms,
        )
    return BreachDeadline(
        case_id=entry.case_id,
        request_id=breach_request_id(entry.case_id, entry.name, entry.due_ms),
        name=entry.name,
        due_ms=entry.due_ms,
        sweep_run_id=sweep_run_id(entry.case_id, entry.name, entry.due_ms),
    )


def members_of(entries: Sequence[Entry]) -> dict[str, int]:
    """member → score, as the sorted set stores them."""
    return {e.member: e.at_ms for e in entries}
