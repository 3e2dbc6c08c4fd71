"""Generate ``docs/reference/settings.md``, every ``RUNPLANE_*`` variable in one table:
``python -m runplane.cli.reference`` (``--check``: exit 1 when the file is stale).

Read from the source, not from a list kept by hand: each settings class reads its variables
in its ``from_env`` (or a function like it) with a call naming the variable — ``env_int(e,
"RUNPLANE_X", 6)``, ``e.get("RUNPLANE_Y", ".runplane")`` — so the generator walks every module
of ``libs/runplane`` and ``services`` (parsed with ``ast``, never imported) for such calls and
takes the argument after the name as its default, and the comment above the field it is
assigned to (``field=env_int(...)``) as what it means. The names built at run time are added
from their tables: ``RUNPLANE_<SERVICE>_PORT`` from ``SERVICE_PORTS`` and
``RUNPLANE_<LIMIT>`` from the fields of ``runplane.core.limits.Limits``.
``tests/unit/test_settings_reference.py`` fails when the file is stale.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

from runplane.config import SERVICE_PORTS
from runplane.core.limits import Limits

ROOT = Path(__file__).resolve().parents[3]
OUTPUT = ROOT / "docs" / "reference" / "settings.md"
NAME = re.compile(r"RUNPLANE_[A-Z0-9_]+")


@dataclass(frozen=True)
class Variable:
    name: str
    read_by: str  # the module, relative to the repository
    setting: str  # ``Class.field`` it sets, or ""
    default: str  # Python source of the default, or "" when the call gives none
    meaning: str  # the comment above the field it sets, or ""


# Calls that read a variable: ``env.get(NAME, default)``, ``env_int(env, NAME, default)``, ...
_READERS = frozenset({"get", "getenv", "env_int", "env_float", "env_bool", "env_str"})


def _sources(root: Path) -> Iterator[Path]:
    for top in (root / "libs" / "runplane", root / "services"):
        yield from sorted(top.rglob("*.py"))


@dataclass(frozen=True)
class _Field:
    default: str
    comment: str


def _fields(source: str, cls: ast.ClassDef) -> dict[str, _Field]:
    """A class's annotated fields: default (source) and the ``#`` lines right above each."""
    lines = source.splitlines()
    out: dict[str, _Field] = {}
    for item in cls.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            above: list[str] = []
            i = item.lineno - 2
            while i >= 0 and lines[i].strip().startswith("#"):
                above.insert(0, lines[i].strip().lstrip("#").strip())
                i -= 1
            default = "" if item.value is None else ast.unparse(item.value)
            out[item.target.id] = _Field(default, " ".join(above))
    return out


