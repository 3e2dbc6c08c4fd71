"""The layering rules, read from the source (parsed with ``ast``, never imported).

**Layers, bottom up** (``LAYERS`` below is the same table as data). A module may import a
module of its own layer or of a layer below, never one above — on *every* import: module
level, inside a function, and under ``if TYPE_CHECKING`` (a type in a signature is a
dependency on that layer's contract just as much as a call is):

 1. ``foundation``   errors, the wire (records, codecs, topics), settings — what every layer
                     uses, the core included (``runplane.errors``, ``runplane.wire``,
                     ``runplane.config``: the bottom layer stays at the package root).
 2. ``core values``  pure values and rules below the agent's door: canonical JSON, the
                     effect leaf (``Effect``, ``Op``, ``EffectError``), waits, calendars,
                     labels, policy, limits, versions, the chain, its verifier and recordings.
 3. ``core API``     the agent author's door: ``StepCtx``, ``@agent`` and the lint, plans,
                     manifests, groups, panels, releases.
 4. ``engine``       the replay engine (``runplane.core.engine``, behind its front door,
                     the recording replayer ``replaytest`` among its modules), and
                     ``runplane.core``'s front door (which re-exports the engine's names).
 5. ``serving``      what a running service process is made of (``runplane.serving``):
                     principals, watched files, health probes and the service shell that
                     serves them, tracing, shutdown. Above the core, so the pure core cannot
                     reach a probe, a trace or a file; below signing, the journal and Kafka,
                     which use them (watched keys, the default tenant, probes, trace headers).
 6. ``signing``      who wrote a record: admission and journal signatures, keyrings.
 7. ``journal``      reading a journal back: summaries, the run index, exports.
 8. ``kafka``        the shared loop and its plumbing (consumers, transactions, restore).
 9. ``runs``         a run seen from Kafka outside the executor (``runplane.runs``): the
                     emitter client that admits and awaits it, its records read back, the
                     orders sent to it (read, repair, operate), and journal exports.
10. ``edge``         providers, ``runplane.testing`` (the Driver, its verbs, golden journals),
                     the local stack, fakes and the web assets.
11. ``tools``        the CLI and the demo.
12. ``services``     every ``services.*`` package (they do not import each other).

**Lazy imports.** An import inside a function is allowed only for start-up time, named in
``LAZY`` with its reason — never to break a cycle: the cycle check counts function-local
imports like module-level ones (only ``TYPE_CHECKING`` imports are left out of it, as they
never run).

**One import path per name.** A public name is defined in one module; the only other module
it may be imported from is the front door (``__init__``) of a package that contains that
module. So no module re-exports another's name (no ``__all__`` entry, no ``import x as x``,
no caller importing a name from a module that merely imported it).

**Front doors.** Outside a package, nobody imports its private (``_x``) modules; the
packages in ``CLOSED`` keep *all* their modules private to callers outside them (the engine:
its modules are named for what they do, and ``runplane.core.engine.__all__`` is what the
executor, the Driver and ``runplane.core`` may use).

Also: the library imports no ``services.*`` module; no service imports another;
``runplane.kafka`` does not pull Starlette, uvicorn, FastAPI or redis in. ``runplane serve
NAME`` loads ``services.<name>.serve`` with importlib on purpose (the CLI runs the services
it names); that is not an ``import`` statement and not checked here.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBS = ROOT / "libs"
SERVICES = ROOT / "services"

# (layer, module prefixes), bottom up. A module's layer is the one of its longest prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "runplane.errors",
            "runplane.wire",
            "runplane.config",
        ),
    ),
    (
        "core values",
        (
            "runplane.core.canonical",
            "runplane.core.determinism",
            "runplane.core.effect",
            "runplane.core.turns",
            "runplane.core.jsonpaths",
            "runplane.core.labels",
            "runplane.core.waits",
            "runplane.core.calendars",
            "runplane.core.versions",
            "runplane.core.limits",
            "runplane.core.gate",
            "runplane.core.queues",
            "runplane.core.policy",
            "runplane.core.allotments",
            "runplane.core.keys",
            "runplane.core.schedules",
            "runplane.core.updates",
            "runplane.core.chain",
            "runplane.core.verify",
            "runplane.core.recording",
            "runplane.core.repair",
        ),
    ),
    (
        "core API",
        (
            "runplane.core.ctx",
            "runplane.core.agents",
            "runplane.core.lint",
            "runplane.core.plan",
            "runplane.core.manifest",
            "runplane.core.groups",
            "runplane.core.panels",
            "runplane.core.planrun",
            "runplane.core.loop",
            "runplane.core.plannedloop",
            "runplane.core.releases",
            "runplane.core.callapproval",
            "runplane.core.memory",
        ),
    ),
    ("engine", ("runplane.core.engine", "runplane.core")),
    ("serving", ("runplane.serving",)),
    ("signing", ("runplane.signing",)),
    ("journal", ("runplane.journal",)),
    ("kafka", ("runplane.kafka",)),
    ("runs", ("runplane.runs", "runplane.journal.export")),  # runs.client: the emitter client
    (
        "edge",
        (
            "runplane.providers",
            "runplane.testing",
            "runplane.stack",
            "runplane.fakes",
            "runplane.web",
            "runplane",  # the public front door: the author's surface (config, core, errors)
        ),
    ),
    ("tools", ("runplane.cli", "runplane.demo")),
    ("services", ("services",)),
)

# Packages whose every module is private to callers outside the package.
CLOSED: tuple[str, ...] = ("runplane.core.engine",)

# (importer, imported): why the import waits for the call. Start-up time only.
LAZY: dict[tuple[str, str], str] = {
    ("runplane.wire._choice", "runplane.wire._confluent"): (
        "the schema registry client costs ~0.6 s at import; only a deployment with "
        "RUNPLANE_SCHEMA_REGISTRY_URL set loads it"
    ),
}


# -- reading the source --------------------------------------------------------------------
@dataclass(frozen=True)
class Import:
    importer: str
    line: int
    module: str  # the module named (``from X import ...``: X; ``import X``: X)
    names: tuple[tuple[str, str], ...]  # ``from`` imports: (name, bound as); () for ``import``
    where: str  # "top" (runs at load), "local" (inside a function) or "typing" (TYPE_CHECKING)
    as_itself: tuple[str, ...] = ()  # ``from X import n as n``: the re-export idiom


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool
    imports: tuple[Import, ...]
    defined: frozenset[str]  # names bound here other than by an import
    all: tuple[str, ...] | None


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


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(body: Iterable[ast.stmt], where: str) -> Iterator[tuple[ast.stmt, str]]:
    """Every import statement with where it runs; a function body makes it "local", an
    ``if TYPE_CHECKING`` block "typing" (its ``else`` keeps the outer kind)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, where
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _walk(node.body, "typing" if where == "typing" else "local")
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _walk(node.body, "typing")
            yield from _walk(node.orelse, where)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    yield from _walk([child], where)
                elif isinstance(child, ast.ExceptHandler):
                    yield from _walk(child.body, where)


