"""docs/reference/settings.md is generated from the settings classes and names every variable."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from runplane.cli import reference

pytestmark = pytest.mark.unit


def test_the_reference_is_not_stale() -> None:
    assert reference.OUTPUT.read_text(encoding="utf-8") == reference.render(reference.collect()), (
        "docs/reference/settings.md is stale: run python -m runplane.cli.reference"
    )


def test_every_runplane_variable_in_the_code_is_in_the_reference() -> None:
    # Independent of the generator's own walk: every RUNPLANE_* string constant of libs/ and
    # services/ (the names the stack's second-instance recipe needs among them).
    named: set[str] = set()
    for path in reference._sources(reference.ROOT):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and re.fullmatch(r"RUNPLANE_[A-Z0-9_]+", value):
                named.add(value)
    text = reference.OUTPUT.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(RUNPLANE_[A-Z0-9_]+)`", text, flags=re.M))
    assert named - documented == set()
    assert {
        "RUNPLANE_STATE_DIR",
        "RUNPLANE_KAFKA_CONTROLLER_PORT",
        "RUNPLANE_KAFKA_TOOLS_DIR",
        "RUNPLANE_ADMISSION_PORT",
        "RUNPLANE_MAX_RESULT_BYTES",
    } <= documented


def test_a_new_variable_makes_the_reference_stale(tmp_path: Path) -> None:
    for top in ("libs/runplane/config.py", "services/admission/settings.py"):
        target = tmp_path / top
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(reference.ROOT / top, target)
    config = tmp_path / "libs/runplane/config.py"
    config.write_text(
        config.read_text(encoding="utf-8")
        + "\n\nclass Extra:\n    # How loud the new thing is.\n    volume: int = 3\n\n"
        + "    @classmethod\n    def from_env(cls, e):\n"
        + '        return cls(volume=env_int(e, "RUNPLANE_NEW_VOLUME", 3))\n',
        encoding="utf-8",
    )
    [new] = [v for v in reference.collect(tmp_path) if v.name == "RUNPLANE_NEW_VOLUME"]
    assert (new.setting, new.default, new.meaning) == (
        "Extra.volume",
        "3",
        "How loud the new thing is.",
    )
    [batch] = [v for v in reference.collect(tmp_path) if v.name == "RUNPLANE_ADMISSION_BATCH_MAX"]
    assert batch.default == "500"  # d.batch_max, resolved to the field's own default
