"""A tenant is a type: ``TenantId`` is valid by construction, and every wire record that carries
a tenant builds and decodes it through ``TenantId`` — a bad tenant from the wire is a
``WireError`` (a dead letter with the reason), never a string that slips into keys and paths."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from fastavro import schemaless_writer
from hypothesis import given, settings
from hypothesis import strategies as st

from runplane.errors import WireError
from runplane.wire import (
    TenantId,
    decode,
    encode,
    from_dict,
    parsed_schema,
    record_types,
    schema_fingerprint,
    tenant_problem,
    to_dict,
)
from runplane.wire.strategies import records

BAD = ["", "a/b", "a:b", "a.b", "a b", "a\tb", "a\x00b", "a\u200bb"]
CARRIERS = {
    cls
    for cls in record_types().values()
    if any(f["name"] == "tenant" for f in json.loads(cls.avro_schema_json())["fields"])
}


def test_the_records_that_carry_a_tenant_are_the_ones_we_know() -> None:
    # A new record with a tenant field must be added to VALIDATORS (and to this list).
    assert {c.__name__ for c in CARRIERS} == {
        "AdmissionClaim",
        "AdmissionReply",
        "AdmissionRequest",
        "OpenTask",
        "QueueEntry",
        "RegisterDeadline",
        "RunStatusUpdate",
        "Schedule",
        "ScheduleFired",
        "SessionSnapshot",
        "StartRun",
    }


@given(st.text(max_size=12))
def test_tenant_id_accepts_exactly_what_the_rule_accepts(name: str) -> None:
    if tenant_problem(name) is None:
        tenant = TenantId(name)
        assert tenant == name and type(tenant) is TenantId and TenantId(tenant) is tenant
    else:
        with pytest.raises(WireError, match="tenant"):
            TenantId(name)


def test_a_tenant_id_is_not_built_from_a_non_string() -> None:
    with pytest.raises(WireError, match="must be a string"):
        TenantId(7)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cls", sorted(CARRIERS, key=lambda c: c.__name__), ids=lambda c: c.__name__
)
@settings(max_examples=30)
@given(data=st.data())
def test_every_carrier_holds_a_tenant_id_built_and_decoded(cls: type[Any], data: Any) -> None:
    record = data.draw(records(cls))
    if record.tenant is not None:
        assert type(record.tenant) is TenantId
    again = decode(encode(record))
    assert again == record
    if again.tenant is not None:
        assert type(again.tenant) is TenantId
        assert type(from_dict(cls, to_dict(record)).tenant) is TenantId


@pytest.mark.parametrize(
    "cls", sorted(CARRIERS, key=lambda c: c.__name__), ids=lambda c: c.__name__
)
@settings(max_examples=30)
@given(data=st.data(), bad=st.sampled_from(BAD))
def test_every_carrier_refuses_a_bad_tenant_built_or_decoded(
    cls: type[Any], data: Any, bad: str
) -> None:
    good = data.draw(records(cls))
    plain = {**to_dict(good), "tenant": bad}
    with pytest.raises(WireError, match="tenant"):
        from_dict(cls, plain)
    # On the wire: bytes of a writer that did not check (the schema says only "string").
    body = io.BytesIO()
    schemaless_writer(body, parsed_schema(cls), plain)
    framed = encode(good)[: -len(_body(good))] + body.getvalue()
    assert framed[:10] == encode(good)[:10] and schema_fingerprint(cls) in framed
    with pytest.raises(WireError, match="tenant"):
        decode(framed)


def _body(record: Any) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parsed_schema(type(record)), to_dict(record))
    return out.getvalue()
