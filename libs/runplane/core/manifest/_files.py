"""Manifests on disk: load, compile and register a directory of them, and ``runplane lint``
findings for one YAML file, and ``lint_paths`` over a tree of Python files and manifests
(here, not in ``runplane.core.lint``: the lint is below the manifests, which compile into
``@agent``-style specs that ``lint_function`` checks)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from runplane.core.agents import AgentRegistry, AgentSpec
from runplane.core.lint import Finding, lint_source
from runplane.core.manifest._compile import compile_manifest
from runplane.core.manifest._model import ManifestError, Problem
from runplane.core.manifest._parse import validate_manifest


def load_manifest(path: str | Path) -> AgentSpec:
    """Read and compile one YAML manifest; ``ManifestError`` names the file and every problem."""
    import yaml  # at load time only: the core does not need YAML to run coded agents

    file = Path(path)
    try:
        doc = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ManifestError([Problem("", f"not YAML: {exc}")], str(file)) from None
    return compile_manifest(doc, str(file))


def load_manifests(directory: str | Path) -> list[AgentSpec]:
    """Compile every ``*.yaml``/``*.yml`` manifest in ``directory`` (sorted by name)."""
    folder = Path(directory)
    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    return [load_manifest(p) for p in files]


def register_manifests(directory: str | Path, registry: AgentRegistry) -> list[AgentSpec]:
    """Compile and register every manifest in ``directory`` into ``registry``."""
    return [registry.register(spec) for spec in load_manifests(directory)]


LINT_CODE: Final = "RPL100"
_PROBLEM_PART = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def is_manifest_file(path: str | Path) -> bool:
    """A YAML file that declares ``apiVersion: runplane/…`` (what ``runplane lint DIR`` checks;
    other YAML beside the agents — calendars, principals — is not a manifest)."""
    file = Path(path)
    if file.suffix not in (".yaml", ".yml"):
        return False
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return re.search(r"^apiVersion:\s*['\"]?runplane/", text, re.MULTILINE) is not None


def lint_manifest(path: str | Path) -> list[Finding]:
    """``runplane lint`` findings (``runplane.core.lint.Finding``, code RPL100) for one YAML
    manifest: each validation problem at the line of the field it names."""
    import yaml

    file = Path(path)
    alternative = "see docs/contracts.md, 'Effect groups and declarative agents'"
    try:
        text = file.read_text(encoding="utf-8")
        root = yaml.compose(text)
        doc = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        return [Finding(str(file), line, col, LINT_CODE, f"not YAML: {exc.problem}", alternative)]
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return [Finding(str(file), 1, 1, LINT_CODE, f"cannot read: {exc}", alternative)]
    findings = []
    for problem in validate_manifest(doc):
        line, col = _problem_position(root, problem.path)
        findings.append(Finding(str(file), line, col, LINT_CODE, str(problem), alternative))
    return sorted(findings)


def _problem_position(root: Any, path: str) -> tuple[int, int]:
    """Line and column (1-based) of the deepest node of the document along ``path``: the key
    of a mapping entry, the item of a list."""
    import yaml

    node = root
    if node is None:
        return (1, 1)
    where = node.start_mark
    for match in _PROBLEM_PART.finditer(path):
        key, index = match.group(1), match.group(2)
        if isinstance(node, yaml.MappingNode) and key is not None:
            entry = next(
                (
                    (k, v)
                    for k, v in node.value
                    if isinstance(k, yaml.ScalarNode) and k.value == key
                ),
                None,
            )
            if entry is None:
                break
            where, node = entry[0].start_mark, entry[1]
        elif (
            isinstance(node, yaml.SequenceNode)
            and index is not None
            and int(index) < len(node.value)
        ):
            node = node.value[int(index)]
            where = node.start_mark
        else:
            break
    return (where.line + 1, where.column + 1)


def _iter_python_files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(
                p
                for p in path.rglob("*")
                if (p.suffix == ".py" and "__pycache__" not in p.parts) or is_manifest_file(p)
            )
        else:
            yield path


def lint_paths(paths: Iterable[str | Path]) -> list[Finding]:
    """Check every ``.py`` file and every declarative agent manifest (YAML with ``apiVersion:
    runplane/…``, validated here) under ``paths``; a YAML file named
    explicitly is checked as a manifest."""
    findings: list[Finding] = []
    for file in _iter_python_files(Path(p) for p in paths):
        if file.suffix in (".yaml", ".yml"):
            findings.extend(lint_manifest(file))
            continue
        findings.extend(lint_source(file.read_text(encoding="utf-8"), str(file)))
    return findings
