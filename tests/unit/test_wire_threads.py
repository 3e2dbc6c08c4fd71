"""The decoder's table of known schemas is built on first use: threads that decode at once on
a cold table all know every record (a thread once saw half a table and called the last
record types' fingerprints unknown — a service decoding in two threads dead-lettered them)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

import runplane.wire._serde as serde_module
from runplane.wire import WarnDeadline, decode, encode, record_types


@pytest.fixture
def busy_switching() -> Iterator[None]:
    before = sys.getswitchinterval()
    table = dict(serde_module._WRITERS)  # writer schemas other tests registered stay known
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows at once
    try:
        yield
    finally:
        sys.setswitchinterval(before)
        serde_module._WRITERS.clear()
        serde_module._WRITERS.update(table)


def test_threads_decoding_on_a_cold_table_know_every_record(busy_switching: None) -> None:
    # The table is filled in record_types() order: the last type is the one a half table lacks.
    assert list(record_types().values())[-1] is WarnDeadline
    data = encode(WarnDeadline(case_id="c-1", request_id="r-1", name="reply", due_ms=1))
    errors: list[Exception] = []

    def go() -> None:
        try:
            decode(data)
        except Exception as exc:  # the assertion below names it
            errors.append(exc)

    for _ in range(50):
        serde_module._WRITERS.clear()

        threads = [threading.Thread(target=go) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
