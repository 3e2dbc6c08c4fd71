"""README's shell blocks marked ``<!-- test: run -->``, run as written, in order, in one shell
(tests/helpers/doc_blocks.py says how a block is marked; tests/unit/test_doc_blocks.py that
every block is). Among them: the virtualenv's activation, `runplane demo` with the quote
example beside the examples, a quote run, the refund `order-17`, and looking at it.

Nothing in a block is substituted. The shell only finds the test's own platform where a
reader's finds the demo's: the environment names the test's topic prefix, state dir and free
ports with the variables the CLI and the demo read (``RUNPLANE_TOPIC_PREFIX``,
``RUNPLANE_STATE_DIR``, ``RUNPLANE_<SERVICE>_PORT``, ``RUNPLANE_DEMO_*_PORT``,
``RUNPLANE_*_URL``), so it meets neither a developer's `make demo` nor another test. The shell
starts in a directory standing for the clone's: its ``examples/`` and ``.venv`` are the
repository's, and the files a block writes land there, not in the repository.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runplane.config import SERVICE_PORTS, Settings
from runplane.kafka.clients import admin
from runplane.kafka.topics import delete_topics
from runplane.stack import StackConfig, StackError, down, ensure_up
from tests.helpers.doc_blocks import ROOT, shell_blocks

pytestmark = pytest.mark.timeout(600)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """The reader's directory and the environment of their shell; the platform the blocks
    start is stopped and its topics dropped afterwards."""
    try:
        stack = ensure_up(Settings.from_env(), root=ROOT)
    except StackError as exc:
        pytest.fail(f"the local stack is not available: {exc}", pytrace=False)
    tag = uuid.uuid4().hex[:8]
    home = tmp_path / "clone"
    home.mkdir()
    (home / "examples").symlink_to(ROOT / "examples")
    (home / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPLANE_", "FX_API_"))}
    ports = _free_ports(len(SERVICE_PORTS) + 2)
    env |= {
        "RUNPLANE_BOOTSTRAP_SERVERS": stack.settings.bootstrap_servers,
        "RUNPLANE_REDIS_URL": stack.settings.redis_url,
        "RUNPLANE_TOPIC_PREFIX": f"readme{tag}.",
        "RUNPLANE_STATE_DIR": str(tmp_path / "state"),
        "RUNPLANE_INSTANCE_ID": f"readme-{tag}",
        "RUNPLANE_DEMO_BILLING_PORT": str(ports[-2]),
        "RUNPLANE_DEMO_OPENAI_PORT": str(ports[-1]),
    }
    for name, port in zip(SERVICE_PORTS, ports, strict=False):
        env[f"RUNPLANE_{name.upper()}_PORT"] = str(port)
        env[f"RUNPLANE_{name.upper()}_URL"] = f"http://127.0.0.1:{port}"
    try:
        yield home, env
    finally:
        settings = Settings.from_env(env)
        down(StackConfig.from_settings(settings))
        delete_topics(settings, admin(settings))


def test_readme_blocks_run_as_written(reader: tuple[Path, dict[str, str]]) -> None:
    home, env = reader
    blocks = [b for b in shell_blocks("README.md") if b.marker == "run"]
    assert blocks
    script = ["set -eo pipefail"]
    for b in blocks:
        script += [f"echo '== {b.where}' >&2", "set -x", b.text, "set +x"]
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-8000:]
    assert "Traceback" not in said
    assert 'output {"amount":108,"currency":"USD","delivery_days":2}' in said  # the quote
    assert "AWAITING_HUMAN" in said  # runs show order-17: the refund waits for its approval
    assert (home / "runs.json").exists()  # journal export wrote where the reader stands
