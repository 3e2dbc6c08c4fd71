"""Restoring a compacted table: last write wins, and an unreadable newest row drops its key.

Review minor 1: a newest row that cannot be decoded used to leave the older row in place,
reviving a state the writer had moved past (an old next_seq/last_hash forks a chain).
"""

from __future__ import annotations

from runplane.errors import WireError
from runplane.kafka.restore import Restored, Restorer


def decode(data: bytes) -> str:
    if data.startswith(b"!"):
        raise WireError("unreadable")
    return data.decode()


def fold(rows: list[tuple[bytes, bytes | None]]) -> Restored[str]:
    result: Restored[str] = Restored({0: {}})
    for key, value in rows:
        Restorer._apply(result, 0, key, value, decode)
    return result


def test_last_write_wins_and_tombstone_deletes() -> None:
    got = fold([(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", None)])
    assert got.merged() == {"a": "2"}
    assert got.unreadable == set()


def test_unreadable_newest_row_drops_the_key_instead_of_reviving_the_older_row() -> None:
    got = fold([(b"run", b"seq-5"), (b"run", b"!garbled"), (b"other", b"x")])
    assert got.merged() == {"other": "x"}
    assert got.unreadable == {"run"}
    assert got.skipped == 1


def test_a_later_readable_row_or_tombstone_clears_the_unreadable_mark() -> None:
    got = fold([(b"a", b"!x"), (b"a", b"3"), (b"b", b"!y"), (b"b", None)])
    assert got.merged() == {"a": "3"}
    assert got.unreadable == set()


def test_a_row_that_is_not_the_same_as_the_one_it_replaces_is_a_conflict() -> None:
    # ``same``: rows of one key must agree on what their first character names (a witness).
    result: Restored[str] = Restored({0: {}})
    rows = [(b"s/0/1", b"a-1"), (b"s/0/1", b"a-2"), (b"s/0/2", b"a-1"), (b"s/0/2", b"b-1")]
    for key, value in rows:
        Restorer._apply(result, 0, key, value, decode, lambda old, new: old[0] == new[0])
    assert result.conflicts == {"s/0/2"}
    assert result.merged() == {"s/0/1": "a-2", "s/0/2": "b-1"}  # the newest row still wins