def _called(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _reads(path: Path, root: Path) -> Iterator[Variable]:
    source = path.read_text(encoding="utf-8")
    module = path.relative_to(root).as_posix()
    yield from _reads_in(ast.parse(source, str(path)), source, module, None)


def _reads_in(
    node: ast.AST, source: str, module: str, cls: ast.ClassDef | None
) -> Iterator[Variable]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            yield from _reads_in(child, source, module, child)
        elif isinstance(child, ast.keyword) and child.arg is not None and cls is not None:
            for call in ast.walk(child.value):
                yield from _call_reads(call, source, module, cls, child.arg)
        elif isinstance(child, ast.Call | ast.Subscript):
            yield from _call_reads(child, source, module, cls, None)
            yield from _option_reads(child, module)
            yield from _reads_in(child, source, module, cls)
        elif isinstance(child, ast.Assign) and _named_constant(child) is not None:
            # NAME_ENV = "RUNPLANE_X"  # what it holds: the module reads it through the constant.
            target, name = _named_constant(child)  # type: ignore[misc]
            line = source.splitlines()[child.lineno - 1]
            comment = line.split("#", 1)[1].strip() if "#" in line else ""
            yield Variable(name, module, target, "", comment)
        else:
            yield from _reads_in(child, source, module, cls)


def _named_constant(node: ast.Assign) -> tuple[str, str] | None:
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return None
    name = _runplane_name(node.value)
    return None if name is None else (node.targets[0].id, name)


def _runplane_name(node: ast.AST | None) -> str | None:
    """The variable's name when ``node`` is a string constant naming one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if NAME.fullmatch(node.value) else None
    return None


def _option_reads(node: ast.AST, module: str) -> Iterator[Variable]:
    """A command-line option that falls back to a variable: ``Option("--url", envvar=...)``."""
    if not isinstance(node, ast.Call):
        return
    given = {k.arg: k.value for k in node.keywords if k.arg is not None}
    envvar = _runplane_name(given.get("envvar"))
    if envvar is None:
        return
    flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    option = next((f for f in flags if f.startswith("--")), "")
    help_ = given.get("help")
    meaning = (
        help_.value if isinstance(help_, ast.Constant) and isinstance(help_.value, str) else ""
    )
    yield Variable(envvar, module, f"option {option}" if option else "", "", meaning)


def _call_reads(
    node: ast.AST, source: str, module: str, cls: ast.ClassDef | None, target: str | None
) -> Iterator[Variable]:
    """A read of a variable: its name, and the argument after it (if any) as its default."""
    if isinstance(node, ast.Subscript):
        key = _runplane_name(node.slice)
        if key is not None:
            yield _variable(key, "", source, module, cls, target)
        return
    if not isinstance(node, ast.Call) or _called(node) not in _READERS:
        return
    args = node.args
    for i, arg in enumerate(args):
        name = _runplane_name(arg)
        if name is not None:
            default = ast.unparse(args[i + 1]) if i + 1 < len(args) else ""
            yield _variable(name, default, source, module, cls, target)


def _variable(
    name: str, default: str, source: str, module: str, cls: ast.ClassDef | None, target: str | None
) -> Variable:
    known = _fields(source, cls) if cls is not None else {}
    f = known.get(target or "")
    # ``d.batch_max`` (d = cls()): the field's own default, written where it is declared.
    m = re.fullmatch(r"(?:d|defaults)\.(\w+)", default)
    if m and m.group(1) in known:
        default = known[m.group(1)].default
    setting = f"{cls.name}.{target}" if cls is not None and f is not None else ""
    return Variable(name, module, setting, default, f.comment if f is not None else "")


def _built_at_run_time() -> Iterator[Variable]:
    for service, port in SERVICE_PORTS.items():
        yield Variable(
            f"RUNPLANE_{service.upper()}_PORT",
            "libs/runplane/config.py",
            "Settings.http_port",
            str(port),
            f"the port {service} serves /healthz and /metrics (and its API) on",
        )
    for f in fields(Limits):
        default = "" if f.default is MISSING else repr(f.default)
        yield Variable(
            f"RUNPLANE_{f.name.upper()}",
            "libs/runplane/core/limits.py",
            f"Limits.{f.name}",
            default,
            f"the run limit `{f.name}` (a positive integer)",
        )


def collect(root: Path = ROOT) -> list[Variable]:
    """Every variable read, once per (name, module): the reading that says most."""
    found: dict[tuple[str, str], Variable] = {}
    for var in [*(v for p in _sources(root) for v in _reads(p, root)), *_built_at_run_time()]:
        key = (var.name, var.read_by)
        seen = found.get(key)
        if seen is None or _said(var) > _said(seen):
            found[key] = var
    return sorted(found.values(), key=lambda v: (v.name, v.read_by))


def _said(v: Variable) -> int:
    return bool(v.meaning) * 4 + bool(v.setting) * 2 + bool(v.default)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(variables: Iterable[Variable]) -> str:
    out = [
        "# Settings reference: every `RUNPLANE_*` variable",
        "",
        "<!-- Generated by python -m runplane.cli.reference from the settings classes; do not edit",
        "     by hand (tests/unit/test_settings_reference.py fails when it is stale). -->",
        "",
        "Every runplane process reads its configuration from these environment variables, once,",
        "at start. Unset and empty both mean the default (`runplane.config.env_*`); a value that",
        "does not parse is a `ConfigError` naming the variable. *Default* is the expression the",
        "code falls back to (a name in it is a constant of the module that reads it).",
        "*Read by* is the module that reads it: `libs/runplane/config.py` is every process's",
        "`Settings`, `services/<name>/settings.py` that service's, `libs/runplane/stack/` the",
        "local stack `runplane up` starts (ports and state directories for a second stack).",
        "",
        "| variable | read by | sets | default | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for v in variables:
        default = f"`{_cell(v.default)}`" if v.default else "—"
        setting = f"`{v.setting}`" if v.setting else "—"
        out.append(f"| `{v.name}` | `{v.read_by}` | {setting} | {default} | {_cell(v.meaning)} |")
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render(collect())
    current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
    if args == ["--check"]:
        if current != text:
            print(f"{OUTPUT} is stale; run python -m runplane.cli.reference", file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
