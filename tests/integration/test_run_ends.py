"""A run's end as a newcomer sees it, against the real stack: ``Client.admit(wait=True)``
returns the final status (CANCELLED, not ADMITTED) with what it ended with, and ``journal
show`` finds the run by its admission key and shows its input and how it ended."""

from __future__ import annotations

import json
import threading

import pytest
from typer.testing import CliRunner

from runplane.cli import app
from runplane.config import Settings
from runplane.runs.client import Client, RunResult
from runplane.wire import RunStatus
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import executor_thread, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

MODULES = ("examples.operate",)


def test_admit_and_wait_returns_cancelled_and_journal_show_finds_it_by_key(
    settings: Settings,
) -> None:
    from test_admission import running

    from runplane.core.agents import import_agent_modules
    from services.admission.serve import build, capabilities_from
    from services.admission.settings import AdmissionSettings

    caps = capabilities_from(import_agent_modules(MODULES))
    admission = build(AdmissionSettings(base=settings, allow_unsigned=True), capabilities=caps)
    own = ExecutorSettings(base=settings, agent_modules=MODULES)
    key = f"order-{settings.instance_id}"
    ended: list[RunResult] = []

    def emitter() -> None:
        with Client(settings) as client:
            ended.append(
                client.admit(
                    "await_payment",
                    key,
                    {"sku": "lamp"},
                    tenant="acme",
                    initiator="emitter",
                    wait=True,
                    wait_timeout=120,
                )
            )

    with running(admission), executor_thread(own), Client(settings) as operator:
        waiting = threading.Thread(target=emitter)
        waiting.start()

        def parked() -> bool:
            return any(
                s.admission_key == key and s.status is RunStatus.PARKED
                for s in sessions(settings).values()
            )

        wait_for(parked, timeout_s=60)
        operator.cancel(key, reason="customer withdrew", sent_by="ops", tenant="acme")
        waiting.join(120)
    [result] = ended
    assert result.status is RunStatus.CANCELLED, result.snapshot
    assert result.error is not None and result.error.message == "customer withdrew"
    assert result.output is None and result.run_id is not None

    env = {
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "RUNPLANE_TENANT": "acme",  # an admission key is the tenant's (claims per tenant)
    }
    shown = CliRunner().invoke(app, ["journal", "show", key, "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert data["run_id"] == result.run_id and data["input"] == {"sku": "lamp"}
    assert data["error"]["type"] == "RunCancelled"
    assert data["records"][-1]["kind"] == "RUN_CANCELLED"
