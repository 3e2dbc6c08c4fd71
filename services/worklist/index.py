"""How task lists are answered without reading every task ever opened (pure, no I/O).

The read model keeps, besides each task's record, one sorted index per (status, dimension):
``ix:<STATUS>:<dimension>``, where a task's dimensions are

- ``all``;
- ``role:<role>`` — the role that must act;
- ``esc:<role>`` — when it escalates on expiry: the role it goes to (``esc:`` with nothing
  after it means "the deployment's escalation role", which the read model does not know);
- ``who:<name>`` — each person involved: the initiator, the claim holder (or final decider)
  and every approver.

Members are ``<16 hex digits>:<task id>`` with score 0, so Redis orders them by bytes (ZRANGEBYLEX)
and a cursor is simply the last member returned. The 16 digits are the sort key: for OPEN and
CLAIMED the opening instant (oldest first: who waited longest), for DECIDED, EXPIRED and
CLOSED the last update, inverted (newest first). A list is a merge of the index keys the
caller could see tasks in (:func:`dimensions`) — active statuses first, then final ones — and
visibility is still checked on every record, so an index can only narrow what is read.

Cost: a page reads ``O(limit × keys)`` members and ``limit`` records, whatever the number of
tasks decided before; the old full scan read all of them on every list and every page load.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from runplane.wire import ExpiryPolicy, TaskRecord, TaskStatus

__all__ = [
    "ACTIVE_ORDER",
    "FINAL_ORDER",
    "Cursor",
    "MemoryTasks",
    "dimensions",
    "index_key",
    "member",
    "memberships",
    "merged",
    "segments",
    "task_of",
]

# Statuses listed together, in order: what is waiting first, then what is done.
ACTIVE_ORDER = (TaskStatus.OPEN, TaskStatus.CLAIMED)
FINAL_ORDER = (TaskStatus.DECIDED, TaskStatus.EXPIRED, TaskStatus.CLOSED)
_NEWEST = (1 << 63) - 1


def index_key(status: TaskStatus, dimension: str) -> str:
    """The index (relative to the read model's namespace) of ``status`` × ``dimension``."""
    return f"ix:{status}:{dimension}"


def member(record: TaskRecord) -> str:
    """The task's sortable member in every index it belongs to (see the module docstring)."""
    if record.status in ACTIVE_ORDER:
        key = max(0, record.task.opened_ms)
    else:
        key = _NEWEST - max(0, record.updated_ms)
    return f"{key:016x}:{record.task.task_id}"


def task_of(m: str) -> str:
    """The task id of a member."""
    return m[17:]


def memberships(record: TaskRecord) -> list[tuple[str, str]]:
    """Every (index key, member) ``record`` belongs to."""
    t = record.task
    dims = {"all", f"role:{t.role}", f"who:{t.initiator}"}
    if t.on_expiry is ExpiryPolicy.ESCALATE:
        dims.add(f"esc:{t.escalate_to or ''}")
    if record.claimed_by:
        dims.add(f"who:{record.claimed_by}")
    dims.update(f"who:{name}" for name in record.approved_by)
    m = member(record)
    return [(index_key(record.status, d), m) for d in sorted(dims)]


def dimensions(
    name: str,
    roles: Iterable[str],
    status: TaskStatus,
    *,
    escalation_role: str,
    supervisor_role: str,
) -> list[str]:
    """The dimensions in which ``name`` (holding ``roles``) may find tasks of ``status``:
    a superset of what :func:`~services.worklist.decide.visible_to` allows."""
    held = set(roles)
    if status is TaskStatus.CLAIMED and supervisor_role in held:
        return ["all"]  # a supervisor sees every claimed task (to release a stuck claim)
    dims = {f"who:{name}"}
    dims.update(f"role:{r}" for r in held)
    dims.update(f"esc:{r}" for r in held)
    if escalation_role in held:
        dims.add("esc:")
    return sorted(dims)


def segments(status: TaskStatus | None, active: bool | None) -> list[tuple[TaskStatus, ...]]:
    """The status groups a list walks, in order: one status, or the active ones (``active``
    True), the final ones (False) or both (None)."""
    if status is not None:
        return [(status,)]
    if active is None:
        return [ACTIVE_ORDER, FINAL_ORDER]
    return [ACTIVE_ORDER] if active else [FINAL_ORDER]


@dataclass(frozen=True)
class Cursor:
    """Where the next page starts: the segment (0 active, 1 final) and the last member."""

    segment: int
    after: str

    def encode(self) -> str:
        raw = json.dumps([self.segment, self.after], ensure_ascii=False).encode("utf-8")
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """The cursor ``encode`` made; ValueError for anything else (a 422 at the API)."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            segment, after = json.loads(raw.decode("utf-8"))
        except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
            raise ValueError("not a cursor this API made") from exc
        if not isinstance(segment, int) or not isinstance(after, str) or segment < 0:
            raise ValueError("not a cursor this API made")
        return cls(segment, after)


Scan = Callable[[str, str, int], Sequence[str]]


def merged(keys: Sequence[str], scan: Scan, after: str, batch: int) -> Iterator[str]:
    """Members of ``keys`` after ``after``, in order and without repeats (a task sits in
    several keys under the same member), read ``batch`` at a time per key.

    ``scan(key, after, n)``: up to ``n`` members of ``key`` strictly after ``after`` ("" = from
    the start), in order. Each round takes the first ``batch`` of the union — every key's
    members up to that point were read, so nothing is skipped — and continues after it.
    """
    while True:
        heads = [list(scan(k, after, batch)) for k in keys]
        union = sorted(set(heapq.merge(*heads)))[:batch]
        if not union:
            return
        yield from union
        if all(len(h) < batch for h in heads) and len(union) < batch:
            return
        after = union[-1]


class MemoryTasks:
    """A read model in a dict, with the same indexes computed on demand (tests, tools): the
    listing logic is the same one the Redis read model serves."""

    def __init__(self, tasks: dict[str, TaskRecord] | None = None) -> None:
        self.tasks: dict[str, TaskRecord] = {} if tasks is None else tasks

    def get(self, task_id: str) -> TaskRecord | None:
        return self.tasks.get(task_id)

    def get_many(self, task_ids: Sequence[str]) -> list[TaskRecord | None]:
        return [self.tasks.get(i) for i in task_ids]

    def scan(self, key: str, after: str, n: int) -> list[str]:
        found = {
            m for r in self.tasks.values() for k, m in memberships(r) if k == key and m > after
        }
        return sorted(found)[:n]
