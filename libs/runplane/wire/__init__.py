"""Wire types and their serialisation (``schemas/*.avsc`` are the source of truth).

    from runplane.wire import JournalRecord, encode, decode, Serde

- The record classes are generated (``python -m runplane.wire.codegen``): frozen dataclasses
  validated on construction and on decoding alike.
- ``encode`` / ``decode``: Avro single-object encoding; ``decode`` raises only ``WireError``.
- ``serde_for(settings)``: what services use; single-object by default, the
  Confluent wire format with a schema registry when ``RUNPLANE_SCHEMA_REGISTRY_URL`` is set.
- ``to_dict`` / ``from_dict``: the Avro-mapped dict (enum symbols, nulls kept), for JSON APIs
  and for canonical hashing.
- ``TOPIC_RECORDS``: logical topic → the record types allowed on it.
"""

from __future__ import annotations

from runplane.wire import _records
from runplane.wire._base import Record, canonical_encoder, from_dict, to_dict
from runplane.wire._choice import serde_for
from runplane.wire._codec import Serde, SingleObjectSerde, decode_for
from runplane.wire._records import *  # noqa: F403  (the generated types; _records.__all__)
from runplane.wire._serde import (
    decode,
    encode,
    parsed_schema,
    record_types,
    register_writer_schema,
    schema_fingerprint,
    writer_record_name,
)
from runplane.wire._topics import TOPIC_RECORDS, check_allowed, logical_topic
from runplane.wire._validate import (
    MAX_ADMISSION_KEY_BYTES,
    ZERO_HASH,
    TenantId,
    admission_key_problem,
    is_hex64,
    tenant_problem,
)

__all__ = [
    "MAX_ADMISSION_KEY_BYTES",
    "TOPIC_RECORDS",
    "ZERO_HASH",
    "Record",
    "Serde",
    "SingleObjectSerde",
    "TenantId",
    "admission_key_problem",
    "canonical_encoder",
    "check_allowed",
    "decode",
    "decode_for",
    "encode",
    "from_dict",
    "is_hex64",
    "logical_topic",
    "parsed_schema",
    "record_types",
    "register_writer_schema",
    "schema_fingerprint",
    "serde_for",
    "tenant_problem",
    "to_dict",
    "writer_record_name",
    *_records.__all__,
]
