"""Worklist list latency and tick cost with many decided tasks (review M8), on the real Redis.

    python -m benchmarks.worklist_list [--decided 10000] [--open 10] [--repeat 30]

Loads ``--decided`` DECIDED tasks and ``--open`` OPEN ones into a read model of its own (a
unique namespace, deleted afterwards) through ``TaskStore.apply`` — the same Lua the indexer
runs — then times, median and p95 over ``--repeat`` calls:

- ``before``: what ``Worklist.list`` did until the review (HGETALL every task, decode all,
  filter, sort, cut to the limit) — reproduced here, it is no longer in the service;
- ``after``: ``Worklist.page`` on the indexes: the default list, open tasks only (the page's
  first table), and the latest 20 done (its third);
- the writer's tick: a walk of the whole table (before) vs the handler's index of what can come
  due (after), over the same 10 010 rows in the processor's ``State``.

Prints JSON. Numbers, not assertions: a loaded machine moves them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis

from runplane.config import Settings
from runplane.kafka.handler import State
from runplane.serving.auth import Principal
from runplane.wire import DecisionOutcome, ExpiryPolicy, OpenTask, TaskKind, TaskRecord, TaskStatus
from services.worklist.access import FINAL, Policy, visible_to
from services.worklist.actions import Filter, HumanCommand, Worklist
from services.worklist.decide import due_for_expiry
from services.worklist.gateway import Sent
from services.worklist.handler import WorklistHandler
from services.worklist.readmodel import Change, TaskStore

ROLES = {"ada": frozenset({"finance"}), "ivan": frozenset({"finance"})}
POLICY = Policy(lambda n: ROLES.get(n, frozenset()))
ADA = Principal("ada", "0" * 64, ROLES["ada"])
NOW = 1_700_000_000_000


class _ReadOnly:
    """The sender of a worklist that only lists: the benchmark sends no commands."""

    def send(self, command: HumanCommand) -> Sent:
        raise AssertionError("the list benchmark sends no commands")

    def await_applied(self, sent: Sent, done: Callable[[], bool] | None = None) -> None:
        raise AssertionError("the list benchmark sends no commands")


def _task(i: int, status: TaskStatus) -> TaskRecord:
    t = OpenTask(
        task_id=f"run-{i}/0/1",
        session_id=f"run-{i}",
        era=0,
        call_seq=1,
        kind=TaskKind.APPROVAL,
        question=f"Refund {i} cents?",
        answer_json=json.dumps({"amount_cents": i, "invoice_id": f"INV-{i}"}),
        case_id=f"case-{i % 50}",
        capability="refund",
        role="finance",
        initiator="ivan",
        on_expiry=ExpiryPolicy.FAIL,
        expires_ms=NOW + 3_600_000 if status is TaskStatus.OPEN else None,
        opened_ms=NOW - 1_000_000 + i,
    )
    if status is TaskStatus.OPEN:
        return TaskRecord(task=t, status=status, updated_ms=t.opened_ms)
    return TaskRecord(
        task=t,
        status=status,
        claimed_by="bob",
        approved_by=("bob",),
        outcome=DecisionOutcome.APPROVED,
        updated_ms=NOW - 500_000 + i,
    )


def _old_list(store: TaskStore, client: redis.Redis, key: str, limit: int) -> list[TaskRecord]:
    """The pre-review ``Worklist.list``: every record, every time."""
    out = []
    for value in client.hgetall(key).values():
        task = store._decode(value)
        if visible_to(task, ADA.name, POLICY):
            out.append(task)
    out.sort(
        key=lambda t: (
            t.status in FINAL,
            t.task.opened_ms if t.status not in FINAL else -t.updated_ms,
        )
    )
    return out[:limit]


def _timed(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    fn()  # warm: scripts loaded, connections open
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return {
        "median_ms": round(statistics.median(samples), 3),
        "p95_ms": round(samples[max(0, int(len(samples) * 0.95) - 1)], 3),
    }


def _old_tick(state: State, now: int) -> int:
    return sum(
        1
        for _, row in state.items("tasks")
        if isinstance(row, TaskRecord) and due_for_expiry(row, now)
    )


def run(settings: Settings, decided: int, open_: int, repeat: int) -> dict[str, Any]:
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=30)
    ns = f"bench-{uuid.uuid4().hex[:8]}.worklist:"
    store = TaskStore(client, ns)
    records = [_task(i, TaskStatus.DECIDED) for i in range(decided)]
    records += [_task(decided + i, TaskStatus.OPEN) for i in range(open_)]
    try:
        t0 = time.perf_counter()
        for i in range(0, len(records), 500):
            chunk = records[i : i + 500]
            store.apply(
                [Change(r.task.task_id, i + j, r) for j, r in enumerate(chunk)], {0: i + 500}
            )
        load_s = time.perf_counter() - t0
        wl = Worklist(store, _ReadOnly(), POLICY, clock=lambda: NOW)
        got = wl.list(ADA, Filter(limit=200))
        old = _old_list(store, client, f"{ns}tasks", 200)
        assert [t.task.task_id for t in got] == [t.task.task_id for t in old], "orders differ"
        lists = {
            "before_default_list_limit_200": _timed(
                lambda: _old_list(store, client, f"{ns}tasks", 200), repeat
            ),
            "after_default_list_limit_200": _timed(lambda: wl.list(ADA, Filter(limit=200)), repeat),
            "after_open_only_limit_500": _timed(
                lambda: wl.list(ADA, Filter(limit=500, active=True)), repeat
            ),
            "after_latest_20_done": _timed(
                lambda: wl.list(ADA, Filter(limit=20, active=False)), repeat
            ),
        }
        handler = WorklistHandler(POLICY, gauge_every_ms=10**9)
        state = State(handler.tables)
        state._load("tasks", 0, {r.task.task_id: r for r in records})
        handler.on_assign([0])
        handler.tick(state, NOW)  # builds the index once, as after a rebalance
        ticks = {
            "before_tick_walks_table": _timed(lambda: _old_tick(state, NOW), repeat),
            "after_tick_walks_due_index": _timed(lambda: handler.tick(state, NOW), repeat),
            "tick_index_size": handler.due_count(),
        }
        return {
            "decided": decided,
            "open": open_,
            "load_s": round(load_s, 2),
            "list": lists,
            "tick": ticks,
        }
    finally:
        keys = list(client.scan_iter(match=f"{ns}*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i : i + 500])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decided", type=int, default=10_000)
    parser.add_argument("--open", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    print(json.dumps(run(Settings.from_env(), args.decided, args.open, args.repeat), indent=2))


if __name__ == "__main__":
    main()
