"""Wire records and the single-object serde: round trips, golden bytes, bad input, evolution."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane import Settings
from runplane.errors import SchemaError, WireError
from runplane.wire import (
    TOPIC_RECORDS,
    ZERO_HASH,
    AdmissionRequest,
    Cost,
    DeadLetter,
    ErrorInfo,
    JournalKind,
    JournalRecord,
    Label,
    Record,
    ResultEntry,
    Sensitivity,
    SingleObjectSerde,
    Trust,
    Wake,
    admission_key_problem,
    decode,
    decode_for,
    encode,
    from_dict,
    logical_topic,
    parsed_schema,
    record_types,
    register_writer_schema,
    schema_fingerprint,
    serde_for,
    tenant_problem,
    to_dict,
)
from runplane.wire.strategies import any_record, records

pytestmark = pytest.mark.unit

LABEL = Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.INTERNAL, provenance=("agent/refund",))


def journal(**overrides: Any) -> JournalRecord:
    base: dict[str, Any] = dict(
        session_id="s-1",
        seq=0,
        era=0,
        kind=JournalKind.RUN_ADMITTED,
        stamp_ms=1_700_000_000_000,
        label=LABEL,
        prev_hash=ZERO_HASH,
        hash="ab" * 32,
    )
    return JournalRecord(**{**base, **overrides})


def admission(**overrides: Any) -> AdmissionRequest:
    base: dict[str, Any] = dict(
        admission_key="order-17",
        capability="refund",
        input_json='{"amount": 12}',
        correlation_keys={"dispute": "D-17"},
        tenant="acme",
        initiator="alice",
        requested_ms=5,
    )
    return AdmissionRequest(**{**base, **overrides})


# ---- round trips -----------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(any_record())
def test_every_record_type_round_trips_through_bytes(record: Record) -> None:
    assert decode(encode(record)) == record


@settings(max_examples=200, deadline=None)
@given(any_record())
def test_every_record_type_round_trips_through_dicts(record: Record) -> None:
    plain = to_dict(record)
    assert from_dict(type(record), plain) == record
    # Enum symbols, lists and dicts only: what JSON APIs and the canonical hash consume.
    if not isinstance(record, DeadLetter):  # the one type with bytes, which JSON lacks
        assert from_dict(type(record), json.loads(json.dumps(plain))) == record


ALL_TYPES = sorted(record_types().values(), key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", ALL_TYPES, ids=[c.__name__ for c in ALL_TYPES])
def test_each_type_has_a_round_trip_example(cls: type[Record]) -> None:
    # The sampled test above could, in principle, skip a type; this one cannot.
    @settings(max_examples=15, deadline=None)
    @given(records(cls))
    def check(record: Record) -> None:
        assert type(record) is cls
        assert decode(encode(record)) == record

    check()


def test_fastavro_reads_our_body_with_the_plain_schema() -> None:
    # A non-Python consumer sees an ordinary Avro body after the 10-byte header.
    record = admission()
    data = encode(record)
    parsed = fastavro.parse_schema(json.loads(AdmissionRequest.avro_schema_json()))
    assert fastavro.schemaless_reader(io.BytesIO(data[10:]), parsed, None) == to_dict(record)


# ---- golden bytes ----------------------------------------------------------------------------

# magic | CRC-64-AVRO fingerprint of Wake | "s-1-1" | "evicted" | 1_700_000_000_000 (zig-zag)
GOLDEN_WAKE = "c301" + "09cb2999fbfc5bce" + "0a732d312d31" + "0e65766963746564" + "80a0abfef962"


def test_golden_bytes_for_a_wake() -> None:
    # Pinned on purpose: a change here breaks every reader of existing topics.
    record = Wake(session_id="s-1-1", reason="evicted", sent_ms=1_700_000_000_000)
    assert encode(record).hex() == GOLDEN_WAKE
    assert decode(bytes.fromhex(GOLDEN_WAKE)) == record


def _crc64_avro(data: bytes) -> int:
    """The Avro specification's reference Rabin fingerprint, written out independently."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for b in data:
        fp = (fp >> 8) ^ table[(fp ^ b) & 0xFF]
    return fp


