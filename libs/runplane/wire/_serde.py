"""Avro single-object encoding of wire records (the default wire format).

Layout (Avro specification, "Single-object encoding")::

    C3 01 | 8-byte CRC-64-AVRO fingerprint of the writer schema's parsing canonical form
          |   (little-endian) | Avro binary body

The fingerprint identifies the writer schema, hence the record type. ``decode`` raises only
``WireError`` — for truncated input, an unknown fingerprint, a body that is not valid Avro
for its schema, trailing bytes, or a record that fails validation — with a message a
dead-letter can carry.

Schemas are parsed once, lazily, on first use.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

from runplane.errors import SchemaError, WireError
from runplane.wire._base import Record, from_dict, to_dict

MAGIC = b"\xc3\x01"
HEADER_SIZE = len(MAGIC) + 8


@dataclass(frozen=True, slots=True)
class _Writer:
    """A schema some producer may write with, and the class it is read into."""

    schema: Any  # fastavro parsed schema
    cls: type[Record]


@dataclass(frozen=True, slots=True)
class _Compiled:
    parsed: Any
    fingerprint: bytes


_COMPILED: dict[type[Record], _Compiled] = {}
_WRITERS: dict[bytes, _Writer] = {}
_by_name: dict[str, type[Record]] = {}


def parsed_schema(cls: type[Record]) -> Any:
    """The fastavro-parsed schema of ``cls`` (cached)."""
    return _compiled(cls).parsed


def schema_fingerprint(cls: type[Record]) -> bytes:
    """The 8-byte CRC-64-AVRO fingerprint of ``cls``'s schema, in wire byte order."""
    return _compiled(cls).fingerprint


def _compiled(cls: type[Record]) -> _Compiled:
    c = _COMPILED.get(cls)
    if c is None:
        parsed = parse_schema(json.loads(cls.avro_schema_json()), _write_hint=False)
        # fastavro returns the Rabin fingerprint as hex already in the spec's little-endian
        # wire order (KAFKA-NOTES), so bytes.fromhex is the wire form; do not repack it.
        fp = bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))
        c = _Compiled(parsed, fp)
        _COMPILED[cls] = c
    return c


def record_types() -> Mapping[str, type[Record]]:
    """Every generated record class by Avro full name."""
    if not _by_name:
        from runplane.wire._records import RECORD_TYPES

        _by_name.update({c.avro_name: c for c in RECORD_TYPES})
    return _by_name


def _writers() -> dict[bytes, _Writer]:
    if not _WRITERS:
        for cls in record_types().values():
            c = _compiled(cls)
            _WRITERS.setdefault(c.fingerprint, _Writer(c.parsed, cls))
    return _WRITERS


def register_writer_schema(schema_json: str) -> bytes:
    """Accept records written with an older (or newer) version of one of our schemas.

    The schema's full name picks the class it is read into; Avro schema resolution fills
    fields the writer lacked from the reader's defaults. Returns the writer's fingerprint.
    Raises ``SchemaError`` when the schema does not parse or names no known record.
    """
    try:
        parsed = parse_schema(json.loads(schema_json), _write_hint=False)
    except Exception as exc:  # json and fastavro raise many types; all mean "bad schema"
        raise SchemaError(f"writer schema does not parse: {exc}") from exc
    name = parsed.get("name") if isinstance(parsed, dict) else None
    cls = record_types().get(str(name))
    if cls is None:
        raise SchemaError(f"writer schema {name!r} names no known record type")
    fp = bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))
    _writers()[fp] = _Writer(parsed, cls)
    return fp


def write_body(record: Record) -> bytes:
    """The Avro binary body of ``record`` (no framing)."""
    buf = io.BytesIO()
    try:
        schemaless_writer(buf, parsed_schema(type(record)), to_dict(record))
    except (ValueError, TypeError, OverflowError) as exc:
        # Construction already validated the record; this guards a record mutated through
        # object.__setattr__ or a schema/class mismatch.
        raise SchemaError(f"{type(record).__name__} does not fit its schema: {exc}") from exc
    return buf.getvalue()


def read_body(body: bytes, writer: Any, cls: type[Record]) -> Record:
    """Read an Avro body written with ``writer`` into ``cls`` (schema resolution applies)."""
    buf = io.BytesIO(body)
    try:
        reader = parsed_schema(cls)
        data = schemaless_reader(buf, writer, None if writer is reader else reader)
    except Exception as exc:
        # fastavro signals bad input with EOFError, IndexError, UnicodeDecodeError,
        # ValueError, SchemaResolutionError, ... : every one means "undecodable".
        raise WireError(f"{cls.__name__}: body is not valid Avro ({type(exc).__name__}: {exc})") from exc
    if buf.tell() != len(body):
        raise WireError(f"{cls.__name__}: {len(body) - buf.tell()} trailing bytes after the record")
    if not isinstance(data, dict):
        raise WireError(f"{cls.__name__}: body did not decode to a record")
    try:
        return from_dict(cls, data)
    except WireError:
        raise
    except Exception as exc:  # a validator tripping over a value it did not expect
        raise WireError(f"{cls.__name__}: invalid record ({type(exc).__name__}: {exc})") from exc


def encode(record: Record) -> bytes:
    """``record`` in Avro single-object encoding."""
    if not isinstance(record, Record):
        raise WireError(f"cannot encode {type(record).__name__}: not a wire record")
    return MAGIC + schema_fingerprint(type(record)) + write_body(record)


def decode(data: bytes) -> Record:
    """The record in ``data`` (single-object encoding); raises only ``WireError``."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise WireError(f"cannot decode {type(data).__name__}: expected bytes")
    data = bytes(data)
    if len(data) < HEADER_SIZE:
        raise WireError(f"truncated: {len(data)} bytes, the header alone is {HEADER_SIZE}")
    if data[:2] != MAGIC:
        raise WireError(f"not Avro single-object encoding: starts with {data[:2].hex()}")
    fp = data[2:HEADER_SIZE]
    writer = _writers().get(fp)
    if writer is None:
        raise WireError(f"unknown schema fingerprint {fp.hex()}")
    return read_body(data[HEADER_SIZE:], writer.schema, writer.cls)
