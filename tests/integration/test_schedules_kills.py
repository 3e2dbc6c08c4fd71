"""Schedules on the real broker: a schedule ticking every 2 s survives its sweeper SIGKILLed
twice — 0 ticks missed within the catch-up rule (``each``), 0 ticks run twice (runs counted by
admission key, from admission's claims and replies) — and a tick admission refuses is visible
(on ``schedules.fired`` and in ``deadletter``), not lost.

The sweeper runs as its own process (``runplane serve sweeper``), admission in this one; the
schedules are written and listed with the CLI, as an operator would.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import pytest
from confluent_kafka import Producer
from test_admission import running
from test_cases_support import redis_url
from test_processor import read_all

from runplane.config import Settings
from runplane.core.schedules import parse_tick_key, schedule_key
from runplane.kafka.clients import producer_config
from runplane.wire import (
    AdmissionClaim,
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    DeadLetter,
    ScheduleFired,
    serde_for,
)
from services.admission.decide import CapabilitySpec
from services.admission.serve import build
from services.admission.settings import AdmissionSettings
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
REDIS_DB = 12
CAPS = {"beat": CapabilitySpec({"type": "object"})}
EVERY_MS = 2_000


def env_for(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "libs"), str(ROOT)]),
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_PARTITIONS": str(settings.partitions),
        "RUNPLANE_INITIATOR": "olga",
    }


def cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from runplane.cli import main; main()", "schedules", *args],
        env=env_for(settings),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


class SweeperProcess:
    def __init__(self, settings: Settings, instance: str, logs: Path) -> None:
        env = {
            **env_for(settings),
            "RUNPLANE_INSTANCE_ID": f"{settings.instance_id}-{instance}",
            "RUNPLANE_REDIS_URL": redis_url(REDIS_DB),
            "RUNPLANE_SWEEPER_PORT": "0",
            "RUNPLANE_SWEEPER_TICK_MS": "300",
            "RUNPLANE_LOG_LEVEL": "WARNING",
            # Faust's own knob: a SIGKILLed member leaves the group in 10 s, not 60.
            "BROKER_SESSION_TIMEOUT": "10",
        }
        self._log: IO[bytes] = (logs / f"sweeper-{instance}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from runplane.cli import main; main()", "serve", "sweeper"],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if not self._log.closed:
            self._log.close()


def expected_ticks(row: dict[str, Any], state: ScheduleFired) -> set[int]:
    """Every tick of an interval schedule after its creation, up to how far it has fired."""
    first = row["anchor_ms"] + EVERY_MS
    return {t for t in range(first, state.through_ms + 1, EVERY_MS) if t > row["since_ms"]}


def rewind(settings: Settings, key: str, record: ScheduleFired) -> None:
    producer = Producer(producer_config(settings))
    value = serde_for(settings).encode("schedules.fired", record)
    producer.produce(settings.topic("schedules.fired"), key=key.encode(), value=value)
    assert producer.flush(30) == 0


def fired(settings: Settings, *, deleted: bool = False) -> dict[str, ScheduleFired]:
    """Each schedule's last progress record (``deleted``: also those tombstoned since)."""
    out: dict[str, ScheduleFired] = {}
    for key, value in read_all(settings, "schedules.fired"):
        if isinstance(value, ScheduleFired):
            out[key] = value
        elif value is None and not deleted:
            out.pop(key, None)
    return out


def admitted_ticks(settings: Settings, name: str) -> collections.Counter[int]:
    """Tick → how many ADMITTED replies admission gave its key (a run each)."""
    out: collections.Counter[int] = collections.Counter()
    for _, reply in read_all(settings, "admission.replies"):
        if isinstance(reply, AdmissionReply) and reply.outcome is AdmissionOutcome.ADMITTED:
            parsed = parse_tick_key(reply.admission_key)
            if parsed is not None and parsed[1] == name:
                out[parsed[2]] += 1
    return out


