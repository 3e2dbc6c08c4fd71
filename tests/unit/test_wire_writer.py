"""The compiled Avro writer writes exactly the bytes fastavro writes, for every record type."""

from __future__ import annotations

import io

import pytest
from fastavro import schemaless_writer
from hypothesis import given, settings

from runplane.errors import SchemaError
from runplane.wire import (
    Cost,
    JournalKind,
    JournalRecord,
    Label,
    Record,
    Sensitivity,
    Trust,
    decode,
    encode,
    parsed_schema,
    to_dict,
)
from runplane.wire._serde import _compile_writer, _fastavro_body, _zigzag, write_body
from runplane.wire.strategies import any_record

pytestmark = pytest.mark.unit


def _fastavro(record: Record) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parsed_schema(type(record)), to_dict(record))
    return buf.getvalue()


@settings(max_examples=1500, deadline=None)
@given(any_record())
def test_compiled_writer_writes_fastavros_bytes(record: Record) -> None:
    compiled = _compile_writer(type(record))
    assert compiled is not _fastavro_body, f"{type(record).__name__} fell back to fastavro"
    assert compiled(record) == _fastavro(record)
    assert decode(encode(record)) == record


@pytest.mark.parametrize(
    "n", [0, 1, -1, 63, -64, 64, -65, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63), 1_700_000_000_000]
)
def test_zigzag_varints_match_the_specification(n: int) -> None:
    z = (n << 1) ^ (n >> 63)  # the spec's zig-zag, then base-128 little-endian groups
    expected = bytearray()
    while True:
        if z < 0x80:
            expected.append(z)
            break
        expected.append((z & 0x7F) | 0x80)
        z >>= 7
    assert _zigzag(n) == bytes(expected)


def test_a_record_broken_past_validation_still_fails_as_fastavro_fails_it() -> None:
    record = JournalRecord(
        session_id="s-1",
        seq=0,
        era=0,
        kind=JournalKind.RUN_ADMITTED,
        stamp_ms=0,
        label=Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=()),
        cost=Cost(),
        prev_hash="00" * 32,
        hash="00" * 32,
    )
    object.__setattr__(record, "seq", "not a number")  # bypassing validation on purpose
    with pytest.raises(SchemaError):
        write_body(record)


def test_large_varints_are_the_same_from_the_cache() -> None:
    values = [1_700_000_000_000 + i for i in range(600)] + [-(2**63), 2**63 - 1, -1025]
    first = [_zigzag(n) for n in values]
    assert [_zigzag(n) for n in values] == first  # served partly from the cache, cleared once
    assert first[0] == bytes.fromhex("80a0abfef962")  # the golden Wake's sent_ms
