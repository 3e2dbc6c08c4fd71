"""``runplane.core.engine``'s front door is pinned, and ``runplane.core`` has no import cycle.

The engine is a package behind the import path the module had; callers (the executor, the
test Driver, runplane.core) import these names and nothing else from it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import runplane.core
import runplane.core.engine as engine

EXPECTED = {
    "MAX_BUFFERED_SIGNALS", "TERMINAL", "Calendars", "Command", "Event", "InFlight", "LiveCall",
    "OpenRequest", "Outcome", "Quarantine", "ReplayReport", "Runtime", "Step", "StepSink",
    "apply_step",
    "ReplayResult", "RunReplay", "attach_requests", "replay_recording", "replay_with",
    "can_hold",
    "decision_identity_problem", "fail_from_snapshot", "fail_unstartable", "replay_history",
    "timer_due",  # the timer a snapshot holds (its timers part), for the executor's scan
    "Stranded", "held_of", "hold", "park_stranded", "release_stranded", "strand_unstarted", "stranded_of",
}  # fmt: skip


def test_engine_all_is_pinned() -> None:
    assert set(engine.__all__) == EXPECTED
    assert len(engine.__all__) == len(EXPECTED)


def test_every_engine_export_resolves_and_nothing_else_leaks() -> None:
    for name in engine.__all__:
        assert getattr(engine, name) is not None, name
    public = {n for n in vars(engine) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(engine, n)).__name__ == "module"}
    assert public - modules - {"annotations"} == EXPECTED


def test_runplane_core_reexports_the_same_objects() -> None:
    for name in set(runplane.core.__all__) & EXPECTED:
        assert getattr(runplane.core, name) is getattr(engine, name), name


CORE = Path(runplane.core.__file__).parent


def _module_name(path: Path) -> str:
    parts = ["runplane", "core", *path.relative_to(CORE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path, known: set[str]) -> set[str]:
    """Modules of runplane.core that ``path`` imports when it is imported: module level,
    outside ``if TYPE_CHECKING:`` (a function's own late import runs later, by design)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in known else node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found & known


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in CORE.rglob("*.py")}
    known = set(paths)
    return {name: _runtime_imports(path, known) - {name} for name, path in paths.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    # A package's __init__ importing its own submodules is how a front door works, and a
    # submodule importing a sibling does not run the parent again: edges into a package from
    # below it are not followed.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if node.startswith(nxt + "."):
                continue
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_runplane_core_has_no_import_cycle() -> None:
    assert _cycle(_graph()) is None, " -> ".join(_cycle(_graph()) or [])


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(graph) == ["a", "b", "c", "a"]


def test_stepctx_does_not_import_the_engine() -> None:
    graph = _graph()
    assert not {m for m in graph["runplane.core.ctx"] if m.startswith("runplane.core.engine")}
