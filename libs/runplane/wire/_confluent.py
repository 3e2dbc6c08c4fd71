"""The Confluent wire format, for deployments with a schema registry.

Layout::

    00 | 4-byte big-endian schema id | Avro binary body

Subjects follow TopicRecordNameStrategy (``<topic>-<record full name>``) because several
record types share a topic. ``encode`` registers the record's schema under its subject
(cached per subject, as Confluent's serializers do with auto-registration); ``decode``
fetches the *writer* schema by id (cached per id), maps its full name to our class and reads
with the writer schema resolved against ours, so records written with an older or newer
compatible schema still decode.

Errors: bad bytes, an id the registry does not know, or a schema naming no runplane record
are ``WireError`` (dead-letter); a registry that cannot be reached or answers 5xx is
``RetryableError`` (the message is fine, try again later).
"""

from __future__ import annotations

import json
import struct
import warnings
from dataclasses import dataclass
from typing import Any

with warnings.catch_warnings():
    # authlib (imported by the registry client) warns that httpx is deprecated in favour of
    # httpx2; we pin httpx deliberately, so the warning is noise in every service's log.
    # authlib.deprecate installs an "always" filter when imported, so import it first and
    # put our "ignore" in front of it.
    import authlib.deprecate  # noqa: F401

    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError
from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

from runplane.errors import RetryableError, SchemaError, WireError
from runplane.wire._base import Record
from runplane.wire._codec import Serde
from runplane.wire._serde import (
    parsed_schema,
    read_body,
    record_types,
    schema_fingerprint,
    write_body,
)
from runplane.wire._topics import TOPIC_RECORDS, check_allowed

__all__ = ["ConfluentSerde", "Schema", "SchemaRegistryClient", "subject_for"]

MAGIC = b"\x00"
HEADER_SIZE = 5
_ID = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class _Writer:
    schema: Any  # fastavro parsed schema; our own reader schema when identical
    cls: type[Record]


def subject_for(topic: str, record_type: type[Record]) -> str:
    """TopicRecordNameStrategy: ``<topic>-<record full name>``."""
    return f"{topic}-{record_type.avro_name}"


class ConfluentSerde(Serde):
    """Confluent framing over a ``SchemaRegistryClient`` (real, or ``mock://`` in tests)."""

    def __init__(self, client: SchemaRegistryClient, *, topic_prefix: str = "") -> None:
        self._client = client
        # Logical topic names passed by callers become full Kafka topic names in subjects, so
        # one registry can serve several prefixes (environments) without clashes.
        self._prefix = topic_prefix
        self._ids: dict[str, int] = {}
        self._writers: dict[int, _Writer] = {}

    @classmethod
    def from_url(cls, url: str, *, topic_prefix: str = "") -> ConfluentSerde:
        # new_client (not the constructor) returns the in-memory mock for mock:// URLs.
        return cls(SchemaRegistryClient.new_client({"url": url}), topic_prefix=topic_prefix)

    def _topic(self, topic: str) -> str:
        return f"{self._prefix}{topic}" if topic in TOPIC_RECORDS else topic

    def schema_id(self, topic: str, record_type: type[Record]) -> int:
        """The registry id of ``record_type``'s schema under its subject for ``topic``."""
        subject = subject_for(self._topic(topic), record_type)
        sid = self._ids.get(subject)
        if sid is None:
            schema = Schema(record_type.avro_schema_json(), "AVRO")
            try:
                sid = int(self._client.register_schema(subject, schema))
            except SchemaRegistryError as exc:
                if exc.http_status_code in (409, 422):
                    raise SchemaError(f"registry refused {subject}: {exc}") from exc
                raise RetryableError(f"schema registry: {exc}", retry_after=1.0) from exc
            except Exception as exc:  # transport errors (httpx) mean the registry is away
                raise RetryableError(
                    f"schema registry unreachable: {exc}", retry_after=1.0
                ) from exc
            self._ids[subject] = sid
        return sid

    def encode(self, topic: str, record: Record) -> bytes:
        check_allowed(topic, record)
        return MAGIC + _ID.pack(self.schema_id(topic, type(record))) + write_body(record)

    def decode(self, topic: str, data: bytes) -> Record:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise WireError(f"cannot decode {type(data).__name__}: expected bytes")
        data = bytes(data)
        if len(data) < HEADER_SIZE:
            raise WireError(f"truncated: {len(data)} bytes, the header alone is {HEADER_SIZE}")
        if data[:1] != MAGIC:
            raise WireError(f"not Confluent wire format: starts with {data[:1].hex()}")
        (sid,) = _ID.unpack_from(data, 1)
        writer = self._writer(sid)
        record = read_body(data[HEADER_SIZE:], writer.schema, writer.cls)
        check_allowed(topic, record)
        return record

    def _writer(self, sid: int) -> _Writer:
        writer = self._writers.get(sid)
        if writer is None:
            writer = self._fetch(sid)
            self._writers[sid] = writer
        return writer

    def _fetch(self, sid: int) -> _Writer:
        try:
            registered = self._client.get_schema(sid)
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                raise WireError(f"schema id {sid} is unknown to the registry") from exc
            raise RetryableError(f"schema registry: {exc}", retry_after=1.0) from exc
        except Exception as exc:  # transport errors (httpx) mean the registry is away
            raise RetryableError(f"schema registry unreachable: {exc}", retry_after=1.0) from exc
        if registered.schema_type not in (None, "AVRO"):
            raise WireError(f"schema id {sid} is {registered.schema_type}, not Avro")
        try:
            parsed = parse_schema(json.loads(registered.schema_str or ""), _write_hint=False)
        except Exception as exc:  # json and fastavro raise many types; all mean "bad schema"
            raise WireError(f"schema id {sid} does not parse: {exc}") from exc
        name = parsed.get("name") if isinstance(parsed, dict) else None
        cls = record_types().get(str(name))
        if cls is None:
            raise WireError(f"schema id {sid} is {name!r}, which is no runplane record")
        fp = bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))
        # Identical to ours: read without resolution (the common, fast case).
        schema = parsed_schema(cls) if fp == schema_fingerprint(cls) else parsed
        return _Writer(schema, cls)