@pytest.mark.parametrize("cls", [Wake, JournalRecord, AdmissionRequest], ids=lambda c: c.__name__)
def test_fingerprint_is_the_specs_crc64_little_endian(cls: type[Record]) -> None:
    pcf = fastavro.schema.to_parsing_canonical_form(
        fastavro.parse_schema(json.loads(cls.avro_schema_json()))
    )
    expected = _crc64_avro(pcf.encode("utf-8")).to_bytes(8, "little")
    assert schema_fingerprint(cls) == expected
    assert (
        encode(
            Wake(session_id="x", reason="y", sent_ms=0)
            if cls is Wake
            else journal()
            if cls is JournalRecord
            else admission()
        )[2:10]
        == expected
    )


# ---- bad bytes -------------------------------------------------------------------------------


def test_truncated_input_is_a_wire_error() -> None:
    data = encode(journal())
    for cut in (0, 1, 2, 9, 10, 11, len(data) - 1):
        with pytest.raises(WireError):
            decode(data[:cut])


def test_trailing_bytes_are_a_wire_error() -> None:
    with pytest.raises(WireError, match="trailing"):
        decode(encode(journal()) + b"\x00")


def test_unknown_fingerprint_is_a_wire_error() -> None:
    data = encode(journal())
    with pytest.raises(WireError, match="unknown schema fingerprint"):
        decode(data[:2] + bytes(8) + data[10:])


def test_wrong_magic_is_a_wire_error() -> None:
    data = encode(journal())
    with pytest.raises(WireError, match="single-object"):
        decode(b"\x00\x01" + data[2:])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.sampled_from(sorted(record_types(), key=str)))
def test_garbled_bodies_raise_only_wire_errors(body: bytes, name: str) -> None:
    data = b"\xc3\x01" + schema_fingerprint(record_types()[name]) + body
    try:
        record = decode(data)
    except WireError:
        return
    # Random bytes that happen to decode must still be a valid record of that type.
    assert isinstance(record, record_types()[name])


def test_non_bytes_input_is_a_wire_error() -> None:
    with pytest.raises(WireError):
        decode("c301")  # type: ignore[arg-type]


def test_a_decodable_but_invalid_record_is_a_wire_error() -> None:
    # Written by a foreign producer that skipped our validators: the hash is not hex.
    plain = to_dict(journal())
    plain["hash"] = "not-a-hash"
    buf = io.BytesIO()
    fastavro.schemaless_writer(
        buf, fastavro.parse_schema(json.loads(JournalRecord.avro_schema_json())), plain
    )
    with pytest.raises(WireError, match="hash must be 64 lowercase hex"):
        decode(b"\xc3\x01" + schema_fingerprint(JournalRecord) + buf.getvalue())


def test_an_enum_index_out_of_range_is_a_wire_error() -> None:
    data = bytearray(
        encode(Label(trust=Trust.UNTRUSTED, sensitivity=Sensitivity.SECRET, provenance=()))
    )
    data[10] = 0x7E  # zig-zag 63: no such Trust symbol
    with pytest.raises(WireError):
        decode(bytes(data))


# ---- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"seq": -1}, "seq must be >= 0"),
        ({"hash": "AB" * 32}, "hash must be 64 lowercase hex"),
        ({"prev_hash": "0" * 63}, "prev_hash must be 64 lowercase hex"),
        ({"request_witness": "xyz"}, "request_witness"),
        ({"kind": "NOT_A_KIND"}, "kind"),
        ({"era": 2**31}, "outside the range of an Avro int"),
        ({"attrs": {"a": 1}}, "expected a string"),
        ({"label": {"trust": "TRUSTED"}}, "expected a Label"),
        ({"session_id": ""}, "session_id must not be empty"),
    ],
)
def test_journal_record_validation(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(WireError, match=message):
        journal(**overrides)


def test_symbols_and_lists_are_normalised() -> None:
    record = journal(
        kind="RUN_FAILED", label=Label(trust="TRUSTED", sensitivity="PUBLIC", provenance=["a", "b"])
    )  # type: ignore[arg-type]
    assert record.kind is JournalKind.RUN_FAILED
    assert record.label.provenance == ("a", "b")
    assert record.label.trust is Trust.TRUSTED


def test_records_are_frozen() -> None:
    record = journal()
    with pytest.raises(AttributeError):
        record.seq = 3  # type: ignore[misc]
    attrs = {"tenant": "acme"}
    record = journal(attrs=attrs)
    attrs["tenant"] = "other"  # the caller's dict is copied, not shared
    assert record.attrs == {"tenant": "acme"}


def test_each_class_knows_its_name_and_parsed_schema() -> None:
    assert JournalRecord.avro_name == "runplane.v1.JournalRecord"
    assert parsed_schema(JournalRecord)["name"] == "runplane.v1.JournalRecord"
    assert parsed_schema(JournalRecord) is parsed_schema(JournalRecord)  # parsed once


@pytest.mark.parametrize("provenance", [("b", "a"), ("a", "a")])
def test_label_provenance_must_be_sorted_and_unique(provenance: tuple[str, ...]) -> None:
    with pytest.raises(WireError, match="sorted and unique"):
        Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.PUBLIC, provenance=provenance)


