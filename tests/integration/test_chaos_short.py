"""The chaos suite's short version (``make test``): a few dozen refund runs through admission,
three executors, approvals by script, and random SIGKILLs and restarts of every service. The
promises are checked from Kafka alone afterwards (``tests/chaos/chaos.py``); the full suite with
broker faults on a three-broker cluster is ``make chaos``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runplane.config import Settings
from tests.chaos.chaos import run

pytestmark = pytest.mark.integration


def test_short_chaos_keeps_every_promise(settings: Settings, tmp_path: Path) -> None:
    figures = run(
        settings,
        runs=30,
        executors=3,
        chaos_seconds=40.0,
        kill_every_s=5.0,
        settle_timeout_s=120.0,
        logs=tmp_path,
        say=print,
    )
    print(figures.markdown())
    assert sum(figures.service_kills.values()) >= 3  # the faults did happen
    assert figures.runs == 30 and not figures.lost, figures.lost
    assert not figures.double_admissions, figures.double_admissions
    assert not figures.charged_twice, figures.charged_twice
    assert not figures.broken_chains, figures.broken_chains
    assert not figures.in_doubt_unresolved, figures.in_doubt_unresolved
