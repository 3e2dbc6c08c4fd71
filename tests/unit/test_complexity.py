"""Small pieces, held by complexity rather than by a line count.

ruff holds every function in ``libs/`` and ``services/`` under a McCabe complexity of 12, 12
branches and 50 statements (``[tool.ruff.lint]`` in pyproject.toml: C901, PLR0912, PLR0915,
run by ``make lint``). A long module that holds one idea is fine; one idea cut across files to
fit a limit is the defect. This file holds the one rule ruff has only in preview (PLR0904): a
class has at most ``MAX_PUBLIC_METHODS`` public methods, so that no class grows into a god
object — but for the facades whose width is their purpose, each named with its reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_PUBLIC_METHODS = 20
GENERATED = frozenset({"libs/runplane/wire/_records.py"})

# Facades: (module, class) → why its width is the point.
FACADES: dict[tuple[str, str], str] = {
    ("libs/runplane/core/ctx.py", "StepCtx"): (
        "the agent's whole API: every effect and every deterministic helper is one method"
    ),
    ("libs/runplane/core/engine/runtime.py", "Runtime"): (
        "the engine's API to the executor and the test driver: one method per input a run takes"
    ),
}


def hand_written() -> Iterator[tuple[str, Path]]:
    for root in ("libs", "services"):
        for path in sorted((ROOT / root).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in GENERATED:
                yield rel, path


def wide_classes(source: str, limit: int) -> list[tuple[str, int]]:
    """(class name, public methods) of every class with more than ``limit`` public methods
    (``def`` in the class body not starting with ``_``; properties count: they are API too)."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            public = [
                child
                for child in node.body
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                and not child.name.startswith("_")
            ]
            if len(public) > limit:
                found.append((node.name, len(public)))
    return found


def test_no_class_has_too_many_public_methods() -> None:
    wide = [
        f"{rel}: {name} ({n} public methods)"
        for rel, path in hand_written()
        for name, n in wide_classes(path.read_text(), MAX_PUBLIC_METHODS)
        if (rel, name) not in FACADES
    ]
    assert wide == [], f"classes over {MAX_PUBLIC_METHODS} public methods:\n" + "\n".join(wide)


def test_every_facade_exists_and_is_wide() -> None:
    """An entry stays only while it is needed: a facade that shrank, moved or went away fails."""
    stale = []
    for (rel, name), _reason in FACADES.items():
        path = ROOT / rel
        widths = dict(wide_classes(path.read_text(), MAX_PUBLIC_METHODS)) if path.exists() else {}
        if name not in widths:
            stale.append(f"{rel}: {name}")
    assert stale == [], "no longer a wide class, remove from FACADES: " + ", ".join(stale)


def test_wide_classes_counts_public_methods_only() -> None:
    methods = "\n".join(f"    def m{i}(self): pass" for i in range(21))
    source = (
        f"class Wide:\n{methods}\nclass Narrow:\n    def _a(self): pass\n    def b(self): pass\n"
    )
    assert wide_classes(source, MAX_PUBLIC_METHODS) == [("Wide", 21)]