def _result(**overrides: Any) -> ResultEntry:
    base: dict[str, Any] = dict(
        session_id="s",
        era=0,
        call_seq=0,
        family="tool",
        name="tool://x",
        request_witness="1" * 64,
        ok=True,
        value_json="1",
        stamp_ms=1,
        body_digest="2" * 64,
        label=LABEL,
    )
    return ResultEntry(**{**base, **overrides})


def test_result_entry_ok_and_error_agree() -> None:
    assert _result().error is None
    assert (
        _result(ok=False, value_json=None, error=ErrorInfo(type="ToolError", message="m")).ok
        is False
    )
    with pytest.raises(WireError, match="ok result must not carry an error"):
        _result(error=ErrorInfo(type="ToolError", message="m"))
    with pytest.raises(WireError, match="failed result must carry an error"):
        _result(ok=False)


def test_admission_key_rules() -> None:
    assert admission_key_problem("k") is None
    assert admission_key_problem("é" * 128) is None  # 256 UTF-8 bytes exactly
    assert "257 bytes" in str(admission_key_problem("é" * 128 + "x"))
    assert "empty" in str(admission_key_problem(""))
    with pytest.raises(WireError, match="admission_key"):
        admission(admission_key="x" * 257)
    with pytest.raises(WireError, match="admission_key must not be empty"):
        admission(admission_key="")


@pytest.mark.parametrize("tenant", ["", "a/b", "a:b", "a.b", "a b", "a\tb", "a\x00b", "a\u200bb"])
def test_tenant_rules_refuse(tenant: str) -> None:
    assert tenant_problem(tenant) is not None
    with pytest.raises(WireError, match="tenant"):
        admission(tenant=tenant)


@pytest.mark.parametrize("tenant", ["acme", "acme-eu_1", "Kunde7", "日本"])
def test_tenant_rules_accept(tenant: str) -> None:
    assert tenant_problem(tenant) is None
    assert admission(tenant=tenant).tenant == tenant


def test_non_finite_numbers_are_refused() -> None:
    # They have no canonical JSON form, so the journal could not hash them.
    with pytest.raises(WireError, match="finite"):
        Cost(units=float("nan"))
    assert Cost(units=1).units == 1.0 and isinstance(Cost(units=1).units, float)


def test_lone_surrogates_are_refused() -> None:
    with pytest.raises(WireError, match="UTF-8"):
        Wake(session_id="s\ud800", reason="r", sent_ms=0)
    assert Wake(session_id="s-é-日本-😀", reason="r", sent_ms=0).session_id == "s-é-日本-😀"


def test_from_dict_reports_unknown_and_missing_fields() -> None:
    with pytest.raises(WireError, match="unknown fields"):
        from_dict(Wake, {"session_id": "s", "reason": "r", "sent_ms": 1, "actor": "root"})
    with pytest.raises(WireError, match="sent_ms"):
        from_dict(Wake, {"session_id": "s", "reason": "r"})
    with pytest.raises(WireError, match=r"label\.trust"):
        from_dict(
            JournalRecord,
            {
                **to_dict(journal()),
                "label": {"trust": "MAYBE", "sensitivity": "PUBLIC", "provenance": []},
            },
        )


def test_defaults_come_from_the_schema() -> None:
    record = Wake(session_id="s", reason="r", sent_ms=0)
    assert record == from_dict(Wake, {"session_id": "s", "reason": "r", "sent_ms": 0})
    request = from_dict(
        AdmissionRequest,
        {
            k: v
            for k, v in to_dict(admission()).items()
            if k not in ("requested_ms", "correlation_keys")
        },
    )
    assert request.requested_ms == 0 and request.correlation_keys == {}


