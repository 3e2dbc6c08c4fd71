"""Agent modules of the directory a service starts in import without PYTHONPATH (issue 30:
`RUNPLANE_AGENT_MODULES=examples.quote` from a project directory, under the console script,
whose sys.path holds no project directory)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from runplane.core.agents import import_agent_modules
from runplane.errors import ConfigError


def test_a_module_of_the_current_directory_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"mine_{uuid.uuid4().hex[:8]}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / name / "agent.py").write_text("LOADED = True\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    import_agent_modules([f"{name}.agent"])
    assert sys.modules[f"{name}.agent"].LOADED is True
    assert sys.path[-1] == str(tmp_path)  # appended: an installed package still wins


def test_a_module_nowhere_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(ConfigError, match="cannot import 'nowhere_at_all'"):
        import_agent_modules(["nowhere_at_all"])
