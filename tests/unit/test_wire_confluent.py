"""The Confluent wire format (``00`` + schema id + Avro body) with TopicRecordNameStrategy.

These tests use confluent-kafka's in-memory registry (``SchemaRegistryClient.new_client``
with a ``mock://`` URL). That is a mock of the schema registry, which is allowed here: the
registry is outside the stack runplane runs locally, and the framing, subject naming and
schema resolution under test are ours. The Kafka side is not involved at all.
"""

from __future__ import annotations

import io
import json
import struct
import uuid

import fastavro
import pytest
from hypothesis import given, settings

from runplane import Settings
from runplane.errors import WireError
from runplane.wire import (
    ZERO_HASH,
    JournalKind,
    JournalRecord,
    Label,
    Record,
    Sensitivity,
    Signal,
    Trust,
    Wake,
    encode,
    serde_for,
    to_dict,
)
from runplane.wire._confluent import ConfluentSerde, Schema, subject_for
from runplane.wire.strategies import any_record

pytestmark = pytest.mark.unit


def fresh() -> ConfluentSerde:
    # The mock's state is per client instance; a unique URL keeps tests independent.
    serde = serde_for(
        Settings(schema_registry_url=f"mock://{uuid.uuid4().hex}", topic_prefix="rp.")
    )
    assert isinstance(serde, ConfluentSerde)
    return serde


def test_framing_and_subject() -> None:
    serde = fresh()
    record = Wake(session_id="s", reason="r", sent_ms=7)
    data = serde.encode("runs.inbox", record)
    assert data[0] == 0
    (sid,) = struct.unpack(">I", data[1:5])
    assert sid == serde.schema_id("runs.inbox", Wake)
    # Same Avro body as the single-object format; only the header differs.
    assert data[5:] == encode(record)[10:]
    assert "rp.runs.inbox-runplane.v1.Wake" in serde._client.get_subjects()
    assert serde.decode("rp.runs.inbox", data) == record


def test_two_record_types_on_one_topic_get_two_subjects() -> None:
    serde = fresh()
    a = serde.encode("runs.inbox", Wake(session_id="s", reason="r", sent_ms=1))
    b = serde.encode("runs.inbox", Signal(session_id="s", name="n", payload_json="{}", sent_ms=1))
    assert a[1:5] != b[1:5]
    assert subject_for("rp.runs.inbox", Signal) in serde._client.get_subjects()


@pytest.fixture(scope="module")
def shared() -> ConfluentSerde:
    return fresh()


@settings(max_examples=100, deadline=None)
@given(record=any_record())
def test_round_trip_every_record_on_a_topic_that_carries_it(
    shared: ConfluentSerde, record: Record
) -> None:
    from runplane.wire import TOPIC_RECORDS

    topics = [t for t, classes in TOPIC_RECORDS.items() if isinstance(record, classes)]
    if not topics:
        return  # nested-only types (Label, Cost, ...) are never a message value
    assert shared.decode(topics[0], shared.encode(topics[0], record)) == record


def test_wrong_topic_is_refused_both_ways() -> None:
    serde = fresh()
    data = serde.encode("runs.inbox", Wake(session_id="s", reason="r", sent_ms=1))
    with pytest.raises(WireError, match="not allowed on journal"):
        serde.decode("rp.journal", data)
    with pytest.raises(WireError, match="not allowed on journal"):
        serde.encode("journal", Wake(session_id="s", reason="r", sent_ms=1))


def test_bad_input_is_a_wire_error() -> None:
    serde = fresh()
    data = serde.encode("runs.inbox", Wake(session_id="s", reason="r", sent_ms=1))
    for bad in (
        b"",
        data[:4],
        b"\x01" + data[1:],
        data[:-1],
        data + b"\x00",
        b"\x00" + struct.pack(">I", 4242) + data[5:],
    ):
        with pytest.raises(WireError):
            serde.decode("runs.inbox", bad)


def test_a_registered_foreign_schema_is_a_wire_error() -> None:
    serde = fresh()
    sid = serde._client.register_schema(
        "rp.runs.inbox-x.Other", Schema('{"type":"record","name":"x.Other","fields":[]}', "AVRO")
    )
    with pytest.raises(WireError, match="no runplane record"):
        serde.decode("runs.inbox", b"\x00" + struct.pack(">I", sid))


def test_an_older_writer_schema_resolves_against_ours() -> None:
    # An emitter still on the schema before JournalRecord grew `attrs` (say): registry id
    # points at its schema, and the reader fills `attrs` from our default.
    serde = fresh()
    schema = json.loads(JournalRecord.avro_schema_json())
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "attrs"]
    old = json.dumps(schema)
    sid = serde._client.register_schema("rp.journal-runplane.v1.JournalRecord", Schema(old, "AVRO"))
    record = JournalRecord(
        session_id="s",
        seq=0,
        era=0,
        kind=JournalKind.RUN_ADMITTED,
        stamp_ms=1,
        label=Label(trust=Trust.TRUSTED, sensitivity=Sensitivity.PUBLIC, provenance=()),
        prev_hash=ZERO_HASH,
        hash="c" * 64,
    )
    plain = {k: v for k, v in to_dict(record).items() if k != "attrs"}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(old)), plain)
    data = b"\x00" + struct.pack(">I", sid) + buf.getvalue()
    assert serde.decode("journal", data) == record


def test_an_unreachable_registry_is_retryable_not_a_bad_message() -> None:
    # Nothing listens on port 9 of loopback: connection refused at once. The message is not
    # at fault, so this must not become a WireError (which would dead-letter it).
    from runplane.errors import RetryableError
    from runplane.wire._confluent import SchemaRegistryClient

    serde = ConfluentSerde(
        SchemaRegistryClient.new_client({"url": "http://127.0.0.1:9", "max.retries": 0})
    )
    with pytest.raises(RetryableError) as encoding:
        serde.encode("runs.inbox", Wake(session_id="s", reason="r", sent_ms=1))
    assert not isinstance(encoding.value, WireError)
    with pytest.raises(RetryableError):
        serde.decode("runs.inbox", b"\x00\x00\x00\x00\x07")
