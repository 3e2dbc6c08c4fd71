"""The canonical encoding, sealing, and the verifier naming the first bad record."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import examples.refund  # noqa: F401  (registers "refund")
from runplane.core import (
    REGISTRY,
    ChainFault,
    body_digest,
    canonical_json,
    record_hash,
    request_witness,
    run_admitted,
    seal,
    verify_chain,
)
from runplane.core.canonical import format_float
from runplane.testing import Driver
from runplane.wire import ZERO_HASH, JournalRecord, ResultEntry, to_dict


def _completed_refund() -> tuple[list[JournalRecord], dict[tuple[int, int], ResultEntry]]:
    tools = {
        "fetch_invoice": lambda args, key: {"invoice_id": args["invoice_id"], "amount_cents": 250},
        "charge_card": lambda args, key: {"charge_id": "ch-1"},
    }
    driver = Driver(REGISTRY, tools=tools, approve="APPROVED")
    run = driver.run("refund", {"invoice_id": "inv-42"})
    assert run.output is not None and run.output["status"] == "refunded"
    return list(run.journal), dict(run.results)


# ---------------------------------------------------------------- canonical encoding
@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (1.5, "1.5"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (123456789.125, "123456789.125"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (-333.5, "-333.5"),
    ],
)
def test_floats_are_written_as_ecmascript_does(value: float, text: str) -> None:
    assert format_float(value) == text


def test_canonical_json_sorts_keys_escapes_minimally_and_keeps_big_integers() -> None:
    value = {"b": [1, True, None], "a": 'é\n"\\\x01', "c": 2**70, "\u00e9": {"z": 1, "y": 2.5}}
    assert (
        canonical_json(value)
        == '{"a":"é\\n\\"\\\\\\u0001","b":[1,true,null],"c":1180591620717411303424,"é":{"y":2.5,"z":1}}'
    )


@pytest.mark.parametrize("bad", [math.nan, math.inf, {1: "x"}, b"bytes", {"s": {1, 2}}])
def test_canonical_json_refuses_what_has_no_canonical_form(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonical_json(bad)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(_json)
def test_canonical_json_round_trips_and_is_a_fixed_point(value: object) -> None:
    text = canonical_json(value)
    decoded = json.loads(text)
    assert canonical_json(decoded) == text
    # Whatever the key order of the input, the witness is the same.
    if isinstance(value, dict):
        assert request_witness(dict(reversed(list(value.items())))) == request_witness(value)


# ---------------------------------------------------------------- sealing
def test_seq0_is_recomputable_from_the_documented_rule() -> None:
    record = run_admitted(
        "run-x",
        capability="refund",
        admission_key="k",
        tenant="t",
        initiator="i",
        input_json='{"b":1,"a":2}',
        now_ms=5,
    )
    body = to_dict(record)
    del body["hash"]
    expected = hashlib.sha256(bytes.fromhex(ZERO_HASH) + canonical_json(body).encode()).hexdigest()
    assert record.seq == 0 and record.prev_hash == ZERO_HASH
    assert record.hash == expected == record_hash(record)
    assert record.request_witness == hashlib.sha256(b'{"a":2,"b":1}').hexdigest()
    assert verify_chain([record]).ok


def test_body_digest_is_over_ok_value_and_error() -> None:
    assert (
        body_digest(True, {"x": 1}, None)
        == hashlib.sha256(b'{"error":null,"ok":true,"value":{"x":1}}').hexdigest()
    )
    assert body_digest(True, 1, None) != body_digest(True, 2, None)


# ---------------------------------------------------------------- the verifier
def test_a_completed_run_verifies_with_its_bodies() -> None:
    records, results = _completed_refund()
    verdict = verify_chain(records, results)
    assert verdict.ok and verdict.checked == len(records) and verdict.fault is None


def test_a_tampered_record_is_named() -> None:
    records, results = _completed_refund()
    target = 3
    records[target] = dataclasses.replace(records[target], stamp_ms=records[target].stamp_ms + 1)
    verdict = verify_chain(records, results)
    assert not verdict.ok and verdict.fault is ChainFault.BAD_HASH and verdict.bad_seq == target


def test_a_resealed_record_breaks_the_next_link() -> None:
    records, results = _completed_refund()
    # A forger who recomputes the tampered record's hash still breaks its successor's link.
    records[2] = seal(dataclasses.replace(records[2], attrs={"forged": "yes"}), records[1].hash)
    verdict = verify_chain(records, results)
    assert verdict.fault is ChainFault.BAD_LINK and verdict.bad_seq == 3


def test_a_reordered_record_is_named() -> None:
    records, results = _completed_refund()
    records[2], records[3] = records[3], records[2]
    verdict = verify_chain(records, results)
    assert verdict.fault is ChainFault.GAP and verdict.bad_seq == 2
    records, results = _completed_refund()
    records.insert(4, records[1])  # a replayed (duplicated) old record
    verdict = verify_chain(records, results)
    assert verdict.fault is ChainFault.REORDER and verdict.bad_seq == 4


def test_a_dropped_record_is_named() -> None:
    records, results = _completed_refund()
    del records[4]
    verdict = verify_chain(records, results)
    assert not verdict.ok and verdict.fault is ChainFault.GAP and verdict.bad_seq == 4
    assert "expected seq 4, got 5" in verdict.detail


def test_a_tampered_body_is_named_at_its_recording_record() -> None:
    records, results = _completed_refund()
    key = (0, 0)
    results[key] = dataclasses.replace(
        results[key], value_json='{"amount_cents":99999,"invoice_id":"inv-42"}'
    )
    verdict = verify_chain(records, results)
    recording = next(r for r in records if r.body_digest is not None and (r.era, r.call_seq) == key)
    assert verdict.fault is ChainFault.BODY_DIGEST_MISMATCH and verdict.bad_seq == recording.seq


def test_a_missing_body_is_named_but_an_erased_one_is_allowed() -> None:
    records, results = _completed_refund()
    erased = dict(results)
    erased[(0, 0)] = None  # type: ignore[assignment]  # tombstone: erased on purpose
    assert verify_chain(records, erased).ok
    missing = {k: v for k, v in results.items() if k != (0, 2)}
    verdict = verify_chain(records, missing)
    recording = next(
        r for r in records if r.body_digest is not None and (r.era, r.call_seq) == (0, 2)
    )
    assert verdict.fault is ChainFault.BODY_MISSING and verdict.bad_seq == recording.seq


def test_an_empty_or_foreign_chain_does_not_verify() -> None:
    assert verify_chain([]).fault is ChainFault.EMPTY
    records, _ = _completed_refund()
    other = run_admitted(
        "other",
        capability="refund",
        admission_key="k",
        tenant="t",
        initiator="i",
        input_json="{}",
        now_ms=1,
    )
    forged = seal(dataclasses.replace(other, seq=1), records[0].hash)
    verdict = verify_chain([records[0], forged])
    assert verdict.fault is ChainFault.WRONG_SESSION and verdict.bad_seq == 1
