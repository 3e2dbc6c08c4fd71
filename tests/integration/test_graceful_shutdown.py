"""SIGTERM under load and mid-rebalance: every stop is clean (exit 0, within the bound).

Admission serves a burst while a second instance joins and is stopped again and again, at
random moments of its join (the group rebalancing, the previous owner's transaction waited
for, tables restoring) — where an instance once exited -15. Afterwards every key still has
exactly one run. The executor and the journal service are stopped mid-join too. Each stop
must end within the documented bound (runplane.serving.shutdown: RUNPLANE_SHUTDOWN_GRACE_S); the
test waits a little longer than the bound, so a stuck stop fails it instead of hanging.
"""

from __future__ import annotations

import functools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_admission import check_one_run_per_key, committed_replies, emit_interleaved

from runplane.config import Settings
from tests.helpers.waiting import wait_for

RUNPLANE = Path(sys.executable).with_name("runplane")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GRACE_S = 15.0  # the bound each service is held to (RUNPLANE_SHUTDOWN_GRACE_S)
CYCLES = 4


class Served:
    """A `runplane serve NAME` subprocess whose stderr is collected as it comes."""

    def __init__(self, settings: Settings, name: str, instance: str) -> None:
        env = {
            **os.environ,
            "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
            "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
            "RUNPLANE_PARTITIONS": str(settings.partitions),
            "RUNPLANE_INSTANCE_ID": instance,
            "RUNPLANE_AGENT_MODULES": "examples.refund",
            "RUNPLANE_ADMISSION_BATCH_MAX": "50",
            "RUNPLANE_ADMISSION_ALLOW_UNSIGNED": "true",
            # refund names the billing tools; admission refuses a run whose tools are not offered.
            "RUNPLANE_TOOLS_CONFIG": str(EXAMPLES / "tools" / "billing.yaml"),
            "RUNPLANE_SHUTDOWN_GRACE_S": str(GRACE_S),
            "RUNPLANE_LOG_LEVEL": "INFO",
            **{f"RUNPLANE_{n.upper()}_PORT": "0" for n in ("admission", "executor", "journal")},
        }
        self.proc = subprocess.Popen(
            [str(RUNPLANE), "serve", name],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.lines.append(raw.decode(errors="replace"))

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def stop(self) -> tuple[int, float, str]:
        """SIGTERM; (exit code, seconds to exit, the end of stderr). Killed past the bound."""
        started = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=GRACE_S + 10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        return self.proc.returncode, time.monotonic() - started, "".join(self.lines)[-3000:]


def test_admission_stopped_repeatedly_mid_rebalance_during_bursts(settings: Settings) -> None:
    keys = [f"term-{i}" for i in range(300)]
    steady = Served(settings, "admission", "adm-a")
    producer = threading.Thread(
        target=emit_interleaved, args=(settings, keys, 2), kwargs={"pause_every": 40}
    )
    producer.start()
    rng = random.Random(18)
    try:
        wait_for(
            lambda: len(committed_replies(settings)) >= 20, what="the first replies", timeout_s=60
        )
        for cycle in range(CYCLES):
            joiner = Served(settings, "admission", "adm-b")
            subscribed = functools.partial(joiner.said, "processor started")
            # "processor started" is logged right after subscribe: the join is under way.
            wait_for(subscribed, what="the joiner to subscribe", timeout_s=60)
            time.sleep(rng.uniform(0.0, 1.0) if cycle else 0.0)
            code, _, err = joiner.stop()
            assert code == 0, f"cycle {cycle}: exit {code}\n{err}"
        producer.join(120)
        wait_for(lambda: len(committed_replies(settings)) >= 600, what="600 replies", timeout_s=90)
    finally:
        code, _, err = steady.stop()
    assert code == 0, err
    check_one_run_per_key(settings, keys, requests_per_key=2)


@pytest.mark.parametrize("service", ["executor", "journal"])
def test_loop_stopped_mid_rebalance_exits_cleanly(settings: Settings, service: str) -> None:
    steady = Served(settings, service, f"{service}-a")
    try:
        wait_for(
            lambda: steady.said("partitions assigned"), what="the first assignment", timeout_s=60
        )
        joiner = Served(settings, service, f"{service}-b")
        wait_for(lambda: joiner.said("http listening"), what="the joiner to start", timeout_s=60)
        code, _, err = joiner.stop()
        assert code == 0, err
    finally:
        code, _, err = steady.stop()
    assert code == 0, err
