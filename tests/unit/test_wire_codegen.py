"""The generated wire types stay in step with schemas/*.avsc."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import fastavro
import pytest

from runplane.errors import SchemaError
from runplane.wire import codegen
from runplane.wire._records import ENUM_TYPES, RECORD_TYPES, SCHEMAS

pytestmark = pytest.mark.unit


def test_records_module_is_not_stale() -> None:
    # Fails when someone edits a schema without running `python -m runplane.wire.codegen`.
    assert codegen.OUTPUT.read_text(encoding="utf-8") == codegen.render(), (
        "libs/runplane/wire/_records.py is stale: run python -m runplane.wire.codegen"
    )


def test_check_mode_reports_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "_records.py"
    stale.write_text("# old\n", encoding="utf-8")
    monkeypatch.setattr(codegen, "OUTPUT", stale)
    assert codegen.main(["--check"]) == 1
    stale.write_text(codegen.render(), encoding="utf-8")
    assert codegen.main(["--check"]) == 0


def test_every_schema_file_has_a_class() -> None:
    files = codegen.load_files()
    names = {c.avro_name for c in RECORD_TYPES}
    for fullname, schema in files.items():
        if schema["type"] == "record":
            assert fullname in names
    enum_names = {e.__name__ for e in ENUM_TYPES}
    assert {"RunStatus", "JournalKind", "Trust", "AdmissionOutcome"} <= enum_names


def test_embedded_schemas_are_self_contained() -> None:
    # Each parses with no named_schemas at all: what is fingerprinted/registered stands alone.
    for name, text in SCHEMAS.items():
        parsed = fastavro.parse_schema(json.loads(text))
        assert isinstance(parsed, dict)
        assert parsed["name"] == name


def test_fields_mirror_the_schema_files() -> None:
    files = codegen.load_files()
    for cls in RECORD_TYPES:
        if cls.avro_name in files:
            expected = [f["name"] for f in files[cls.avro_name]["fields"]]
            assert [f.name for f in dataclasses.fields(cls)] == expected  # type: ignore[arg-type]


def test_unresolvable_reference_is_a_schema_error(tmp_path: Path) -> None:
    (tmp_path / "x.avsc").write_text(
        json.dumps(
            {
                "type": "record",
                "name": "X",
                "namespace": "t",
                "fields": [{"name": "y", "type": "t.Missing"}],
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(SchemaError, match="unresolvable"):
        codegen.render(tmp_path)


def test_dependency_order_puts_references_first(tmp_path: Path) -> None:
    (tmp_path / "a.avsc").write_text(
        json.dumps(
            {
                "type": "record",
                "name": "A",
                "namespace": "t",
                "fields": [{"name": "b", "type": "t.B"}],
            }
        ),
        encoding="utf-8",
    )
    (tmp_path / "b.avsc").write_text(
        json.dumps({"type": "enum", "name": "B", "namespace": "t", "symbols": ["X"]}),
        encoding="utf-8",
    )
    files = codegen.load_files(tmp_path)
    assert codegen.parse_in_dependency_order(files) == ["t.B", "t.A"]


def test_the_published_order_parses_with_no_forward_reference() -> None:
    # As Avro Java's Schema.Parser reads the files: one after another, each only against
    # the files before it (the JVM client test reads schemas/README.md's list this way).
    files = codegen.load_files(codegen.SCHEMA_DIR)
    named: dict[str, object] = {}
    for name in codegen.parse_in_dependency_order(files):
        fastavro.parse_schema(dict(files[name]), named_schemas=named)


def test_a_file_that_fails_on_a_reference_defines_nothing(tmp_path: Path) -> None:
    # C defines the nested record N, then names D, which only a later pass knows: N must not
    # count as defined until C parses, so E (which uses N) comes after C.
    schemas = {
        "c": {
            "type": "record",
            "name": "C",
            "namespace": "t",
            "fields": [
                {"name": "n", "type": {"type": "record", "name": "N", "fields": []}},
                {"name": "d", "type": "t.D"},
            ],
        },
        "d": {"type": "enum", "name": "D", "namespace": "t", "symbols": ["X"]},
        "e": {
            "type": "record",
            "name": "E",
            "namespace": "t",
            "fields": [{"name": "n", "type": "t.N"}],
        },
    }
    for file, schema in schemas.items():
        (tmp_path / f"{file}.avsc").write_text(json.dumps(schema), encoding="utf-8")
    order = codegen.parse_in_dependency_order(codegen.load_files(tmp_path))
    assert order.index("t.C") < order.index("t.E") and order.index("t.D") < order.index("t.C")


def test_fingerprints_match_fastavros_own_loading_of_the_files() -> None:
    # What an outside emitter computes from the .avsc files (fastavro's load_schema resolves
    # cross-file references itself) must equal what we put on the wire.
    from fastavro.schema import fingerprint, load_schema, to_parsing_canonical_form

    from runplane.wire import schema_fingerprint

    for cls in RECORD_TYPES:
        path = codegen.SCHEMA_DIR / f"{cls.avro_name}.avsc"
        if not path.exists():
            continue  # defined inline in another file
        loaded = load_schema(str(path))
        expected = fingerprint(to_parsing_canonical_form(loaded), "CRC-64-AVRO")
        assert schema_fingerprint(cls).hex() == expected, cls.__name__


def test_history_module_and_readme_are_not_stale() -> None:
    # Fails when an .avsc changes without the codegen: schemas/history/, _history.py and the
    # generated block of schemas/README.md all come from the files.
    assert codegen.stale(codegen.outputs()) == [], "run python -m runplane.wire.codegen"


def _copy_schemas(tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / "schemas"
    shutil.copytree(codegen.SCHEMA_DIR, target)
    return target


def test_readme_block_drifts_when_a_schema_gains_a_field(tmp_path: Path) -> None:
    schemas = _copy_schemas(tmp_path)
    path = schemas / "runplane.v1.Wake.avsc"
    schema = json.loads(path.read_text(encoding="utf-8"))
    schema["fields"].append({"name": "priority", "type": "int", "default": 7})
    path.write_text(json.dumps(schema), encoding="utf-8")
    out = codegen.outputs(schemas)
    readme = out[schemas / "README.md"]
    assert readme != (schemas / "README.md").read_text(encoding="utf-8")
    assert "| `priority` | int | `7` |" in readme
    # The new version joins the history; the old one stays.
    new_fp = codegen.load_contract(schemas).fingerprints["runplane.v1.Wake"]
    assert schemas / "history" / f"runplane.v1.Wake.{new_fp}.avsc" in out
    assert schemas / "history" / "runplane.v1.Wake.09cb2999fbfc5bce.avsc" in out
    earlier = out[codegen.HISTORY_OUTPUT]
    assert "09cb2999fbfc5bce" in earlier and new_fp not in earlier


def test_a_history_file_that_lies_about_its_fingerprint_is_refused(tmp_path: Path) -> None:
    schemas = _copy_schemas(tmp_path)
    wake = schemas / "history" / "runplane.v1.Wake.09cb2999fbfc5bce.avsc"
    wake.rename(schemas / "history" / "runplane.v1.Wake.0000000000000000.avsc")
    with pytest.raises(SchemaError, match=r"holds runplane\.v1\.Wake with fingerprint 09cb"):
        codegen.outputs(schemas)


def test_readme_without_markers_is_refused(tmp_path: Path) -> None:
    schemas = _copy_schemas(tmp_path)
    (schemas / "README.md").write_text("# no markers\n", encoding="utf-8")
    with pytest.raises(SchemaError, match="GENERATED markers"):
        codegen.outputs(schemas)
