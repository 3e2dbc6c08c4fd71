"""The example audit consumer decodes both wire formats and prints a readable line.

The Confluent case uses confluent-kafka's in-memory mock registry (``mock://``): the registry
is outside what runplane runs locally, and the framing, not the server, is under test here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from runplane.core.chain import default_label
from runplane.wire import AuditRecord, Cost, JournalKind, Verdict, encode
from runplane.wire._confluent import ConfluentSerde

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "audit_consumer.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("audit_consumer_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def audit(verdict: Verdict = Verdict.VERIFIED, **kw: object) -> AuditRecord:
    base: dict[str, object] = dict(
        session_id="r-42",
        seq=3,
        era=0,
        kind=JournalKind.EFFECT_RECORDED,
        call_seq=1,
        family="generation",
        name="model:openai/gpt-4o",
        stamp_ms=1_700_000_000_000,
        label=default_label(),
        cost=Cost(tokens_in=12, tokens_out=7, units=0.25),
        hash="ab" * 32,
        verdict=verdict,
        capability="refund",
        case_id="c-9",
        verified_ms=1,
    )
    base.update(kw)
    return AuditRecord(**base)  # type: ignore[arg-type]


def test_single_object_line() -> None:
    ex = load_example()
    d = ex.Decoder(ex.SCHEMAS, None)
    text = ex.line(d.decode(encode(audit())))
    assert text == (
        "2023-11-14T22:13:20.000Z r-42 #3 EFFECT_RECORDED call 0/1 generation model:openai/gpt-4o"
        " cost 12+7 tok 0.25u [refund/c-9] VERIFIED"
    )


def test_broken_line_names_the_seq_and_reason() -> None:
    ex = load_example()
    d = ex.Decoder(ex.SCHEMAS, None)
    rec = audit(Verdict.BROKEN, broken_at_seq=2, reason="gap: expected seq 2, got 3", cost=None)
    assert ex.line(d.decode(encode(rec))).endswith(
        "[refund/c-9] BROKEN at seq 2 (gap: expected seq 2, got 3)"
    )


def test_other_records_are_refused() -> None:
    ex = load_example()
    d = ex.Decoder(ex.SCHEMAS, None)
    with pytest.raises(ValueError, match="fingerprint"):
        d.decode(encode(default_label()))


def test_confluent_framing_through_a_registry() -> None:
    ex = load_example()
    client = SchemaRegistryClient.new_client({"url": "mock://audit-example"})
    data = ConfluentSerde(client, topic_prefix="runplane.").encode("audit", audit())
    assert data[0] == 0
    d = ex.Decoder(ex.SCHEMAS, None)
    d.registry = client
    assert ex.line(d.decode(data)).endswith("VERIFIED")


def test_records_of_every_earlier_audit_schema_are_read() -> None:
    # The example reads what an older journal service wrote: schemas/history/ by fingerprint.
    import io
    import json

    import fastavro

    from runplane.wire import to_dict
    from runplane.wire._history import EARLIER_SCHEMAS

    ex = load_example()
    d = ex.Decoder(ex.SCHEMAS, None)
    schemas = {fp: json.loads(text) for fp, text in EARLIER_SCHEMAS.items()}
    earlier = {fp: s for fp, s in schemas.items() if s["name"] == "AuditRecord"}
    assert len(earlier) >= 2
    for fp, schema in earlier.items():
        names = {f["name"] for f in schema["fields"]}
        plain = {k: v for k, v in to_dict(audit()).items() if k in names}
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), plain)
        rec = d.decode(b"\xc3\x01" + bytes.fromhex(fp) + buf.getvalue())
        assert ex.line(rec).endswith("[refund/c-9] VERIFIED"), fp
