"""Avro single-object encoding of wire records (the default wire format).

Layout (Avro specification, "Single-object encoding")::

    C3 01 | 8-byte CRC-64-AVRO fingerprint of the writer schema's parsing canonical form
          |   (little-endian) | Avro binary body

The fingerprint identifies the writer schema, hence the record type: today's schema of each
record, any earlier one runplane has written (``schemas/history/``, embedded as
``_history.EARLIER_SCHEMAS`` by the codegen: parsed only when a record names one), or one a
caller announced with ``register_writer_schema`` (a newer writer's). ``decode`` raises only
``WireError`` — for truncated input, an unknown fingerprint, a body that is not valid Avro
for its schema, trailing bytes, or a record that fails validation — with a message a
dead-letter can carry.

Schemas are parsed once, lazily, on first use.

Writing is on the executor's hot path (every journal record, result and snapshot), so each
record class gets a writer compiled from its schema on first use (``_compile_writer``): Avro
binary written straight from the record's attributes, the same bytes fastavro writes for a
valid record (``tests/unit/test_wire_writer.py`` compares them on random records of every
type; the golden-bytes test pins them). A record the compiled writer cannot write (one
mutated past validation) is handed to fastavro, whose error is reported as before.
"""

from __future__ import annotations

import io
import json
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import fingerprint, parse_schema, to_parsing_canonical_form

from runplane.errors import SchemaError, WireError
from runplane.wire._base import Record, from_dict, generated_records, to_dict
from runplane.wire._codecs import _compile, _Source
from runplane.wire._history import EARLIER_SCHEMAS

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
    # The same schema parsed with fastavro's "already parsed" mark: fastavro re-parses a
    # schema without it on every read and write, which was most of their cost.
    hinted: Any


_COMPILED: dict[type[Record], _Compiled] = {}
_BODY_WRITERS: dict[type[Record], Callable[[Record], bytes]] = {}
_WRITERS: dict[bytes, _Writer] = {}
_WRITERS_LOCK = threading.Lock()


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
        # wire order, so bytes.fromhex is the wire form; do not repack it.
        fp = bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))
        c = _Compiled(parsed, fp, parse_schema(json.loads(cls.avro_schema_json())))
        _COMPILED[cls] = c
    return c


def record_types() -> Mapping[str, type[Record]]:
    """Every generated record class by Avro full name."""
    return generated_records()


def _writers() -> dict[bytes, _Writer]:
    if not _WRITERS:
        # Built aside and added in one step: a thread that decodes while another builds must
        # never see a part of the table (and call a known record's fingerprint unknown).
        with _WRITERS_LOCK:
            if not _WRITERS:
                built: dict[bytes, _Writer] = {}
                for cls in record_types().values():
                    c = _compiled(cls)
                    built.setdefault(c.fingerprint, _Writer(c.parsed, cls))
                _WRITERS.update(built)
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
    writer = _BODY_WRITERS.get(type(record))
    if writer is None:
        writer = _compile_writer(type(record))
    try:
        return writer(record)
    except Exception:
        return _fastavro_body(record)


def _fastavro_body(record: Record) -> bytes:
    buf = io.BytesIO()
    try:
        schemaless_writer(buf, _compiled(type(record)).hinted, to_dict(record))
    except (ValueError, TypeError, OverflowError) as exc:
        # Construction already validated the record; this guards a record mutated through
        # object.__setattr__ or a schema/class mismatch.
        raise SchemaError(f"{type(record).__name__} does not fit its schema: {exc}") from exc
    return buf.getvalue()


def read_body(body: bytes, writer: Any, cls: type[Record]) -> Record:
    """Read an Avro body written with ``writer`` into ``cls`` (schema resolution applies)."""
    buf = io.BytesIO(body)
    try:
        compiled = _compiled(cls)
        if writer is compiled.parsed:
            data = schemaless_reader(buf, compiled.hinted, None)
        else:
            data = schemaless_reader(buf, writer, compiled.parsed)
    except Exception as exc:
        # fastavro signals bad input with EOFError, IndexError, UnicodeDecodeError,
        # ValueError, SchemaResolutionError, ... : every one means "undecodable".
        raise WireError(
            f"{cls.__name__}: body is not valid Avro ({type(exc).__name__}: {exc})"
        ) from exc
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
        writer = _earlier_writer(fp)
    return read_body(data[HEADER_SIZE:], writer.schema, writer.cls)


