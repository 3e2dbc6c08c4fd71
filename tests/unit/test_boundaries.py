"""The layering rules, read from the source (parsed with ``ast``, never imported).

- The library (``libs/``, the CLI included) imports no ``services.*`` module: what a service
  and the CLI share lives in the library (``runplane.journal``, ``runplane.keys``).
- No service imports another service: names two services agree on live in the library.
- ``runplane.kafka`` does not pull Starlette, uvicorn, FastAPI or redis in (health probes live
  in ``runplane.health``), checked by importing it in a fresh interpreter.
- No import cycle among the library's modules (module-level imports only: an import inside a
  function or under ``TYPE_CHECKING`` runs later, or never, and cannot deadlock a load).

``runplane serve NAME`` loads ``services.<name>.serve`` with importlib on purpose (the CLI
runs the services it names); that is not an ``import`` statement and not checked here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBS = ROOT / "libs"
SERVICES = ROOT / "services"


def _sources(root: Path) -> Iterator[Path]:
    yield from sorted(root.rglob("*.py"))


def _module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module an ``from X import ...`` names (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def imported_modules(path: Path, module: str, *, top_level_only: bool) -> set[str]:
    """Every module ``path`` imports: ``import a.b`` gives ``a.b``; ``from a import b`` gives
    ``a`` and ``a.b`` (``b`` may be a submodule; callers keep the names that exist)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    nodes: list[ast.stmt] = (
        list(_top_level(tree.body)) if top_level_only else list(_all_imports(tree))
    )
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, module, is_package)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _all_imports(tree: ast.Module) -> Iterator[ast.stmt]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Imports that run when the module loads: module level, in ``try`` and in ``if`` (but
    not ``if TYPE_CHECKING``)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and not _is_type_checking(node.test):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _top_level(block)
            for handler in node.handlers:
                yield from _top_level(handler.body)


def _is_services(name: str) -> bool:
    return name == "services" or name.startswith("services.")


def test_the_library_imports_no_service() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _sources(LIBS)
        for name in sorted(imported_modules(path, _module_name(path, LIBS), top_level_only=False))
        if _is_services(name)
    ]
    assert offenders == [], "the library must not import services.*:\n" + "\n".join(offenders)


def test_no_service_imports_another_service() -> None:
    offenders = []
    for path in _sources(SERVICES):
        module = _module_name(path, ROOT)
        parts = module.split(".")
        if len(parts) < 2:
            continue  # services/__init__.py
        own = f"services.{parts[1]}"
        for name in sorted(imported_modules(path, module, top_level_only=False)):
            # ``from services import x`` names the package ``services`` and ``services.x``
            if not _is_services(name) or name == "services":
                continue
            if name != own and not name.startswith(own + "."):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == [], "a service imports another service:\n" + "\n".join(offenders)


def test_the_import_rules_catch_what_they_forbid(tmp_path: Path) -> None:
    """The checks above can fail: a service import inside a function is found too."""
    src = tmp_path / "mod.py"
    src.write_text(
        "import os\n"
        "def f():\n"
        "    from services.journal.index import RunIndex\n"
        "from services import admission\n"
    )
    names = imported_modules(src, "runplane.mod", top_level_only=False)
    assert {"services.journal.index", "services.admission"} <= names
    assert "services.journal.index" not in imported_modules(
        src, "runplane.mod", top_level_only=True
    )


def test_kafka_plumbing_does_not_pull_the_http_stack() -> None:
    heavy = ("starlette", "uvicorn", "fastapi", "redis")
    code = (
        "import sys, importlib, pkgutil, runplane.kafka as k\n"
        "for m in pkgutil.iter_modules(k.__path__): importlib.import_module(f'runplane.kafka.{m.name}')\n"
        f"print(','.join(sorted(m for m in {heavy!r} if m in sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "", f"runplane.kafka imports {out.stdout.strip()}"


def _library_graph() -> dict[str, set[str]]:
    """module -> the library modules it imports when it loads. ``from pkg import sub`` is an
    edge to ``pkg.sub`` only, as loading a submodule needs its package already loaded anyway
    (that parent link is not an import cycle); ``from pkg import name`` is an edge to ``pkg``."""
    modules = {_module_name(p, LIBS): p for p in _sources(LIBS)}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in _top_level(ast.parse(path.read_text(), filename=str(path)).body):
            if isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node, name, path.name == "__init__.py")
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    deps.add(sub if sub in modules else base)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, …, a]``, or None (iterative DFS, sorted order)."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return [*path[path.index(child) :], child]
            elif child not in done:
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
                on_path.add(child)
    return None


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None


def test_no_import_cycle_in_the_library() -> None:
    assert find_cycle(_library_graph()) is None
