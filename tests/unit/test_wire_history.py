"""Every writer schema runplane has written is read by today's decoder (``schemas/history/``)."""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runplane.errors import WireError
from runplane.wire import codegen, decode, record_types, schema_fingerprint, to_dict
from runplane.wire._history import EARLIER_SCHEMAS
from runplane.wire.strategies import records

pytestmark = pytest.mark.unit

HISTORY = codegen.load_history()
EARLIER = sorted(
    name
    for name in HISTORY
    if codegen._history_key(name)[1] in EARLIER_SCHEMAS
    and codegen._history_key(name)[0] in record_types()
)


def _qualify(name: str, namespace: str) -> str:
    return name if "." in name else f"{namespace}.{name}"


def _definitions(node: Any, namespace: str, out: dict[str, Any]) -> dict[str, Any]:
    """Every record and enum defined anywhere in a self-contained schema, by full name."""
    if isinstance(node, list):
        for branch in node:
            _definitions(branch, namespace, out)
    elif isinstance(node, dict):
        kind = node["type"]
        if kind in ("record", "enum"):
            full = _qualify(node["name"], node.get("namespace", namespace))
            out[full] = node
            for f in node.get("fields", ()):
                _definitions(f["type"], full.rsplit(".", 1)[0], out)
        elif kind == "array":
            _definitions(node["items"], namespace, out)
        elif kind == "map":
            _definitions(node["values"], namespace, out)
    return out


def _fit(value: Any, node: Any, names: dict[str, Any], ns: str) -> Any:
    """``value`` (today's Avro-mapped data) as the older schema ``node`` can hold it: fields it
    lacks dropped, fields only it has at their default, symbols it lacks its first one."""
    if isinstance(node, str):
        if node in codegen.PRIMITIVES:
            return value
        return _fit(value, names[_qualify(node, ns)], names, ns)
    if isinstance(node, list):
        if value is None:
            return None
        (other,) = [b for b in node if b != "null"]
        return _fit(value, other, names, ns)
    kind = node["type"]
    if kind == "record":
        inner = _qualify(node["name"], node.get("namespace", ns)).rsplit(".", 1)[0]
        out = {}
        for f in node["fields"]:
            if f["name"] in value:
                out[f["name"]] = _fit(value[f["name"]], f["type"], names, inner)
            else:
                assert "default" in f, f"{node['name']}.{f['name']}: removed without a default"
                out[f["name"]] = f["default"]
        return out
    if kind == "enum":
        return value if value in node["symbols"] else node["symbols"][0]
    if kind == "array":
        return [_fit(x, node["items"], names, ns) for x in value]
    if kind == "map":
        return {k: _fit(x, node["values"], names, ns) for k, x in value.items()}
    return _fit(value, kind, names, ns)


def _agrees(written: Any, read: Any) -> bool:
    """What the old writer wrote is what today's reader holds (it may hold more fields)."""
    if isinstance(written, dict):
        return isinstance(read, dict) and all(_agrees(v, read.get(k)) for k, v in written.items())
    if isinstance(written, list):
        return (
            isinstance(read, list)
            and len(read) == len(written)
            and all(_agrees(a, b) for a, b in zip(written, read, strict=True))
        )
    return bool(written == read)


def test_history_holds_every_schema_of_today_and_the_issue_32_one() -> None:
    fps = {codegen._history_key(name)[1] for name in HISTORY}
    for cls in record_types().values():
        assert schema_fingerprint(cls).hex() in fps, cls.__name__
    # The AdmissionRequest fingerprint outside clients were told before agent_version existed.
    assert "e3e76207289ef29d" in fps
    assert EARLIER, "no earlier schema in schemas/history/"


@pytest.mark.parametrize("file_name", EARLIER)
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_record_written_with_an_earlier_schema_is_read_by_todays_decoder(
    file_name: str, data: st.DataObject
) -> None:
    fullname, fp = codegen._history_key(file_name)
    cls = record_types()[fullname]
    schema = json.loads(HISTORY[file_name])
    names = _definitions(schema, fullname.rsplit(".", 1)[0], {})
    written = _fit(to_dict(data.draw(records(cls))), schema, names, fullname.rsplit(".", 1)[0])
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), written)
    record = decode(b"\xc3\x01" + bytes.fromhex(fp) + buf.getvalue())
    assert type(record) is cls
    read = to_dict(record)
    assert _agrees(written, read)
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        if f.name not in written:  # a field added since: today's default filled in
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
            assert getattr(record, f.name) == default, f.name


def test_a_fingerprint_in_no_history_is_still_refused() -> None:
    with pytest.raises(WireError, match="unknown schema fingerprint 0000000000000000"):
        decode(b"\xc3\x01" + bytes(8) + b"\x00")


def _readme_example() -> str:
    text = (codegen.SCHEMA_DIR / "README.md").read_text(encoding="utf-8")
    section = text.split("### Writer schemas for readers", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_python_example_reads_an_audit_record_of_an_earlier_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The recipe outside readers follow, run as written (from the repository root): it reads a
    # record written with an earlier AuditRecord schema into today's.
    earlier = next(n for n in EARLIER if n.startswith("runplane.v1.AuditRecord."))
    fullname, fp = codegen._history_key(earlier)
    schema = json.loads(HISTORY[earlier])
    written = {f["name"]: f.get("default") for f in schema["fields"]} | {
        "session_id": "r-42",
        "seq": 3,
        "era": 0,
        "kind": "EFFECT_RECORDED",
        "stamp_ms": 1,
        "label": {"trust": "TRUSTED", "sensitivity": "INTERNAL", "provenance": []},
        "hash": "ab" * 32,
        "verdict": "VERIFIED",
        "verified_ms": 2,
    }
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), written)
    monkeypatch.chdir(codegen.SCHEMA_DIR.parent)
    scope: dict[str, Any] = {}
    exec(_readme_example(), scope)
    read = scope["read_audit"](b"\xc3\x01" + bytes.fromhex(fp) + buf.getvalue())
    assert (read["session_id"], read["seq"], read["verdict"]) == ("r-42", 3, "VERIFIED")
    assert set(read) == {f.name for f in dataclasses.fields(record_types()[fullname])}  # type: ignore[arg-type]
