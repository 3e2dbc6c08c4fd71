"""The shell blocks of README.md and the runbooks, with what each says about being tested.

A shell block (a fence of ``bash``, ``sh`` or ``shell``) is preceded, on the line just above
its fence, by one marker:

    <!-- test: run -->                  executed, in order, by tests/e2e/test_readme_literal.py
    <!-- test: skip: why it cannot -->  kept out, with the reason a reader can check

tests/unit/test_doc_blocks.py requires a marker on every shell block of ``DOCUMENTS``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ("README.md", "docs/operations.md", "docs/security.md")
SHELL = ("bash", "sh", "shell")
_MARKER = re.compile(r"^<!-- test: (run|skip: (?P<why>.+?)) -->$")


@dataclass(frozen=True)
class Block:
    document: str
    line: int  # 1-based line of the opening fence
    text: str  # the block's lines, as written
    marker: str | None  # "run", "skip", or None when the line above is no marker
    why: str  # a skip's reason

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"


def shell_blocks(document: str) -> list[Block]:
    lines = (ROOT / document).read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = lines[i].strip()
        if not fence.startswith("```"):
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
        if fence[3:].strip() in SHELL:
            above = lines[i - 1].strip() if i > 0 else ""
            found = _MARKER.match(above)
            marker = None if found is None else found.group(1).split(":")[0]
            why = "" if found is None else (found.group("why") or "")
            blocks.append(Block(document, i + 1, "\n".join(lines[i + 1 : end]), marker, why))
        i = end + 1
    return blocks
