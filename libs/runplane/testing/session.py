"""One run as the in-memory Driver holds it: its journal, result entries, snapshot, the
resident runtime and the tasks it has open.

Package-private (the Driver and its verbs in ``plans`` and ``operate`` share it), in a module of
its own so those verbs need not import the Driver's module, which imports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runplane.core import Runtime
from runplane.wire import JournalRecord, OpenTask, ResultEntry, SessionSnapshot


@dataclass
class _Session:
    journal: list[JournalRecord] = field(default_factory=list)
    results: dict[tuple[int, int], ResultEntry] = field(default_factory=dict)
    snapshot: SessionSnapshot | None = None
    runtime: Runtime | None = None
    open_tasks: dict[str, OpenTask] = field(default_factory=dict)
