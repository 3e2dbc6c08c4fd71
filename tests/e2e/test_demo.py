"""``runplane demo`` end to end on the real stack: every example run completes and verifies.

The demo logic runs in-process with its own topic prefix, instance id, state dir and free
ports, so it neither meets a developer's ``make demo`` nor another test. The platform it starts
(the loopback fakes and ``runplane serve all``) are real processes; ``runplane down`` on the
test's state dir must stop them and leave the shared Kafka and Redis running (they are not
ours from that state dir).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import socket
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from runplane.config import SERVICE_PORTS, Settings
from runplane.demo import (
    PUBLISHED_TOKENS,
    DemoConfig,
    DemoOutcome,
    DemoPorts,
    default_calendars_file,
    default_principals_file,
    run_demo,
)
from runplane.fakes import read_counts
from runplane.kafka.clients import admin
from runplane.kafka.topics import delete_topics
from runplane.runs.read import RunHistory
from runplane.stack import LocalStack, StackError, down, ensure_up, status
from runplane.stack.platform import owned
from runplane.stack.process import is_alive, port_bindable

pytestmark = pytest.mark.timeout(240)

REPO_ROOT = Path(__file__).resolve().parents[2]


class RecordingReporter:
    """Keeps what the demo says, for assertions and for the failure message."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.statuses: list[tuple[str, str, str | None, str | None]] = []
        self.journals: dict[str, tuple[RunHistory, int]] = {}

    @contextlib.contextmanager
    def progress(self, title: str) -> Iterator[Any]:
        self.lines.append(f"[progress] {title}")
        yield lambda msg: None

    def note(self, text: str) -> None:
        self.lines.append(text)

    def run_status(self, capability: str, run_id: str, old: str | None, new: str | None) -> None:
        self.statuses.append((capability, run_id, old, new))

    def journal(
        self, capability: str, history: RunHistory, verdict: Mapping[str, Any], code: int
    ) -> None:
        self.journals[history.run_id] = (history, code)


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture(scope="module")
def stack() -> LocalStack:
    try:
        return ensure_up(Settings.from_env(), root=REPO_ROOT)
    except StackError as exc:
        pytest.fail(f"the local stack is not available: {exc}", pytrace=False)


@pytest.fixture
def demo_config(stack: LocalStack, tmp_path: Path) -> Iterator[DemoConfig]:
    tag = uuid.uuid4().hex[:8]
    settings = dataclasses.replace(
        stack.settings,
        topic_prefix=f"e2e{tag}.",
        instance_id=f"e2e-demo-{tag}",
        state_dir=tmp_path / "state",
    )
    ports = _free_ports(len(SERVICE_PORTS) + 2)
    config = DemoConfig(
        settings=settings,
        ports=DemoPorts(
            services=dict(zip(SERVICE_PORTS, ports, strict=False)),
            billing=ports[-2],
            openai=ports[-1],
        ),
        nonce=tag,
        health_timeout_s=120,
        run_timeout_s=90,
        calendars_file=default_calendars_file(),
        examples_principals=default_principals_file(),
    )
    try:
        yield config
    finally:
        down(config.stack)
        delete_topics(settings, admin(settings))


def _assert_all_completed_and_verified(outcome: DemoOutcome, reporter: RecordingReporter) -> None:
    assert outcome.ok, f"{outcome.problems()}\n" + "\n".join(reporter.lines)
    assert [r.capability for r in outcome.runs] == ["refund", "triage", "support", "support"]
    for r in outcome.runs:
        assert r.run_id is not None and r.status == "COMPLETED" and r.verified
        history, code = reporter.journals[r.run_id]
        assert code == 0
        assert history.records[-1].kind == "RUN_COMPLETED"
        assert r.records == len(history.records) > 2


