"""The executor's timer index (``services/executor/timerindex.py``) finds exactly the runs a
scan of every snapshot would: after any sequence of puts, replacements and removals, ``due``
is the set of runs whose current snapshot's timer has come — and stays so until the snapshot
changes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.timers import parked_snapshot
from runplane.core.engine import timer_due
from runplane.wire import SessionSnapshot
from services.executor.state import PartitionState
from services.executor.timerindex import TimedSessions


def _scan(sessions: dict[str, SessionSnapshot], now: int) -> set[str]:
    return {k for k, s in sessions.items() if (d := timer_due(s)) is not None and d <= now}


OPS = st.lists(
    st.tuples(
        st.sampled_from(["put", "pop", "del", "due"]),
        st.sampled_from([f"r{i}" for i in range(6)]),
        st.one_of(st.none(), st.integers(0, 50)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_the_index_finds_what_a_scan_finds(ops: list[tuple[str, str, int | None]]) -> None:
    indexed, plain = TimedSessions(), {}
    for op, run_id, n in ops:
        if op == "put":
            indexed[run_id] = plain[run_id] = parked_snapshot(run_id, n)
        elif op == "pop":
            assert indexed.pop(run_id, None) == plain.pop(run_id, None)
        elif op == "del" and run_id in plain:
            del indexed[run_id]
            del plain[run_id]
        elif op == "due":
            now = n or 0
            got = indexed.due(now)
            assert set(got) == _scan(plain, now)
            assert len(got) == len(set(got))  # each run once
            assert set(indexed.due(now)) == set(got)  # still due: nothing changed
        assert dict(indexed) == plain


def test_a_partition_handed_a_plain_dict_indexes_it() -> None:
    part = PartitionState(sessions={"a": parked_snapshot("a", 5), "b": parked_snapshot("b", None)})
    assert isinstance(part.sessions, TimedSessions)
    assert part.sessions.due(10) == ["a"]
    part.sessions["a"] = parked_snapshot("a", None)  # the wake applied: the timer is gone
    assert part.sessions.due(10) == []
