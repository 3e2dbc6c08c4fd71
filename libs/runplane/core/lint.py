"""The determinism boundary, enforced: an AST check of agent code.

Replay is only sound if an agent observes the world through its ``StepCtx``. This check
rejects the common ways of reaching past it — the wall clock, ``random``, ``uuid1/4``, the
environment, ``secrets`` and direct network clients — naming the line and the alternative.
It is a lint, not a sandbox (docs/design.md, "Not promised"): what slips through is caught at
replay by the witness check and quarantines the run instead of corrupting it.

Anything inside the arguments of a ``ctx.observe(...)`` call is allowed: observing is the
sanctioned way to read a non-deterministic value once and have it served from the journal.
A line of code that is not agent code (a CLI helper next to the agents, say) can be exempted
with a trailing ``# runplane: allow RPL004`` (codes comma-separated; no codes = all).

``runplane lint PATH`` (``runplane.cli.lint``) runs it over files; ``@agent`` runs it over
the agent function when it is registered.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runplane.errors import TerminalError

__all__ = ["Finding", "LintFailed", "lint_function", "lint_source"]

_CLOCK = "use ctx.now() (the logical clock; wall-clock reads differ on replay)"
_RANDOM = "use ctx.random() or ctx.randint(a, b) (derived per call, identical on replay)"
_IDS = (
    "derive the id from the run (ctx.run_id, ctx.random()) or read it inside ctx.observe(name, fn)"
)
_ENV = "pass configuration in the run input or a tool, or read it inside ctx.observe(name, fn)"
_NET = "declare a tool and call it with ctx.tool(name, args) (journaled, retried, replayed)"

# Exact dotted names (after alias resolution) → (code, what is wrong, the alternative).
_EXACT: dict[str, tuple[str, str, str]] = {
    "time.time": ("RPL001", "time.time() reads the wall clock", _CLOCK),
    "time.time_ns": ("RPL001", "time.time_ns() reads the wall clock", _CLOCK),
    "datetime.datetime.now": ("RPL002", "datetime.now() reads the wall clock", _CLOCK),
    "datetime.datetime.utcnow": ("RPL002", "datetime.utcnow() reads the wall clock", _CLOCK),
    "datetime.datetime.today": ("RPL002", "datetime.today() reads the wall clock", _CLOCK),
    "datetime.date.today": ("RPL002", "date.today() reads the wall clock", _CLOCK),
    "uuid.uuid1": ("RPL004", "uuid.uuid1() is time- and host-dependent", _IDS),
    "uuid.uuid4": ("RPL004", "uuid.uuid4() is random", _IDS),
    "os.environ": ("RPL005", "os.environ reads the process environment", _ENV),
    "os.environb": ("RPL005", "os.environb reads the process environment", _ENV),
    "os.getenv": ("RPL005", "os.getenv() reads the process environment", _ENV),
    "os.getenvb": ("RPL005", "os.getenvb() reads the process environment", _ENV),
}

# Whole modules: any attribute of them, and importing network clients at all.
_MODULES: dict[str, tuple[str, str, str]] = {
    "random": ("RPL003", "the random module is not replayable", _RANDOM),
    "secrets": ("RPL006", "the secrets module is not replayable", _RANDOM),
    "socket": ("RPL007", "socket opens connections outside the context", _NET),
    "httpx": ("RPL007", "httpx opens connections outside the context", _NET),
    "requests": ("RPL007", "requests opens connections outside the context", _NET),
    "urllib": ("RPL007", "urllib opens connections outside the context", _NET),
    "urllib3": ("RPL007", "urllib3 opens connections outside the context", _NET),
    "aiohttp": ("RPL007", "aiohttp opens connections outside the context", _NET),
    "http.client": ("RPL007", "http.client opens connections outside the context", _NET),
}
_NETWORK = frozenset(name for name, rule in _MODULES.items() if rule[0] == "RPL007")


@dataclass(frozen=True, order=True)
class Finding:
    """One violation: where, which rule, what is wrong, what to use instead."""

    path: str
    line: int
    col: int
    code: str
    message: str
    alternative: str

    def __str__(self) -> str:
        return (
            f"{self.path}:{self.line}:{self.col}: {self.code} {self.message} — {self.alternative}"
        )


class LintFailed(TerminalError):
    """Agent code reaches past its StepCtx; ``findings`` says where and what to use."""

    def __init__(self, findings: Iterable[Finding]) -> None:
        self.findings = tuple(sorted(findings))
        super().__init__("\n".join(str(f) for f in self.findings))


def _rule_for(dotted: str) -> tuple[str, str, str] | None:
    if dotted in _EXACT:
        return _EXACT[dotted]
    for module, rule in _MODULES.items():
        if dotted == module or dotted.startswith(module + "."):
            return rule
    return None


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, aliases: dict[str, str]) -> None:
        self.path = path
        self.aliases = aliases  # local name -> dotted origin
        self.findings: set[Finding] = set()

    def _report(self, node: ast.AST, rule: tuple[str, str, str]) -> None:
        code, message, alternative = rule
        line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0) + 1
        self.findings.add(Finding(self.path, line, col, code, message, alternative))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            top = alias.name.split(".")[0]
            self.aliases[alias.asname or top] = alias.name if alias.asname else top
            # Importing a network client is itself the finding: any use opens sockets.
            network = alias.name if alias.name in _NETWORK else top
            if network in _NETWORK:
                self._report(node, _MODULES[network])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        for alias in node.names:
            dotted = f"{node.module}.{alias.name}"
            self.aliases[alias.asname or alias.name] = dotted
            rule = _rule_for(dotted)
            if rule is not None:
                self._report(node, rule)

    def visit_Call(self, node: ast.Call) -> None:
        # ctx.observe(name, fn): the sanctioned place for a non-deterministic read.
        if isinstance(node.func, ast.Attribute) and node.func.attr == "observe":
            self.visit(node.func)
            return
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self._dotted(node)
        if dotted is not None:
            rule = _rule_for(dotted)
            if rule is not None:
                self._report(node, rule)
                return  # one finding per expression, not one per prefix
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        origin = self.aliases.get(node.id)
        # A name bound by `from x import y` is reported where it is used too (an agent
        # function checked alone does not contain the import); a bare module name
        # (`random`) on its own is harmless until an attribute is taken.
        if origin is not None and "." in origin and origin not in _MODULES:
            rule = _rule_for(origin)
            if rule is not None:
                self._report(node, rule)

    def _dotted(self, node: ast.expr) -> str | None:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        parts.append(self.aliases[node.id])
        return ".".join(reversed(parts))


def _module_aliases(tree: ast.AST) -> dict[str, str]:
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


_ALLOW = re.compile(r"#\s*runplane:\s*allow\b([^#]*)")


def _allowed(findings: Iterable[Finding], source: str, first_line: int = 1) -> list[Finding]:
    """Drop findings on lines that carry a ``# runplane: allow [CODES]`` marker."""
    lines = source.splitlines()
    kept = []
    for finding in findings:
        index = finding.line - first_line
        match = _ALLOW.search(lines[index]) if 0 <= index < len(lines) else None
        codes = set(re.findall(r"RPL\d{3}", match.group(1))) if match else set()
        if match is None or (codes and finding.code not in codes):
            kept.append(finding)
    return sorted(kept)


