"""Every shell block of README.md and the runbooks says whether a test runs it, and why not
when it does not (tests/helpers/doc_blocks.py); the runnable ones are run against the stack by
tests/e2e/test_readme_literal.py."""

from __future__ import annotations

from tests.helpers.doc_blocks import DOCUMENTS, shell_blocks


def test_every_shell_block_is_marked_run_or_skip_with_a_reason() -> None:
    blocks = [b for d in DOCUMENTS for b in shell_blocks(d)]
    assert len(blocks) > 10  # the parser found the documents' blocks
    assert [b.where for b in blocks if b.marker is None] == []
    assert [b.where for b in blocks if b.marker == "skip" and len(b.why.split()) < 3] == []


def test_readme_runs_blocks_of_its_own() -> None:
    run = [b for b in shell_blocks("README.md") if b.marker == "run"]
    assert any("runplane emit refund --key order-17" in b.text for b in run)
    # as written: no placeholder a person would have to replace
    assert [b.where for b in run if any(w in b.text.split() for w in ("RUN", "TASK", "CASE"))] == []