def writer_record_name(data: bytes) -> str | None:
    """The full name of the record type single-object ``data`` names by its fingerprint, when
    it is one runplane wrote (today's or an earlier schema); None for anything else.

    For answering a record that does not decode: what its sender meant it to be.
    """
    if len(data) < HEADER_SIZE or data[:2] != MAGIC:
        return None
    fp = data[2:HEADER_SIZE]
    writer = _writers().get(fp)
    if writer is not None:
        return writer.cls.avro_name
    text = EARLIER_SCHEMAS.get(fp.hex())
    if text is None:
        return None
    schema = json.loads(text)
    return f"{schema['namespace']}.{schema['name']}"


def _earlier_writer(fp: bytes) -> _Writer:
    """The writer of a fingerprint runplane wrote before today's schemas (parsed once)."""
    text = EARLIER_SCHEMAS.get(fp.hex())
    if text is None:
        raise WireError(f"unknown schema fingerprint {fp.hex()}")
    try:
        register_writer_schema(text)
    except SchemaError as exc:  # a record type since removed: nothing reads it any more
        raise WireError(f"schema fingerprint {fp.hex()}: {exc}") from exc
    return _writers()[fp]


# ---- the compiled writer ---------------------------------------------------------------------
#
# Avro binary encoding (specification, "Binary Encoding"), as fastavro writes it: int and long
# as zig-zag varints; boolean one byte; double 8 bytes little-endian; string and bytes a long
# length then the bytes (UTF-8 for strings); null nothing; a union the zig-zag index of its
# branch then the value; an enum the zig-zag index of its symbol; an array or a map one block
# (its count, then the items; map items are key string then value) and a 0, or just the 0 when
# empty; a record its fields in schema order.

_pack_double = struct.Struct("<d").pack


def _zigzag_of(n: int) -> bytes:
    # Timestamps dominate the large values, and many records of a batch share one
    # millisecond: remember the last few hundred (cleared, not evicted, when full).
    if n.__class__ is not int:  # an int subclass, or garbage past validation: no caching
        return _varint_of(n)
    cached = _LARGE.get(n)
    if cached is not None:
        return cached
    if len(_LARGE) >= 512:
        _LARGE.clear()
    _LARGE[n] = encoded = _varint_of(n)
    return encoded


_LARGE: dict[int, bytes] = {}


