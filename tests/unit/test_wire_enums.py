"""Every enum names a fallback: a symbol a newer writer added resolves to it (Avro enum default)."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings

from runplane.wire import (
    AuditRecord,
    JournalKind,
    JournalRecord,
    Record,
    RunStatus,
    RunStatusUpdate,
    Verdict,
    codegen,
    decode,
    parsed_schema,
    register_writer_schema,
    to_dict,
)
from runplane.wire._records import ENUM_TYPES, SCHEMAS
from runplane.wire.strategies import records

pytestmark = pytest.mark.unit


def _enums_as_decoders_read_them() -> dict[str, Any]:
    """Each enum's schema as embedded in today's records (what the decoders resolve against)."""
    out: dict[str, Any] = {}
    for name, text in SCHEMAS.items():
        for t in codegen.collect_named({name: json.loads(text)}, [name]).values():
            if t.is_enum:
                out.setdefault(t.short, dict(t.schema))
    return out


ENUMS = _enums_as_decoders_read_them()


def test_every_enum_an_outside_reader_may_meet_has_a_default_among_its_symbols() -> None:
    assert set(ENUMS) == {e.__name__ for e in ENUM_TYPES}
    for name, schema in ENUMS.items():
        assert "default" in schema, f"{name} declares no default"
        assert schema["default"] in schema["symbols"], name


def _newer(schema: dict[str, Any], symbol: str) -> dict[str, Any]:
    return {**schema, "symbols": [*schema["symbols"], symbol]}


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_a_symbol_added_by_a_newer_writer_reads_as_the_default(name: str) -> None:
    today = ENUMS[name]

    def probe(enum_schema: dict[str, Any]) -> Any:
        return fastavro.parse_schema(
            {"type": "record", "name": "Probe", "fields": [{"name": "e", "type": enum_schema}]}
        )

    buf = io.BytesIO()
    fastavro.schemaless_writer(
        buf, probe(_newer(today, "FROM_THE_FUTURE")), {"e": "FROM_THE_FUTURE"}
    )
    buf.seek(0)
    read = fastavro.schemaless_reader(buf, probe(_newer(today, "FROM_THE_FUTURE")), probe(today))
    assert read == {"e": today["default"]}


def _single_object(writer: dict[str, Any], plain: dict[str, Any]) -> bytes:
    parsed = fastavro.parse_schema(writer)
    fp = fastavro.schema.fingerprint(
        fastavro.schema.to_parsing_canonical_form(parsed), "CRC-64-AVRO"
    )
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, plain)
    return b"\xc3\x01" + bytes.fromhex(fp) + buf.getvalue()


def _with_added_symbol(record_schema: Any, enum_name: str, symbol: str) -> Any:
    """A copy of ``record_schema`` whose (inline) enum ``enum_name`` gained ``symbol``."""
    if isinstance(record_schema, list):
        return [_with_added_symbol(b, enum_name, symbol) for b in record_schema]
    if not isinstance(record_schema, dict):
        return record_schema
    if record_schema.get("type") == "enum" and record_schema["name"] == enum_name:
        return _newer(record_schema, symbol)
    out = dict(record_schema)
    if "fields" in out:
        out["fields"] = [
            {**f, "type": _with_added_symbol(f["type"], enum_name, symbol)} for f in out["fields"]
        ]
    for key in ("items", "values"):
        if key in out:
            out[key] = _with_added_symbol(out[key], enum_name, symbol)
    return out


@settings(max_examples=10, deadline=None)
@given(audit=records(AuditRecord))
def test_an_audit_record_with_a_newer_kind_and_verdict_decodes_to_the_fallbacks(
    audit: Record,
) -> None:
    # What an outside auditor holding today's schema meets when a newer journal service
    # publishes a kind and a verdict it does not know: the record reads, as OTHER / BROKEN.
    writer = json.loads(AuditRecord.avro_schema_json())
    writer = _with_added_symbol(writer, "JournalKind", "RUN_TELEPORTED")
    writer = _with_added_symbol(writer, "Verdict", "SIGNATURE_UNCHECKED")
    plain = to_dict(audit)
    plain.update(kind="RUN_TELEPORTED", verdict="SIGNATURE_UNCHECKED")
    data = _single_object(writer, plain)
    # The reader's own fastavro resolution, as an outside Python consumer does it ...
    parsed = fastavro.parse_schema(writer)
    body = io.BytesIO(data[10:])
    read = fastavro.schemaless_reader(body, parsed, parsed_schema(AuditRecord))
    assert (read["kind"], read["verdict"]) == ("OTHER", "BROKEN")
    # ... and runplane's decoder, once told the newer writer schema.
    register_writer_schema(json.dumps(writer))
    record = decode(data)
    assert isinstance(record, AuditRecord)
    assert (record.kind, record.verdict) == (JournalKind.OTHER, Verdict.BROKEN)


@settings(max_examples=10, deadline=None)
@given(update=records(RunStatusUpdate))
def test_a_status_update_with_a_newer_status_reads_as_running(update: Record) -> None:
    # RunStatus gains symbols (CANCELLED, ...): an admission that does not know one yet still
    # reads the update instead of dead-lettering it.
    writer = _with_added_symbol(
        json.loads(RunStatusUpdate.avro_schema_json()), "RunStatus", "ON_HOLD"
    )
    plain = to_dict(update)
    plain["status"] = "ON_HOLD"
    register_writer_schema(json.dumps(writer))
    record = decode(_single_object(writer, plain))
    assert isinstance(record, RunStatusUpdate)
    assert record.status is RunStatus.RUNNING


def test_other_is_a_journal_kind_no_writer_uses() -> None:
    # OTHER exists to be read, never written: the last symbol, so no ordinal moved.
    assert list(JournalKind)[-1] is JournalKind.OTHER
    schema = json.loads(JournalRecord.avro_schema_json())
    (kind,) = [f for f in schema["fields"] if f["name"] == "kind"]
    assert kind["type"]["default"] == "OTHER"