def _defined(tree: ast.Module) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return frozenset(names)


def _dunder_all(tree: ast.Module) -> tuple[str, ...] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                value = node.value
                if isinstance(value, ast.List | ast.Tuple):
                    return tuple(
                        e.value
                        for e in value.elts
                        if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    )
    return None


def parse_module(path: Path, name: str) -> Module:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    imports: list[Import] = []
    for node, where in _walk(tree.body, "top"):
        if isinstance(node, ast.Import):
            imports.extend(Import(name, node.lineno, a.name, (), where) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names = tuple((a.name, a.asname or a.name) for a in node.names)
            itself = tuple(a.name for a in node.names if a.asname == a.name)
            base = _resolve(node, name, is_package)
            imports.append(Import(name, node.lineno, base, names, where, itself))
    return Module(name, path, is_package, tuple(imports), _defined(tree), _dunder_all(tree))


@functools.cache
def codebase() -> dict[str, Module]:
    """Every module of ``libs/`` (``runplane.*``) and ``services/`` (``services.*``)."""
    found = {
        _module_name(p, LIBS): p for p in sorted(LIBS.rglob("*.py")) if "__pycache__" not in p.parts
    }
    found.update({_module_name(p, ROOT): p for p in sorted(SERVICES.rglob("*.py"))})
    return {name: parse_module(path, name) for name, path in found.items()}


def targets(imp: Import, modules: dict[str, Module]) -> Iterator[tuple[str, str | None]]:
    """(module, name) per thing ``imp`` binds: ``from pkg import sub`` is the module
    ``pkg.sub`` (name None); ``from mod import name`` is (mod, name); ``import a.b`` is a.b."""
    if not imp.names:
        yield imp.module, None
        return
    for name, _ in imp.names:
        sub = f"{imp.module}.{name}"
        yield (sub, None) if sub in modules else (imp.module, name)


def imported_modules(path: Path, module: str, *, top_level_only: bool) -> set[str]:
    """Every module ``path`` imports: ``import a.b`` gives ``a.b``; ``from a import b`` gives
    ``a`` and ``a.b`` (``b`` may be a submodule; callers keep the names that exist)."""
    found: set[str] = set()
    for imp in parse_module(path, module).imports:
        if top_level_only and imp.where != "top":
            continue
        found.add(imp.module)
        found.update(f"{imp.module}.{name}" for name, _ in imp.names)
    return found


def _is_services(name: str) -> bool:
    return name == "services" or name.startswith("services.")


def _internal(name: str) -> bool:
    return name == "runplane" or name.startswith("runplane.") or _is_services(name)


# -- the rules, each a function of the modules so a planted violation can be checked -------
def layer_of(module: str) -> int:
    best, layer = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, layer = len(prefix), index
    assert layer >= 0, f"{module} is in no layer: add it to LAYERS"
    return layer


def layer_violations(modules: dict[str, Module]) -> list[str]:
    found: list[str] = []
    for mod in modules.values():
        for imp in mod.imports:
            for target, _ in targets(imp, modules):
                if target not in modules or target == mod.name:
                    continue
                if layer_of(target) > layer_of(mod.name):
                    found.append(
                        f"{mod.name}:{imp.line} ({LAYERS[layer_of(mod.name)][0]}) imports "
                        f"{target} ({LAYERS[layer_of(target)][0]})"
                    )
    return sorted(set(found))


def lazy_violations(modules: dict[str, Module], lazy: dict[tuple[str, str], str]) -> list[str]:
    """Function-local imports of the codebase's own modules that are not allow-listed."""
    found = []
    for mod in modules.values():
        for imp in mod.imports:
            if imp.where != "local" or not _internal(imp.module):
                continue
            for target in sorted({t for t, _ in targets(imp, modules)}):
                if (mod.name, target) not in lazy:
                    found.append(f"{mod.name}:{imp.line} imports {target} inside a function")
    return found


def import_graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    """module -> the codebase modules it imports when it loads *or when a function of it
    runs*. ``from pkg import sub`` is an edge to ``pkg.sub`` only, as loading a submodule needs
    its package already loaded anyway (that parent link is not an import cycle)."""
    graph: dict[str, set[str]] = {}
    for mod in modules.values():
        deps = {
            target
            for imp in mod.imports
            if imp.where != "typing"
            for target, _ in targets(imp, modules)
        }
        graph[mod.name] = {d for d in deps if d in modules and d != mod.name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, …, a]``, or None (iterative DFS, sorted order)."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = [start]
        on_path: set[str] = {start}
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
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


def _origin(modules: dict[str, Module], module: str, name: str) -> str | None:
    """The module that defines ``name`` as seen from ``module`` (following from-imports and
    star imports); None when it is not the codebase's (a third-party or builtin name)."""
    seen: set[tuple[str, str]] = set()
    while (module, name) not in seen:
        seen.add((module, name))
        mod = modules.get(module)
        if mod is None:
            return None
        if name in mod.defined:
            return module
        nxt = None
        for imp in mod.imports:
            if imp.where == "local":
                continue
            for source, bound in imp.names:
                if bound == name and source != "*":
                    nxt = (imp.module, source)
                elif source == "*":
                    star = modules.get(imp.module)
                    if star is not None and name in (star.all or star.defined):
                        nxt = nxt or (imp.module, name)
        if nxt is None:
            return None
        module, name = nxt
        if f"{module}.{name}" in modules:
            return None  # a submodule, not a name
    return None


def _front_door_of(door: str, origin: str, modules: dict[str, Module]) -> bool:
    """``door`` is the ``__init__`` of a package that contains ``origin``."""
    return modules[door].is_package and origin.startswith(door + ".")


def reexport_violations(modules: dict[str, Module]) -> list[str]:
    """A name re-exported (``__all__`` or ``import x as x``), or imported by a caller, from a
    module that is neither where it is defined nor a front door of that module's package."""
    found = []
    for mod in modules.values():
        exported = set(mod.all or ())
        for imp in mod.imports:
            if not _internal(imp.module) or imp.where == "local":
                continue
            for source, bound in imp.names:
                if source == "*" or f"{imp.module}.{source}" in modules:
                    continue
                origin = _origin(modules, imp.module, source)
                if origin is None:
                    continue
                if origin != imp.module and not _front_door_of(imp.module, origin, modules):
                    found.append(
                        f"{mod.name}:{imp.line} imports {source} from {imp.module}, "
                        f"which re-exports it from {origin}"
                    )
                explicit = bound in exported or source in imp.as_itself
                if explicit and not _front_door_of(mod.name, origin, modules):
                    found.append(f"{mod.name} re-exports {source} of {origin}")
    return sorted(set(found))


def front_door_violations(
    modules: dict[str, Module], closed: Iterable[str], importers: Iterable[str] | None = None
) -> list[str]:
    """An import, from outside a package, of one of its private modules: a ``_name`` module,
    or any module of a package in ``closed``."""
    closed = tuple(closed)
    found = []
    for mod in modules.values():
        if importers is not None and not any(mod.name.startswith(p) for p in importers):
            continue
        for imp in mod.imports:
            for target, _ in targets(imp, modules):
                if target not in modules:
                    continue
                parts = target.split(".")
                for depth in range(1, len(parts)):
                    package, child = ".".join(parts[:depth]), parts[depth]
                    inside = mod.name == package or mod.name.startswith(package + ".")
                    if inside:
                        continue
                    if child.startswith("_") or package in closed:
                        found.append(f"{mod.name}:{imp.line} reaches past {package} to {target}")
                        break
    return sorted(set(found))


# -- the tests ----------------------------------------------------------------------------
def test_the_library_imports_no_service() -> None:
    offenders = [
        f"{mod.path.relative_to(ROOT)} imports {imp.module}"
        for mod in codebase().values()
        if mod.name.startswith("runplane")
        for imp in mod.imports
        if _is_services(imp.module)
    ]
    assert offenders == [], "the library must not import services.*:\n" + "\n".join(offenders)


def test_no_service_imports_another_service() -> None:
    offenders = []
    for mod in codebase().values():
        parts = mod.name.split(".")
        if parts[0] != "services" or len(parts) < 2:
            continue  # the library, services/__init__.py
        own = f"services.{parts[1]}"
        for imp in mod.imports:
            for target, _ in targets(imp, codebase()):
                foreign = target != own and not target.startswith(own + ".")
                if _is_services(target) and target != "services" and foreign:
                    offenders.append(f"{mod.name}:{imp.line} imports {target}")
    assert offenders == [], "a service imports another service:\n" + "\n".join(offenders)


def test_every_module_is_in_a_layer() -> None:
    for name in codebase():
        layer_of(name)


def test_every_import_respects_the_layers() -> None:
    offenders = layer_violations(codebase())
    assert offenders == [], "an import reaches up a layer:\n" + "\n".join(offenders)


def test_function_local_imports_are_the_allow_listed_lazy_ones() -> None:
    offenders = lazy_violations(codebase(), LAZY)
    assert offenders == [], (
        "an import inside a function that is not in LAZY (move it to the top; if that makes "
        "a cycle, the modules are in the wrong layer):\n" + "\n".join(offenders)
    )
    for (importer, imported), reason in LAZY.items():
        assert importer in codebase() and imported in codebase(), (importer, imported)
        assert reason.strip(), (importer, imported)


def test_no_import_cycle_counting_function_local_imports() -> None:
    graph = import_graph(codebase())
    assert find_cycle(graph) is None, find_cycle(graph)


def test_one_import_path_per_name() -> None:
    offenders = reexport_violations(codebase())
    assert offenders == [], "a name with two import paths:\n" + "\n".join(offenders)


def test_nobody_reaches_past_a_front_door() -> None:
    offenders = front_door_violations(codebase(), CLOSED)
    assert offenders == [], "an import past a package's front door:\n" + "\n".join(offenders)


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


# -- each rule can fail: planted violations on files of a temporary tree --------------------
def _plant(tmp_path: Path, files: dict[str, str]) -> dict[str, Module]:
    modules = {}
    for name, text in files.items():
        is_package = name.endswith(".__init__")
        module = name.removesuffix(".__init__")
        path = tmp_path / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        modules[module] = parse_module(path, module)
        assert modules[module].is_package == is_package
    return modules


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


def test_a_cycle_through_a_function_local_import_is_found(tmp_path: Path) -> None:
    modules = _plant(
        tmp_path,
        {
            "runplane.core.ctx": "from runplane.core.panels import panel\n",
            "runplane.core.panels": (
                "def panel():\n    from runplane.core.ctx import StepCtx  # late\n"
            ),
        },
    )
    assert find_cycle(import_graph(modules)) == [
        "runplane.core.ctx",
        "runplane.core.panels",
        "runplane.core.ctx",
    ]
    assert lazy_violations(modules, {}) == [
        "runplane.core.panels:2 imports runplane.core.ctx inside a function"
    ]
    allowed = {("runplane.core.panels", "runplane.core.ctx"): "start-up time"}
    assert lazy_violations(modules, allowed) == []


def test_typing_only_imports_make_no_cycle_but_count_for_layers(tmp_path: Path) -> None:
    modules = _plant(
        tmp_path,
        {
            "runplane.core.ctx": "from runplane.core.panels import panel\n",
            "runplane.core.panels": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from runplane.core.ctx import StepCtx\n"
                "    from runplane.kafka.loop import Loop\n"
                "def panel(): ...\n"
            ),
            "runplane.kafka.loop": "class Loop: ...\n",
        },
    )
    assert find_cycle(import_graph(modules)) is None
    assert layer_violations(modules) == [
        "runplane.core.panels:4 (core API) imports runplane.kafka.loop (kafka)"
    ]


