"""The journal service holds a result entry to its chain record as the core verifier does.

Its fold calls the core's checks (``check_link``, ``check_entry``), so an entry whose stamp,
witness, name, family or label was rewritten — with a body and digest left intact — breaks
the chain in the service's audit stream, in ``verify_records`` (the CLI and the API) and in
``runplane.core.verify_chain`` alike, at the same seq and for the same fault.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from runplane.core.chain import ChainFault, default_label
from runplane.core.verify import verify_chain, verify_records
from runplane.wire import AuditRecord, JournalRecord, ResultEntry, Verdict
from services.journal.decide import (
    AuditOut,
    JournalIn,
    PartitionState,
    QuarantineOut,
    ResultIn,
    on_journal,
    on_result,
)
from tests.helpers.sample import sample_run

SID = "r-entry-fields-1"

REWRITES: list[tuple[str, Callable[[ResultEntry], Any]]] = [
    ("stamp_ms", lambda e: e.stamp_ms + 60_000),
    ("request_witness", lambda e: "0" * 64),
    ("name", lambda e: "model:scripted/other"),
    ("family", lambda e: "tool"),
    ("label", lambda e: default_label(["somewhere/else"])),
]


def _tampered(
    field: str, value: Callable[[ResultEntry], Any]
) -> tuple[list[JournalRecord], dict[tuple[int, int], ResultEntry], int]:
    """A sample run whose second call's entry has ``field`` rewritten; the record's seq."""
    records, results = sample_run(SID, 3)
    entry = results[(0, 1)]
    results[(0, 1)] = dataclasses.replace(entry, **{field: value(entry)})
    recorded = next(r for r in records if r.call_seq == 1 and r.body_digest is not None)
    return records, results, recorded.seq


def _service_audits(
    records: list[JournalRecord], results: dict[tuple[int, int], ResultEntry]
) -> tuple[list[AuditRecord], list[QuarantineOut]]:
    """Bodies first, then the chain, through the service's handler."""
    state = PartitionState(0, body_grace_ms=1_000)
    out: list[Any] = []
    for offset, (key, entry) in enumerate(results.items()):
        out += on_result(state, ResultIn((SID, *key), entry, 0, offset), 0)
    for offset, record in enumerate(records):
        out += on_journal(state, JournalIn(record, 0, offset), 0)
    audits = [o.record for o in out if isinstance(o, AuditOut)]
    return audits, [o for o in out if isinstance(o, QuarantineOut)]


def test_an_untouched_run_verifies_in_the_service() -> None:
    records, results = sample_run(SID, 3)
    audits, quarantines = _service_audits(records, results)
    assert [a.verdict for a in audits] == [Verdict.VERIFIED] * len(records)
    assert quarantines == []


def test_a_rewritten_stamp_is_broken_in_the_service() -> None:
    records, results, seq = _tampered("stamp_ms", REWRITES[0][1])
    audits, quarantines = _service_audits(records, results)
    assert [a.seq for a in audits] == [r.seq for r in records]
    assert {a.verdict for a in audits if a.seq < seq} == {Verdict.VERIFIED}
    broken = audits[seq]
    assert broken.verdict is Verdict.BROKEN and broken.broken_at_seq == seq
    assert broken.reason is not None
    assert broken.reason.startswith(str(ChainFault.BODY_DIGEST_MISMATCH))
    assert "stamp_ms" in broken.reason
    assert all(a.verdict is Verdict.BROKEN and a.broken_at_seq == seq for a in audits[seq:])
    assert [q.broken_at_seq for q in quarantines] == [seq]


@pytest.mark.parametrize(("field", "value"), REWRITES)
def test_service_cli_and_core_agree_on_a_rewritten_field(
    field: str, value: Callable[[ResultEntry], Any]
) -> None:
    records, results, seq = _tampered(field, value)
    core = verify_chain(records, results)
    report = verify_records(SID, records, dict(results))
    audits, _ = _service_audits(records, results)
    assert not core.ok and core.bad_seq == seq and core.fault is ChainFault.BODY_DIGEST_MISMATCH
    assert not report.verified and report.broken_at_seq == seq
    assert report.reason == f"{core.fault}: {core.detail}"
    assert audits[seq].reason == report.reason
    assert field in report.reason