def lint_source(source: str, path: str = "<string>") -> list[Finding]:
    """Check one module's source; return the findings sorted by position."""
    tree = ast.parse(source, filename=path)
    checker = _Checker(path, {})
    checker.visit(tree)
    return _allowed(checker.findings, source)


def lint_function(fn: Callable[..., Any]) -> list[Finding]:
    """Check one agent function, resolving names through its module's imports, and the
    module-level helpers it calls (transitively), each finding at the helper's own line and
    naming the call it was reached from.

    Only code the agent runs is checked: a helper in the same module that the agent never calls
    (a tool implementation that legitimately uses httpx, say) does not fail it, nor does one
    called only inside ``ctx.observe(...)``. Code whose source is not available (a REPL, a
    compiled module) returns no findings: the replay witness check still stands behind it.
    """
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        file = inspect.getsourcefile(fn) or "<unknown>"
        module_source = Path(file).read_text(encoding="utf-8") if file != "<unknown>" else ""
        _, first_line = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return []
    module = ast.parse(module_source) if module_source else ast.Module(body=[], type_ignores=[])
    aliases = _module_aliases(module)
    tree = ast.parse(source)
    ast.increment_lineno(tree, first_line - 1)
    checker = _Checker(file, aliases)
    checker.visit(tree)
    found = _allowed(checker.findings, source, first_line)
    return sorted(found + _lint_helpers(tree, module, file, aliases, module_source))


def _lint_helpers(
    agent: ast.AST, module: ast.Module, file: str, aliases: dict[str, str], source: str
) -> list[Finding]:
    """Findings in the module-level functions ``agent`` calls, and those they call."""
    helpers = {
        n.name: n for n in module.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    queue = [(name, line, "the agent") for name, line in _calls(agent, helpers)]
    seen: set[str] = set()
    findings: list[Finding] = []
    while queue:
        name, line, caller = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        checker = _Checker(file, dict(aliases))
        checker.visit(helpers[name])
        where = f" (in helper {name}(), called by {caller} at line {line})"
        findings += [
            Finding(f.path, f.line, f.col, f.code, f.message + where, f.alternative)
            for f in _allowed(checker.findings, source)
        ]
        queue += [(n, at, f"{name}()") for n, at in _calls(helpers[name], helpers)]
    return findings


def _calls(node: ast.AST, helpers: Mapping[str, ast.AST]) -> list[tuple[str, int]]:
    """(helper name, line) of each call of a module-level helper in ``node``, in order, except
    inside ``ctx.observe(...)`` (observed code runs once and is served from the journal)."""
    out: list[tuple[str, int]] = []

    def walk(n: ast.AST) -> None:
        if isinstance(n, ast.Call):
            func = n.func
            if isinstance(func, ast.Attribute) and func.attr == "observe":
                walk(func)
                return
            if isinstance(func, ast.Name) and func.id in helpers:
                out.append((func.id, n.lineno))
        for child in ast.iter_child_nodes(n):
            walk(child)

    walk(node)
    return out
