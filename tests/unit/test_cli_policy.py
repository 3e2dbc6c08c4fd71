"""``runplane policy check``: the digest the executor will journal, or why the file is bad."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from runplane.cli import app
from runplane.core.policy import parse_policy

TEXT = "agents:\n  payout: {release_role: finance, budget: {tool_calls: 3}}\n"


def test_check_prints_the_digest_and_what_the_policy_grants(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(TEXT)
    result = CliRunner().invoke(app, ["policy", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert f"digest {parse_policy(TEXT).digest}" in result.output
    assert "agent payout: any sink" in result.output and "decided by finance" in result.output


def test_check_refuses_a_bad_file_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("agents: {payout: {budget: {tool_calls: lots}}}\n")
    result = CliRunner().invoke(app, ["policy", "check", str(path)])
    assert result.exit_code == 2 and "policy" in result.output
    missing = CliRunner().invoke(app, ["policy", "check", str(tmp_path / "absent.yaml")])
    assert missing.exit_code == 2
