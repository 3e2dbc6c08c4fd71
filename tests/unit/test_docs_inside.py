"""The design lives inside the repository, and the docs stay true of it.

- No tracked file cites a document a clone does not contain: the founding design and
  conventions files, the Kafka notes, the seed documents, or any path outside the checkout.
- Every relative link in a tracked Markdown file points at a file that exists, and at a
  heading that exists when it names one.
- docs/design.md's topic and service tables are the code's (``kafka.topics.CATALOGUE``, each
  service's ``topology``), and every term it sets in italics has an entry in docs/glossary.md.

Each check is a pure function over text, tried on a planted violation first, so it can fail.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

import pytest

from runplane.kafka.topics import CATALOGUE, COMPACTED

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# Built from pieces so that this file does not cite what it forbids.
_MD = r"\.md\b"
_CITATIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("the founding design file", re.compile(r"\b" + "DESIGN" + _MD)),
    ("the conventions file", re.compile(r"\b" + "CONVENTIONS" + _MD)),
    ("the Kafka notes file", re.compile("KAFKA" + r"[-_]" + "NOTES", re.IGNORECASE)),
    ("a seed document", re.compile(r"\bseed " + r"0\d\d\b|\bseeds" + "/", re.IGNORECASE)),
    ("a path outside the repository", re.compile(r"\.\./" + r"shared\b|/" + "work/")),
)


def citations(text: str) -> list[str]:
    """What ``text`` cites outside the repository: one ``"line N: what (match)"`` per hit."""
    hits = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in _CITATIONS:
            for match in pattern.finditer(line):
                hits.append(f"line {number}: {what} ({match.group(0)})")
    return hits


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout: no tracked files to read")
    return [ROOT / name for name in out.decode("utf-8").split("\0") if name]


def _text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:  # listed by git but deleted in the work tree
        return None
    if b"\0" in data[:8192]:
        return None  # binary
    return data.decode("utf-8", errors="replace")


def test_a_planted_citation_is_found() -> None:
    planted = "\n".join(
        [
            "clean line",
            "see " + "DESIGN" + ".md, Executor",
            "# " + "CONVENTIONS" + ".md: keep it small",
            "(" + "KAFKA" + "-NOTES: allow one retry)",
            "the worked trace of " + "seed " + "001",
            "read ../" + "shared/anything.txt",
            "open /" + "work/" + "main/x",
            "in " + "seeds" + "/001.txt",
        ]
    )
    found = citations(planted)
    assert [hit.split(":")[0] for hit in found] == [f"line {n}" for n in range(2, 9)]
    assert citations("docs/design.md, design.md#services, 10 of 10 seeds, shared state") == []


def test_no_tracked_file_cites_outside_the_repository() -> None:
    files = _tracked()
    assert len(files) > 100  # the walk reached the tree
    offenders = {}
    for path in files:
        text = _text(path)
        if text is not None and (hits := citations(text)):
            offenders[str(path.relative_to(ROOT))] = hits
    assert offenders == {}


# -- links ---------------------------------------------------------------------------------
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    return {anchor(h) for h in _HEADING.findall(_FENCE.sub("", markdown))}


def broken_links(path: Path, markdown: str) -> list[str]:
    """Relative links in ``markdown`` (the file at ``path``) whose file or heading is missing."""
    broken = []
    for target in _LINK.findall(_FENCE.sub("", markdown)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        text = markdown
        if file_part:
            dest = (path.parent / file_part).resolve()
            if not dest.exists():
                broken.append(f"{target}: no such file")
                continue
            text = dest.read_text(encoding="utf-8") if dest.suffix == ".md" else ""
        if fragment and (text or not file_part) and fragment not in anchors(text):
            broken.append(f"{target}: no heading #{fragment}")
    return broken


def test_a_planted_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# A heading: with, punctuation\n", encoding="utf-8")
    page = tmp_path / "page.md"
    markdown = (
        "# Top `code` here\n"
        "[ok](other.md) [ok](other.md#a-heading-with-punctuation) [ok](#top-code-here)\n"
        "[web](https://example.com/missing) ![img](missing.png)\n"
        "[gone](missing.md) [bad anchor](other.md#nope) [bad self](#nowhere)\n"
        "```\n[in a fence](missing-too.md)\n```\n"
    )
    assert broken_links(page, markdown) == [
        "missing.md: no such file",
        "other.md#nope: no heading #nope",
        "#nowhere: no heading #nowhere",
    ]


def test_every_relative_link_in_the_docs_resolves() -> None:
    pages = [p for p in _tracked() if p.suffix == ".md" and p.exists()]
    assert ROOT / "README.md" in pages and DOCS / "design.md" in pages
    broken = {}
    for page in pages:
        if found := broken_links(page, page.read_text(encoding="utf-8")):
            broken[str(page.relative_to(ROOT))] = found
    assert broken == {}


# -- design.md against the code --------------------------------------------------------------
def _table(markdown: str, section: str) -> list[list[str]]:
    """The rows (cells stripped) of the first table under the heading ``## section``."""
    body = markdown.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]


def _ticked(cell: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", cell))


def test_design_lists_the_catalogue_topics() -> None:
    rows = _table((DOCS / "design.md").read_text(encoding="utf-8"), "Topics")
    named = {next(iter(_ticked(row[0]))): row for row in rows}
    assert set(named) == {spec.name for spec in CATALOGUE}
    compacted = {name for name, row in named.items() if row[2] == "compacted"}
    assert compacted == COMPACTED


def _io(service: str) -> tuple[set[str], set[str]]:
    topology = importlib.import_module(f"services.{service}.topology")
    inputs = getattr(topology, "INPUTS", None) or (topology.INPUT,)
    outputs = getattr(topology, "OUTPUTS", None) or (topology.OUTPUT, topology.DEADLETTER)
    return set(inputs), set(outputs)


def test_design_services_table_matches_each_topology() -> None:
    rows = _table((DOCS / "design.md").read_text(encoding="utf-8"), "Services")
    assert [row[0] for row in rows] == [
        "admission",
        "executor",
        "cases",
        "sweeper",
        "worklist",
        "journal",
        "queues",
    ]
    for service, consumes, produces, _owns in rows:
        inputs, outputs = _io(service)
        assert inputs <= _ticked(consumes), service
        assert outputs <= _ticked(produces), service


def _glossary_terms() -> set[str]:
    headings = re.findall(r"^### (.+)$", (DOCS / "glossary.md").read_text(encoding="utf-8"), re.M)
    return {t.strip().lower() for h in headings for t in re.split(r"[,:]", h) if t.strip()}


def _italics(markdown: str) -> set[str]:
    return {m.lower() for m in re.findall(r"(?<![*\w])\*([^*\s][^*]*?)\*(?![*\w])", markdown)}


def _defined(term: str, terms: set[str]) -> bool:
    forms = {term, term.removesuffix("s"), term.removesuffix("d"), term.removesuffix("ed")}
    return bool(forms & terms)


def test_every_term_design_sets_in_italics_is_in_the_glossary() -> None:
    terms = _glossary_terms()
    assert {"run", "era", "slot", "family", "wait", "park", "hold", "verdict"} <= terms
    assert not _defined("frobnicated", terms)  # the check can fail
    design = _italics((DOCS / "design.md").read_text(encoding="utf-8"))
    assert len(design) > 20
    assert sorted(t for t in design if not _defined(t, terms)) == []
