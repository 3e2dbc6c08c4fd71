"""The executor's policy file: read once, a bad one stops the start with what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from runplane.errors import ConfigError
from runplane.serving.policy import load_policy
from services.executor.settings import ExecutorSettings


def test_no_policy_unless_configured(tmp_path: Path) -> None:
    assert load_policy(None) is None
    assert ExecutorSettings.from_env({}).policy_path is None
    path = tmp_path / "policy.yaml"
    path.write_text("agents: {payout: {budget: {tool_calls: 3}}}\n")
    settings = ExecutorSettings.from_env({"RUNPLANE_POLICY": str(path)})
    policy = load_policy(settings.policy_path)
    assert policy is not None and policy.for_agent("payout").budget.tool_calls == 3


def test_a_missing_or_bad_policy_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_policy(str(tmp_path / "absent.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("sinks: {x: {ceiling: loud}}\n")
    with pytest.raises(ConfigError, match="policy"):
        load_policy(str(bad))