def test_a_schedule_survives_its_sweeper_sigkilled_twice(
    settings: Settings, tmp_path: Path
) -> None:
    for args in (
        ("create", "beat", "--capability", "beat", "--every", "2s", "--catch-up", "each",
         "--catch-up-max", "200", "--input", '{"n": 1}'),
        ("create", "lost", "--capability", "nobody-serves-this", "--every", "2s"),
    ):  # fmt: skip
        done = cli(settings, *args)
        assert done.returncode == 0, done.stderr
    bad = cli(settings, "create", "beat", "--capability", "beat", "--every", "2s")
    assert bad.returncode == 1 and "exists" in bad.stderr
    listed = cli(settings, "list", "--json", "--next", "3")
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert set(rows) == {"beat", "lost"}
    nexts = rows["beat"]["next_ms"]
    assert len(nexts) == 3 and all(b - a == EVERY_MS for a, b in itertools.pairwise(nexts))

    beat = schedule_key("default", "beat")
    lost = schedule_key("default", "lost")
    with running(build(AdmissionSettings(base=settings, allow_unsigned=True), capabilities=CAPS)):
        sweeper = SweeperProcess(settings, "a", tmp_path)
        try:
            for round_, instance in enumerate(("b", "c")):
                target = 3 * (round_ + 1)
                wait_for(
                    lambda t=target: (
                        fired(settings).get(beat, None) is not None
                        and fired(settings)[beat].fired >= t
                    ),
                    what=f"{target} ticks fired",
                    timeout_s=90,
                )
                sweeper.kill()
                if instance == "c":
                    # As if this sweeper had died after sending its last three ticks and before
                    # recording them: the next one sends them again, admission says DUPLICATE.
                    behind = fired(settings)[beat]
                    rewind(settings, beat, replace(behind, through_ms=behind.through_ms - 6_000))
                time.sleep(5)  # down for a few ticks: they are caught up after the restart
                sweeper = SweeperProcess(settings, instance, tmp_path)
            wait_for(
                lambda: fired(settings)[beat].fired >= 12,
                what="ticks after two kills",
                timeout_s=120,
            )
            paused = cli(settings, "pause", "beat")
            assert paused.returncode == 0, paused.stderr
            deleted = cli(settings, "delete", "lost")
            assert deleted.returncode == 0, deleted.stderr
            time.sleep(3)  # the pause is read within a sweep; nothing more fires
            expected = expected_ticks(rows["beat"], fired(settings)[beat])
            with contextlib.suppress(TimeoutError):  # the asserts below say what is missing
                wait_for(
                    lambda: admitted_ticks(settings, "beat").keys() >= expected,
                    what="every tick behind the schedule answered",
                    timeout_s=30,
                )
        finally:
            sweeper.stop()

    state = fired(settings)[beat]
    assert expected_ticks(rows["beat"], state) == expected  # paused: nothing fired since
    rows_after = {r["name"]: r for r in json.loads(cli(settings, "list", "--json").stdout)}
    assert rows_after["beat"]["paused"] and rows_after["beat"]["next"] == []
    assert rows_after["beat"]["fired"]["through_ms"] == state.through_ms
    runs = admitted_ticks(settings, "beat")
    missed = sorted(expected - set(runs))
    twice = sorted(t for t, n in runs.items() if n > 1)
    assert state.skipped == 0
    assert missed == [], f"ticks missed: {missed}"
    assert twice == [], f"ticks run twice: {twice}"
    assert set(runs) == expected  # nothing outside the timetable either
    # One claim per tick key: admission's table agrees, whatever was re-sent after the kills.
    claims = collections.Counter(
        k for k, v in read_all(settings, "admission.claims") if isinstance(v, AdmissionClaim)
    )
    assert all(n == 1 for k, n in claims.items() if parse_tick_key(k) is not None)
    sent = collections.Counter(
        v.admission_key
        for _, v in read_all(settings, "admission")
        if isinstance(v, AdmissionRequest) and "/beat/" in v.admission_key
    )
    assert len(sent) == len(expected)
    assert sent.total() - len(sent) >= 3  # the rewound ticks were sent again, and ran once
    print(f"ticks {len(expected)}, requests {sent.total()} (re-sent after kills: "
          f"{sent.total() - len(sent)}), runs {runs.total()}")  # fmt: skip

    # The refused schedule: visible on its progress record (until it was deleted: then its
    # progress is a tombstone too) and in deadletter.
    assert lost not in fired(settings) and "lost" not in rows_after
    gone = fired(settings, deleted=True)[lost]
    assert gone.refused >= 1 and gone.last_outcome == "REFUSED"
    assert gone.last_refusal and "nobody-serves-this" in gone.last_refusal
    letters = [
        v
        for _, v in read_all(settings, "deadletter")
        if isinstance(v, DeadLetter) and v.service == "sweeper" and "default/lost" in v.reason
    ]
    assert letters, "no dead letter for a refused tick"
