"""The determinism lint: findings with file:line and the alternative; registration refuses."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runplane.cli import app
from runplane.core import AgentRegistry, LintFailed, lint_source

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("source", "code", "line"),
    [
        ("import time\nasync def a(ctx, i):\n    return time.time()\n", "RPL001", 3),
        ("import datetime\nd = datetime.datetime.now()\n", "RPL002", 2),
        ("from datetime import datetime\nd = datetime.utcnow()\n", "RPL002", 2),
        ("import random\nx = random.random()\n", "RPL003", 2),
        ("from random import choice\n", "RPL003", 1),
        ("import uuid\nu = uuid.uuid4()\n", "RPL004", 2),
        ("import os\nk = os.environ['KEY']\n", "RPL005", 2),
        ("import os\nk = os.getenv('KEY')\n", "RPL005", 2),
        ("import secrets\nt = secrets.token_hex()\n", "RPL006", 2),
        ("import httpx\n", "RPL007", 1),
        ("import socket as s\n", "RPL007", 1),
        ("import urllib.request\n", "RPL007", 1),
        ("from requests import get\n", "RPL007", 1),
    ],
)
def test_each_rule_names_the_line_and_the_alternative(source: str, code: str, line: int) -> None:
    findings = lint_source(source, "agent.py")
    assert [(f.code, f.line) for f in findings] == [(code, line)]
    assert findings[0].alternative and str(findings[0]).startswith(f"agent.py:{line}:")


@pytest.mark.parametrize(
    "source",
    [
        "import time\nt = time.monotonic()\n",  # measurements are not control flow
        "import uuid\nu = uuid.uuid5(uuid.NAMESPACE_URL, 'x')\n",  # deterministic
        "async def a(ctx, i):\n    import uuid\n    return await ctx.observe('id', lambda: str(uuid.uuid4()))\n",
        "import datetime\nd = datetime.datetime(2024, 1, 1)\n",
    ],
)
def test_deterministic_code_and_observed_reads_pass(source: str) -> None:
    assert lint_source(source) == []


def test_a_from_import_is_reported_where_imported_and_where_used() -> None:
    findings = lint_source("from time import time as now\nx = 1\ny = now()\n")
    assert [(f.code, f.line) for f in findings] == [("RPL001", 1), ("RPL001", 3)]


def test_a_line_can_be_exempted_by_code() -> None:
    source = "import uuid\na = uuid.uuid4()  # runplane: allow RPL004\nb = uuid.uuid4()  # runplane: allow RPL001\n"
    assert [(f.code, f.line) for f in lint_source(source)] == [("RPL004", 3)]


def test_registering_an_agent_that_reads_the_clock_is_refused() -> None:
    registry = AgentRegistry()
    source = textwrap.dedent(
        """
        import time

        async def sneaky(ctx, input):
            started = time.time()
            return {"started": started}
        """
    )
    namespace: dict[str, object] = {}
    path = Path(__file__).parent / "_lint_fixture_agent.py"
    path.write_text(source, encoding="utf-8")
    try:
        exec(compile(source, str(path), "exec"), namespace)
        with pytest.raises(LintFailed) as info:
            registry.agent("sneaky")(namespace["sneaky"])  # type: ignore[arg-type]
    finally:
        path.unlink()
    assert "sneaky" not in registry
    assert [(f.code, f.line) for f in info.value.findings] == [("RPL001", 5)]


def test_cli_passes_on_the_examples_and_fails_with_the_fix(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["lint", str(EXAMPLES)])
    assert ok.exit_code == 0, ok.output
    bad = tmp_path / "agent.py"
    bad.write_text(
        "import time\n\nasync def agent(ctx, input):\n    return time.time()\n", encoding="utf-8"
    )
    result = runner.invoke(app, ["lint", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:4:12: RPL001" in result.output and "use ctx.now()" in result.output
    missing = runner.invoke(app, ["lint", str(tmp_path / "nope.py")])
    assert missing.exit_code == 2