# ---- topics ----------------------------------------------------------------------------------


def test_topic_records_match_the_contract() -> None:
    assert set(TOPIC_RECORDS) == {
        "admission",
        "admission.claims",
        "admission.replies",
        "runs.inbox",
        "journal",
        "results",
        "sessions",
        "cases.commands",
        "cases",
        "tasks.commands",
        "tasks",
        "schedules",
        "schedules.fired",
        "audit",
        "deadletter",
        "runs.stream",
        "runs.updates",
    }
    placed = [cls for classes in TOPIC_RECORDS.values() for cls in classes]
    assert len(placed) == len(set(placed)), "a record type sits on two topics"
    nested_only = {"Label", "Cost", "ErrorInfo", "Obligation", "ParkedOn"}
    assert {c.__name__ for c in placed} | nested_only == {
        c.__name__ for c in record_types().values()
    }


@pytest.mark.parametrize(
    ("topic", "logical"),
    [
        ("journal", "journal"),
        ("runplane.journal", "journal"),
        ("t_9f.cases.commands", "cases.commands"),
        ("runplane.cases", "cases"),
        ("x.admission.claims", "admission.claims"),
        ("x.admission", "admission"),
    ],
)
def test_logical_topic(topic: str, logical: str) -> None:
    assert logical_topic(topic) == logical


def test_decode_for_refuses_a_record_the_topic_does_not_carry() -> None:
    data = encode(journal())
    assert decode_for("runplane.journal", data) == journal()
    with pytest.raises(WireError, match="JournalRecord is not allowed on results"):
        decode_for("runplane.results", data)
    with pytest.raises(WireError, match="carries no runplane wire records"):
        decode_for("elsewhere", data)


def test_default_serde_is_single_object_and_checks_topics_both_ways() -> None:
    serde = serde_for(Settings())
    assert isinstance(serde, SingleObjectSerde)
    data = serde.encode("runplane.runs.inbox", Wake(session_id="s", reason="r", sent_ms=1))
    assert data == encode(Wake(session_id="s", reason="r", sent_ms=1))
    assert serde.decode("runs.inbox", data) == Wake(session_id="s", reason="r", sent_ms=1)
    with pytest.raises(WireError, match="not allowed on journal"):
        serde.encode("journal", Wake(session_id="s", reason="r", sent_ms=1))


# ---- schema evolution ------------------------------------------------------------------------


def _without_field(cls: type[Record], field: str) -> str:
    schema = json.loads(cls.avro_schema_json())
    schema["fields"] = [f for f in schema["fields"] if f["name"] != field]
    return json.dumps(schema)


def _single_object(schema_json: str, plain: dict[str, Any]) -> bytes:
    parsed = fastavro.parse_schema(json.loads(schema_json))
    fp = fastavro.schema.fingerprint(
        fastavro.schema.to_parsing_canonical_form(parsed), "CRC-64-AVRO"
    )
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, plain)
    return b"\xc3\x01" + bytes.fromhex(fp) + buf.getvalue()


def test_an_older_writer_is_read_with_the_current_defaults() -> None:
    old = _without_field(AdmissionRequest, "requested_ms")
    plain = {k: v for k, v in to_dict(admission()).items() if k != "requested_ms"}
    data = _single_object(old, plain)
    with pytest.raises(WireError, match="unknown schema fingerprint"):
        decode(data)  # an unannounced schema is refused ...
    register_writer_schema(old)
    assert decode(data) == admission(requested_ms=0)  # ... a registered older one resolves


def test_a_newer_writer_with_an_extra_field_is_read_by_the_current_reader() -> None:
    schema = json.loads(Wake.avro_schema_json())
    schema["fields"].append({"name": "priority", "type": "int", "default": 0})
    newer = json.dumps(schema)
    register_writer_schema(newer)
    data = _single_object(newer, {"session_id": "s", "reason": "r", "sent_ms": 9, "priority": 3})
    assert decode(data) == Wake(session_id="s", reason="r", sent_ms=9)


def test_register_writer_schema_refuses_unknown_records() -> None:
    with pytest.raises(SchemaError):
        register_writer_schema('{"type":"record","name":"x.Nope","fields":[]}')
    with pytest.raises(SchemaError):
        register_writer_schema("{not json")
