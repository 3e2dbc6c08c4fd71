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


def test_check_prints_each_agents_effective_policy_with_or_without_a_file(tmp_path: Path) -> None:
    bare = CliRunner().invoke(app, ["policy", "check", "--agents", "examples.payout"])
    assert bare.exit_code == 0, bare.output
    assert "no deployment policy: the default policy holds" in bare.output
    # The agent's own declaration is in force without a policy, and every other sink is gated.
    payout_sink = "agent payout: sink tool://payout: mutating, ceiling secret, protected"
    assert f"{payout_sink} $.recipient from tool://crm_lookup" in bare.output
    assert "sink model:openai/gpt-4o-mini: read-only, ceiling internal (@sinks)" in bare.output
    assert "agent payout: any other sink: as the call declares it; a mutating one refuses " in (
        bare.output
    )
    assert "unattributed bytes: the run's context" in bare.output
    path = tmp_path / "policy.yaml"
    path.write_text(
        "sinks: {'model:openai/gpt-4o-mini': {mutating: false, ceiling: confidential}}\n"
        "agents: {payout: {unattributed: agent}}\n"
    )
    bound = CliRunner().invoke(app, ["policy", "check", str(path), "--agents", "examples.payout"])
    assert bound.exit_code == 0, bound.output
    assert "sink model:openai/gpt-4o-mini: read-only, ceiling confidential (policy)" in bound.output
    assert "unattributed bytes: the agent's own (WEAKER" in bound.output


def test_check_refuses_an_unknown_rule_or_module_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("agents: {payout: {unattributed: nobody}}\n")
    result = CliRunner().invoke(app, ["policy", "check", str(path), "--agents", ""])
    assert result.exit_code == 2 and "unattributed is one of context, agent" in result.output
    missing = CliRunner().invoke(app, ["policy", "check", "--agents", "no_such.module"])
    assert missing.exit_code == 2
    assert missing.output.strip().count("\n") == 0 and "no_such.module" in missing.output