def _varint_of(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# Lengths (64-character digests above all) and small numbers come from this table.
_TABLE_SIZE = 1024
_VARINTS = [_varint_of(n) for n in range(_TABLE_SIZE)]


def _zigzag(n: int) -> bytes:
    """The zig-zag varint of ``n`` (Avro int and long)."""
    if 0 <= n < _TABLE_SIZE:
        return _VARINTS[n]
    return _zigzag_of(n)


class _Unsupported(Exception):
    """A schema construct the compiled writer does not write (fastavro writes it instead)."""


def _compile_writer(cls: type[Record]) -> Callable[[Record], bytes]:
    schema = json.loads(cls.avro_schema_json())
    src = _Source()
    lines = ["def write(r):", "    b = bytearray()"]
    try:
        _write_record(schema, "r", lines, "    ", src, {}, schema.get("namespace", ""))
    except _Unsupported:
        writer: Callable[[Record], bytes] = _fastavro_body
    else:
        lines.append("    return bytes(b)")
        writer = _compile("\n".join(lines), "write", src)
    _BODY_WRITERS[cls] = writer
    return writer


def _full(name: str, namespace: str) -> str:
    return name if "." in name else f"{namespace}.{name}"


def _write_record(
    node: Any, v: str, lines: list[str], ind: str, src: _Source, named: dict[str, Any], ns: str
) -> None:
    for f in node["fields"]:
        x = src.fresh()
        lines.append(f"{ind}{x} = {v}.{f['name']}")
        _write(f["type"], x, lines, ind, src, named, ns)


def _write(
    node: Any, v: str, lines: list[str], ind: str, src: _Source, named: dict[str, Any], ns: str
) -> None:
    """Append to ``lines`` the source that writes value ``v`` of schema ``node`` into ``b``."""
    if isinstance(node, str):
        _write_named(node, v, lines, ind, src, named, ns)
    elif isinstance(node, list):
        _write_union(node, v, lines, ind, src, named, ns)
    elif node["type"] in ("record", "enum"):
        _write_record_or_enum(node, v, lines, ind, src, named, ns)
    elif node["type"] in ("array", "map"):
        _write_container(node, v, lines, ind, src, named, ns)
    elif isinstance(node["type"], str) and "logicalType" not in node:
        _write(node["type"], v, lines, ind, src, named, ns)
    else:
        raise _Unsupported(node["type"])


def _varint(expr: str, ind: str, src: _Source) -> list[str]:
    # Most ints and lengths are small: taken from the table without a call.
    n = src.fresh()
    return [
        f"{ind}{n} = {expr}",
        f"{ind}if 0 <= {n} < {_TABLE_SIZE}:",
        f"{ind}    b += {src.ref(_VARINTS)}[{n}]",
        f"{ind}else:",
        f"{ind}    b += {src.ref(_zigzag_of)}({n})",
    ]


def _write_named(
    node: str, v: str, lines: list[str], ind: str, src: _Source, named: dict[str, Any], ns: str
) -> None:
    """A primitive, or a named type defined earlier in the schema."""
    if node in ("int", "long"):
        lines += _varint(v, ind, src)
    elif node == "string":
        e = src.fresh()
        lines += [
            f"{ind}{e} = {v}.encode('utf-8')",
            *_varint(f"len({e})", ind, src),
            f"{ind}b += {e}",
        ]
    elif node == "bytes":
        lines += [*_varint(f"len({v})", ind, src), f"{ind}b += {v}"]
    elif node == "boolean":
        lines.append(f"{ind}b.append(1 if {v} else 0)")
    elif node == "double":
        lines.append(f"{ind}b += {src.ref(_pack_double)}({v})")
    elif node == "null":
        pass
    elif _full(node, ns) in named:
        full = _full(node, ns)
        _write(named[full], v, lines, ind, src, named, full.rsplit(".", 1)[0])
    else:
        raise _Unsupported(node)  # "float", fixed, unknown names: fastavro's job


def _write_union(
    node: list[Any],
    v: str,
    lines: list[str],
    ind: str,
    src: _Source,
    named: dict[str, Any],
    ns: str,
) -> None:
    if len(node) != 2 or "null" not in node:
        raise _Unsupported("only [null, X] unions")
    null_at = node.index("null")
    other = node[1 - null_at]
    lines.append(f"{ind}if {v} is None:")
    lines.append(f"{ind}    b += {_zigzag(null_at)!r}")
    lines.append(f"{ind}else:")
    lines.append(f"{ind}    b += {_zigzag(1 - null_at)!r}")
    _write(other, v, lines, ind + "    ", src, named, ns)


def _write_record_or_enum(
    node: Any, v: str, lines: list[str], ind: str, src: _Source, named: dict[str, Any], ns: str
) -> None:
    full = _full(node["name"], node.get("namespace", ns))
    named[full] = node
    if node["type"] == "enum":
        table = {sym: _zigzag(i) for i, sym in enumerate(node["symbols"])}
        lines.append(f"{ind}b += {src.ref(table)}[{v}._value_]")
    else:
        _write_record(node, v, lines, ind, src, named, full.rsplit(".", 1)[0])


def _write_container(
    node: Any, v: str, lines: list[str], ind: str, src: _Source, named: dict[str, Any], ns: str
) -> None:
    x = src.fresh()
    lines.append(f"{ind}if {v}:")
    lines.append(
        f"{ind}    b += {src.ref(_zigzag)}(len({v}))"
    )  # a block count: rare, nothing to save
    if node["type"] == "array":
        lines.append(f"{ind}    for {x} in {v}:")
        _write(node["items"], x, lines, ind + "        ", src, named, ns)
    else:
        k = src.fresh()
        lines.append(f"{ind}    for {k}, {x} in {v}.items():")
        _write("string", k, lines, ind + "        ", src, named, ns)
        _write(node["values"], x, lines, ind + "        ", src, named, ns)
    lines.append(f"{ind}b.append(0)")
