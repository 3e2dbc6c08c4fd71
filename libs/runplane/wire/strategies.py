"""Hypothesis strategies for every wire record, derived from the records' Avro schemas.

For tests only: importing this module needs ``hypothesis`` (the ``dev`` extra). Other parts
can fuzz their handlers with ``records(JournalRecord)`` or ``any_record()``.

The schema says what each field holds; ``FIELD_OVERRIDES`` supplies values for fields whose
validators a random string would almost never satisfy (hex digests, admission keys,
tenants, sorted provenance). Any remaining invalid combination (e.g. ResultEntry ok with an
error) is discarded with ``assume``, so every drawn record passed its own validation.
"""

from __future__ import annotations

import enum
import json
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from runplane.errors import WireError
from runplane.wire import Record, record_types
from runplane.wire._records import ENUM_TYPES

HEX64 = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
TENANT = st.text(
    alphabet=st.characters(categories=("L", "N"), include_characters="_-"), min_size=1, max_size=20
)
ADMISSION_KEY = st.text(min_size=1, max_size=64)

FIELD_OVERRIDES: dict[tuple[str, str], st.SearchStrategy[Any]] = {
    ("JournalRecord", "hash"): HEX64,
    ("JournalRecord", "prev_hash"): HEX64,
    ("JournalRecord", "request_witness"): st.none() | HEX64,
    ("JournalRecord", "body_digest"): st.none() | HEX64,
    ("JournalRecord", "seq"): st.integers(0, 2**63 - 1),
    ("JournalRecord", "era"): st.integers(0, 2**31 - 1),
    ("ResultEntry", "request_witness"): HEX64,
    ("ResultEntry", "body_digest"): HEX64,
    ("ResultEntry", "call_seq"): st.integers(0, 2**63 - 1),
    ("AdmissionRequest", "admission_key"): ADMISSION_KEY,
    ("AdmissionRequest", "tenant"): TENANT,
    ("AdmissionRequest", "capability"): st.text(min_size=1),
    ("AdmissionClaim", "admission_key"): ADMISSION_KEY,
    ("AdmissionClaim", "tenant"): TENANT,
    ("StartRun", "tenant"): TENANT,
    ("SessionSnapshot", "tenant"): TENANT,
    ("OpenTask", "tenant"): st.none() | TENANT,
    ("RegisterDeadline", "tenant"): st.none() | TENANT,
    ("RunStatusUpdate", "tenant"): st.none() | TENANT,
    ("AdmissionReply", "tenant"): st.none() | TENANT,
    ("Schedule", "tenant"): TENANT,
    ("ScheduleFired", "tenant"): TENANT,
    ("QueueEntry", "tenant"): TENANT,
    ("Label", "provenance"): st.lists(st.text(max_size=12), unique=True, max_size=4).map(sorted),
}

_ENUMS = {e.__name__: e for e in ENUM_TYPES}
_PRIMITIVE: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "int": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(allow_nan=False, allow_infinity=False, width=32),
    "double": st.floats(allow_nan=False, allow_infinity=False),
    "bytes": st.binary(max_size=32),
    "string": st.text(max_size=24),
}


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _for_type(node: Any) -> st.SearchStrategy[Any]:
    if isinstance(node, str):
        if node in _PRIMITIVE:
            return _PRIMITIVE[node]
        short = _short(node)
        if short in _ENUMS:
            return st.sampled_from(list[enum.StrEnum](_ENUMS[short]))
        return st.deferred(lambda: records(record_types()[f"runplane.v1.{short}"]))
    if isinstance(node, list):
        return st.one_of(*[_for_type(b) for b in node])
    kind = node["type"]
    if kind in ("record", "enum"):
        return _for_type(node["name"])
    if kind == "array":
        return st.lists(_for_type(node["items"]), max_size=3)
    if kind == "map":
        return st.dictionaries(st.text(max_size=8), _for_type(node["values"]), max_size=3)
    return _for_type(kind)


def records(cls: type[Record]) -> st.SearchStrategy[Record]:
    """Valid instances of ``cls``, every field drawn from its schema type."""
    schema = json.loads(cls.avro_schema_json())
    fields = {
        f["name"]: FIELD_OVERRIDES.get((cls.__name__, f["name"]), _for_type(f["type"]))
        for f in schema["fields"]
    }

    @st.composite
    def build(draw: st.DrawFn) -> Record:
        kwargs = {name: draw(strategy) for name, strategy in fields.items()}
        try:
            return cls(**kwargs)
        except WireError:
            assume(False)
            raise  # unreachable: assume(False) aborts the example

    return build()


def any_record() -> st.SearchStrategy[Record]:
    return st.sampled_from(sorted(record_types().values(), key=lambda c: c.__name__)).flatmap(
        records
    )
