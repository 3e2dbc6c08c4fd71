"""The determinism lint follows the agent into the module-level helpers it calls (issue 16):
findings at the helper's own line, naming the call they were reached from; helpers the agent
never calls, or calls only inside ctx.observe, are not its code."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path
from typing import Any

import pytest

from runplane.core import AgentRegistry
from runplane.core.lint import LintFailed, lint_function

SOURCE = textwrap.dedent(
    """
    import time
    import uuid

    import httpx


    def stamp():
        return time.time()


    def label(x):
        return f"{x}-{stamp()}"


    def fresh_id():
        return str(uuid.uuid4())


    def fetch(url):  # a tool implementation: the executor calls it, never the agent
        return httpx.get(url)


    async def agent_fn(ctx, input):
        name = label(input["x"])
        observed = await ctx.observe("id", lambda: fresh_id())
        return {"name": name, "id": observed}


    async def clean(ctx, input):
        return {"x": input["x"]}
    """
)


def _module(tmp_path: Path) -> Any:
    path = tmp_path / "helpers_agent.py"
    path.write_text(SOURCE, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("helpers_agent", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_helper_reading_the_clock_fails_the_agent_at_the_helpers_line(tmp_path: Path) -> None:
    module = _module(tmp_path)
    findings = lint_function(module.agent_fn)
    assert [(f.code, f.line, f.col) for f in findings] == [("RPL001", 9, 12)]
    [finding] = findings
    assert finding.path.endswith("helpers_agent.py")
    assert "in helper stamp(), called by label() at line 13" in finding.message
    assert lint_function(module.clean) == []


def test_registration_refuses_it_and_names_the_chain(tmp_path: Path) -> None:
    module = _module(tmp_path)
    with pytest.raises(LintFailed) as info:
        AgentRegistry().agent("helpers")(module.agent_fn)
    assert "helpers_agent.py:9:12: RPL001" in str(info.value)
