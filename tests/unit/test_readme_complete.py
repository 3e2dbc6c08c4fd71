"""README's "Looking around" and "Where things are" keep up with the code: every ``runplane``
command is shown there as ``runplane <command>``, and every example module is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from runplane.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _leaves(command: Any, path: tuple[str, ...] = ()) -> list[str]:
    subs = getattr(command, "commands", None)
    if not subs:
        return [" ".join(path)]
    return [leaf for name, sub in subs.items() for leaf in _leaves(sub, (*path, name))]


def test_every_cli_command_is_in_the_readme() -> None:
    commands = _leaves(typer.main.get_command(app))
    assert len(commands) > 30  # the walk reached the groups' commands
    assert [c for c in commands if f"runplane {c}" not in README] == []


def test_every_example_module_is_named_in_the_readme() -> None:
    examples = sorted(p.name for p in (ROOT / "examples").glob("*.py") if p.stem != "__init__")
    assert "plan_triage.py" in examples
    assert [name for name in examples if f"`{name}`" not in README] == []
