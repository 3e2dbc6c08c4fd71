"""README's shell blocks marked ``<!-- test: run -->``, run as written, in order, in one shell,
against the platform `runplane demo` starts (tests/helpers/doc_blocks.py says how a block is
marked; tests/unit/test_doc_blocks.py that every block is).

Nothing in a block is substituted. The shell only finds the test's own platform where a
reader's finds the demo's: the demo runs under the test's topic prefix, state dir and free
ports (as tests/e2e/test_demo.py runs it), and the environment says so with the variables the
CLI reads for them (``RUNPLANE_TOPIC_PREFIX``, ``RUNPLANE_STATE_DIR``, ``RUNPLANE_*_URL``).
The shell starts in a directory of its own holding the clone's ``examples/``, so the files a
block writes do not land in the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runplane.demo import DemoConfig, run_demo
from tests.e2e.test_demo import RecordingReporter, demo_config, stack  # noqa: F401 (fixtures)
from tests.helpers.doc_blocks import ROOT, shell_blocks

pytestmark = pytest.mark.timeout(420)


def _shell_env(config: DemoConfig) -> dict[str, str]:
    settings = config.settings
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("RUNPLANE_") or k == "RUNPLANE_BOOTSTRAP_SERVERS"
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["RUNPLANE_TOPIC_PREFIX"] = settings.topic_prefix
    env["RUNPLANE_STATE_DIR"] = str(settings.state_dir)
    env["RUNPLANE_REDIS_URL"] = settings.redis_url
    env["RUNPLANE_BOOTSTRAP_SERVERS"] = settings.bootstrap_servers
    for service in ("admission", "journal", "worklist"):
        env[f"RUNPLANE_{service.upper()}_URL"] = config.ports.url(service)
    return env


def test_readme_blocks_run_as_written(demo_config: DemoConfig, tmp_path: Path) -> None:  # noqa: F811
    reporter = RecordingReporter()
    outcome = run_demo(demo_config, reporter)
    assert outcome.ok, f"{outcome.problems()}\n" + "\n".join(reporter.lines)

    blocks = [b for b in shell_blocks("README.md") if b.marker == "run"]
    assert blocks
    script = ["set -euo pipefail"]
    for b in blocks:
        script += [f"echo '== {b.where}' >&2", "set -x", b.text, "set +x"]
    home = tmp_path / "reader"
    home.mkdir()
    (home / "examples").symlink_to(ROOT / "examples")
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=home,
        env=_shell_env(demo_config),
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-6000:]
    assert "Traceback" not in said
    assert "AWAITING_HUMAN" in said  # runs show order-17: the refund waits for its approval
    assert (home / "runs.json").exists()  # journal export wrote where the reader stands