def test_demo_completes_and_verifies_every_run_and_down_stops_the_platform(
    demo_config: DemoConfig, tmp_path: Path
) -> None:
    reporter = RecordingReporter()
    outcome = run_demo(demo_config, reporter)
    _assert_all_completed_and_verified(outcome, reporter)
    # The services got examples/principals.yaml; the demo approved with its published token.
    assert any(f"principals: {default_principals_file()}" in line for line in reporter.lines)
    assert any(PUBLISHED_TOKENS["ada"] in line for line in reporter.lines)
    assert all(r.admission == "ADMITTED" for r in outcome.runs)

    refund = outcome.runs[0]
    # The refund waited for a person and was approved through the worklist API.
    assert (refund.capability, refund.run_id, "AWAITING_HUMAN") in {
        (c, r, new) for c, r, _, new in reporter.statuses
    }
    assert any("approved" in line and str(refund.run_id) in line for line in reporter.lines)
    # The support agent's loop: the honest e-mail refunded once; the injected e-mail's refund
    # to the attacker refused by the sink gate, the real refund still made once.
    honest, attacked = outcome.runs[2], outcome.runs[3]
    assert (honest.injected, attacked.injected) == (False, True)
    said = "\n".join(reporter.lines)
    assert f"support (honest e-mail) {honest.run_id}: 1 refund performed, 0 refused" in said
    assert f"support (injected e-mail) {attacked.run_id}: 1 refund performed, 1 refused" in said
    refused = [
        r
        for r in reporter.journals[str(attacked.run_id)][0].records
        if r.name == "tool://refund" and r.attrs.get("gate") == "refused"
    ]
    assert [(r.attrs["path"], r.attrs["reason"]) for r in refused] == [
        ("$.recipient", "field_trust")
    ]
    # Exactly one charge reached billing, under the run's idempotency key.
    counts = read_counts(demo_config.demo_dir / "billing-counts.json")
    assert counts.charges == {f"refund/{refund.run_id}": 1}

    # Again, on the running platform: new keys, new runs, reusing the processes.
    again = dataclasses.replace(demo_config, nonce=uuid.uuid4().hex[:8])
    reporter2 = RecordingReporter()
    outcome2 = run_demo(again, reporter2)
    _assert_all_completed_and_verified(outcome2, reporter2)
    assert {r.run_id for r in outcome2.runs}.isdisjoint({r.run_id for r in outcome.runs})
    assert any("already running" in line for line in reporter2.lines)

    # The first invocation's keys again: duplicates, shown as such, naming the original runs.
    reporter3 = RecordingReporter()
    outcome3 = run_demo(demo_config, reporter3)
    assert [r.admission for r in outcome3.runs] == ["DUPLICATE"] * 4
    assert [r.run_id for r in outcome3.runs] == [r.run_id for r in outcome.runs]
    _assert_all_completed_and_verified(outcome3, reporter3)
    assert read_counts(demo_config.demo_dir / "billing-counts.json").charges == {
        f"refund/{r.run_id}": 1 for r in (outcome.runs[0], outcome2.runs[0])
    }

    # status shows the platform; down stops it and leaves the shared Kafka/Redis alone.
    seen = status(demo_config.stack)
    pids = {c.name: c.pid for c in seen.components if not c.required}
    assert set(pids) == {"services", "billing", "openai"}
    assert all(c.state == "running" for c in seen.components if not c.required)
    # Ownership needs this state dir in the process's environment, not just its pid file:
    # the same pid and note copied under another state dir do not make it that dir's process.
    other = dataclasses.replace(demo_config.stack, state_dir=tmp_path / "other")
    other.run_dir.mkdir(parents=True)
    for name in ("services.pid", "services.json"):
        shutil.copy(demo_config.stack.run_dir / name, other.run_dir / name)
    assert owned(demo_config.stack, "services") == pids["services"]
    assert owned(other, "services") is None
    stopped = down(demo_config.stack)
    assert {c.name for c in stopped.components if not c.required} == {
        "services",
        "billing",
        "openai",
    }
    assert not any(is_alive(p) for p in pids.values() if p is not None)
    assert all(port_bindable("127.0.0.1", p) for p in demo_config.ports.services.values())
    assert stopped.component("kafka").action == "not ours, left running"
    assert status(demo_config.stack).ready


def test_manual_demo_waits_for_a_person_to_decide_on_the_worklist(demo_config: DemoConfig) -> None:
    import json
    import threading
    import time

    import httpx

    # Without the examples file: the demo makes principals and tokens of its own.
    config = dataclasses.replace(
        demo_config, manual=True, manual_timeout_s=90, examples_principals=None
    )
    reporter = RecordingReporter()
    outcome: list[DemoOutcome] = []
    errors: list[BaseException] = []

    def demo() -> None:
        try:
            outcome.append(run_demo(config, reporter))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=demo, daemon=True)
    thread.start()
    deadline = time.monotonic() + 150
    waiting = None
    while waiting is None and not errors and time.monotonic() < deadline:
        waiting = next(
            (r for c, r, _, new in reporter.statuses if c == "refund" and new == "AWAITING_HUMAN"),
            None,
        )
        time.sleep(0.2)
    assert waiting is not None, f"{errors} " + "\n".join(reporter.lines)
    time.sleep(2)  # the demo must not decide on its own
    assert not any("approved" in line for line in reporter.lines)
    assert any(
        f"waits for a person: open {config.worklist_page}" in line for line in reporter.lines
    )

    # A person (grace, not the demo's approver) decides on the worklist.
    grace = json.loads(config.tokens_file.read_text())["grace"]
    assert grace != PUBLISHED_TOKENS["grace"]
    headers = {"Authorization": f"Bearer {grace}"}
    with httpx.Client(base_url=config.ports.url("worklist"), headers=headers, timeout=30) as http:
        tasks = http.get("/api/tasks", params={"status": "OPEN"}).json()["tasks"]
        task = next(t for t in tasks if t["session_id"] == waiting)
        answer = http.post(
            f"/api/tasks/{task['task_id']}/decide",
            json={"decision": "approve", "comment": "by hand"},
        )
        assert answer.status_code == 200, answer.text

    thread.join(120)
    assert not errors, errors
    _assert_all_completed_and_verified(outcome[0], reporter)
    refund = reporter.journals[waiting][0]
    decided = next(r for r in refund.records if r.kind == "TASK_DECIDED")
    body = refund.bodies[(decided.era, decided.call_seq or 0)]
    assert body is not None and json.loads(body.value_json or "{}")["decided_by"] == ["grace"]
    assert read_counts(config.demo_dir / "billing-counts.json").charges == {f"refund/{waiting}": 1}