def test_an_import_up_a_layer_is_found_inside_a_function(tmp_path: Path) -> None:
    modules = _plant(
        tmp_path,
        {
            "runplane.kafka.loop": (
                "def signer():\n    from runplane.journal.verify import verify\n"
            ),
            "runplane.journal.verify": (
                "def verify():\n    from runplane.kafka.loop import Loop\n"
            ),
        },
    )
    assert layer_violations(modules) == [
        "runplane.journal.verify:2 (journal) imports runplane.kafka.loop (kafka)"
    ]


def test_a_name_importable_from_two_modules_is_found(tmp_path: Path) -> None:
    modules = _plant(
        tmp_path,
        {
            "runplane.__init__": "",
            "runplane.core.__init__": (
                "from runplane.core.effect import Effect\n__all__ = ['Effect']\n"
            ),
            "runplane.core.effect": "class Effect: ...\n",
            # a shim: ctx re-exports the leaf's name
            "runplane.core.ctx": (
                "from runplane.core.effect import Effect\n__all__ = ['Effect', 'StepCtx']\n"
                "class StepCtx: ...\n"
            ),
            # a caller taking it from the shim, another from the front door (allowed)
            "runplane.core.groups": "from runplane.core.ctx import Effect\n",
            "runplane.core.panels": "from runplane.core import Effect\n",
        },
    )
    assert sorted(reexport_violations(modules)) == [
        "runplane.core.ctx re-exports Effect of runplane.core.effect",
        "runplane.core.groups:1 imports Effect from runplane.core.ctx, "
        "which re-exports it from runplane.core.effect",
    ]


def test_a_service_reaching_past_a_front_door_is_found(tmp_path: Path) -> None:
    modules = _plant(
        tmp_path,
        {
            "runplane.core.engine.__init__": "from runplane.core.engine.state import Run\n",
            "runplane.core.engine.state": "class Run: ...\n",
            "runplane.core.engine.apply": "from runplane.core.engine.state import Run\n",
            "runplane.wire.__init__": "from runplane.wire._codec import encode\n",
            "runplane.wire._codec": "def encode(): ...\n",
            "services.executor.versions": (
                "from runplane.core.engine import Run\n"
                "from runplane.core.engine.state import Run as R\n"
                "def f():\n    from runplane.wire._codec import encode\n"
            ),
        },
    )
    assert front_door_violations(modules, ("runplane.core.engine",)) == [
        "services.executor.versions:2 reaches past runplane.core.engine to "
        "runplane.core.engine.state",
        "services.executor.versions:4 reaches past runplane.wire to runplane.wire._codec",
    ]


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None
