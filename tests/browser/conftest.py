"""Fixtures for browser tests: the real stack, a fresh topic prefix, headless Debian Chromium.

Chromium is the system package (``/usr/bin/chromium``; ``.ci/run`` installs it), driven by
Playwright's Python client with ``executable_path`` — Playwright's own browser downloads are
never used. Screenshots go to ``test-output/`` at the repository root.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runplane.config import Settings
from runplane.kafka.clients import admin
from runplane.kafka.topics import create_topics, delete_topics
from runplane.stack import StackError, ensure_up

REPO_ROOT = Path(__file__).resolve().parents[2]
# The worklist's stack helpers live beside its integration tests; import them under the
# same module name those tests use, so there is one copy of the module.
sys.path.insert(0, str(REPO_ROOT / "tests" / "integration"))
CHROMIUM = os.environ.get("RUNPLANE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def output_dir() -> Path:
    out = REPO_ROOT / "test-output"
    out.mkdir(exist_ok=True)
    return out


@pytest.fixture
def stack_settings() -> Iterator[Settings]:
    try:
        stack = ensure_up(Settings.from_env(), root=REPO_ROOT)
    except StackError as exc:
        pytest.fail(f"the local stack is not available: {exc}", pytrace=False)
    tag = uuid.uuid4().hex[:8]
    settings = dataclasses.replace(
        stack.settings, topic_prefix=f"b{tag}.", instance_id=f"browser-{tag}"
    )
    client = admin(settings)
    create_topics(settings, client)
    yield settings
    if not os.environ.get("RUNPLANE_TEST_KEEP_TOPICS"):
        delete_topics(settings, client)


@pytest.fixture
def chromium() -> Iterator[object]:
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()
