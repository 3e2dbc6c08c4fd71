"""The incremental chain checker agrees with the core's verifier and names the right seq."""

from __future__ import annotations

import dataclasses
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.core.chain import seal
from runplane.core.verify import ERASED, Tip, check, verify_chain, verify_records
from runplane.wire import JournalRecord, ResultEntry, Verdict
from tests.helpers.sample import sample_run

SID = "r-chain-1"


def build(n_calls: int = 3) -> tuple[list[JournalRecord], dict[tuple[int, int], ResultEntry]]:
    return sample_run(SID, n_calls)


def test_a_sealed_run_verifies_record_by_record() -> None:
    records, results = build()
    report = verify_records(SID, records, results)
    assert report.verified and report.broken_at_seq is None
    assert [f.verdict for _, f in report.findings] == [Verdict.VERIFIED] * len(records)


def test_capability_comes_from_admission() -> None:
    records, _ = build(1)
    tip = Tip(SID)
    f = check(tip, records[0], None)
    from runplane.core.verify import advance

    assert advance(tip, records[0], f).capability == "refund"


def test_erased_or_absent_body_is_body_missing_not_a_break() -> None:
    records, results = build(2)
    erased = {**results, (0, 0): ERASED}
    absent = {k: v for k, v in results.items() if k != (0, 1)}
    r1 = verify_records(SID, records, erased)
    r2 = verify_records(SID, records, absent)
    assert r1.verified and r1.body_missing == (2,)
    assert r2.verified and r2.body_missing == (4,)


def test_tampered_body_breaks_at_its_record() -> None:
    records, results = build(3)
    bad = dataclasses.replace(results[(0, 1)], value_json=json.dumps({"n": 999}))
    report = verify_records(SID, records, {**results, (0, 1): bad})
    assert not report.verified and report.broken_at_seq == 4
    assert report.reason is not None and report.reason.startswith("body_digest_mismatch")
    # everything after the break is reported broken at the same seq
    assert all(f.broken_at_seq == 4 for seq, f in report.findings if seq >= 4)


def _tamper(records: list[JournalRecord], how: str, at: int) -> list[JournalRecord]:
    out = list(records)
    if how == "drop":
        del out[at]
    elif how == "swap" and at + 1 < len(out):
        out[at], out[at + 1] = out[at + 1], out[at]
    elif how == "content":
        out[at] = dataclasses.replace(out[at], stamp_ms=out[at].stamp_ms + 1)
    elif how == "relink":
        # a validly hashed record whose prev_hash points elsewhere
        out[at] = seal(dataclasses.replace(out[at], attrs={"forged": "1"}), "f" * 64)
    elif how == "duplicate":
        out.insert(at + 1, out[at])
    return out


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=5),
    how=st.sampled_from(["drop", "swap", "content", "relink", "duplicate", "none"]),
    at=st.integers(min_value=0, max_value=20),
)
def test_agrees_with_the_core_verifier(n: int, how: str, at: int) -> None:
    records, results = build(n)
    at = at % len(records)
    chain = records if how == "none" else _tamper(records, how, at)
    core = verify_chain(chain, results)
    ours = verify_records(SID, chain, results)
    assert ours.verified == core.ok
    if not core.ok:
        assert ours.broken_at_seq == core.bad_seq
        assert ours.reason is not None and core.fault is not None
        assert ours.reason.startswith(str(core.fault))


def test_an_empty_chain_does_not_verify() -> None:
    assert not verify_records(SID, [], {}).verified
