"""A Pydantic AI agent on the real broker, through ``runplane.contrib.pydantic_ai``: the stock
executor serves it (``RUNPLANE_AGENT_MODULES``: its tools and its model provider registered
by the module), the model is Pydantic AI's own ``FunctionModel``, and every tool is a Python
function calling a counting HTTP peer (``loop_broker.ToolServer``), so a count survives a
SIGKILL. The four-turn run is killed twice with ``kill -9`` — each time a (slow) read is in
flight — and finished by a third process: no recorded call is repeated (only the two in
flight at a kill reach their tool again), the refund is made once, the chain verifies, and a
replay of the recorded run makes no live call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from executor_process_support import ExecutorProcess

from runplane.config import Settings
from runplane.core import AgentRegistry, replay_history, verify_chain
from runplane.providers import ModelRegistry, ToolRegistry
from runplane.wire import JournalKind, RunStatus, Trust
from tests.helpers import loop_broker as L
from tests.helpers import pydantic_support as P
from tests.helpers.harness import admit, chain_of, plain_producer, sessions, wait_ended
from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CRM = P.call_key("crm_lookup", {"customer_id": "c-1"})
DOC = P.call_key("fetch_document", {"document_id": "d-9"})
ORDER = P.call_key("order_status", {"order": "o-1"})
REFUND = P.call_key("refund", P.REFUND)


@pytest.fixture
def tools() -> Iterator[L.ToolServer]:
    with L.ToolServer(delay_s=1.5) as server:
        server.slow = {CRM, ORDER}
        yield server


def _executor(settings: Settings, n: int, tools: L.ToolServer, logs: Path) -> ExecutorProcess:
    config = logs / "tools.yaml"
    config.write_text("tools: []\nmodels: []\n")
    env = {
        "RUNPLANE_AGENT_MODULES": "tests.helpers.pydantic_support_served",
        "RUNPLANE_TOOLS_CONFIG": str(config),
        "RUNPLANE_EXECUTOR_BATCH_MS": "5",
        "PYDAI_TOOLS_URL": tools.url,
    }
    return ExecutorProcess(settings, f"p{n}", logs, env)


def test_two_sigkills_repeat_no_recorded_call_and_the_run_completes(
    settings: Settings, tools: L.ToolServer, tmp_path: Path
) -> None:
    procs: list[ExecutorProcess] = []

    def start() -> ExecutorProcess:
        procs.append(_executor(settings, len(procs), tools, tmp_path))
        return procs[-1]

    def kill_when_in_flight(proc: ExecutorProcess, key: str) -> None:
        wait_for(lambda: tools.in_flight[key] > 0, timeout_s=90, every_s=0.002, what=key)
        proc.kill()
        proc.proc.wait(10)

    try:
        a = start()
        [run] = admit(plain_producer(settings), settings, "pydai.support", [{"customer_id": "c-1"}])
        kill_when_in_flight(a, CRM)  # turn 1's first read in flight
        b = start()
        kill_when_in_flight(b, ORDER)  # turn 3's read in flight, the refund made before it
        start()

        wait_ended(
            settings,
            run.run_id,
            timeout_s=120,
            every_s=0.3,
            what="the run to end on the third executor",
        )
    finally:
        for p in procs:
            p.stop()

    snap = sessions(settings)[run.run_id]
    assert snap.status is RunStatus.COMPLETED, snap.error
    out = json.loads(snap.output_json or "null")
    assert out["answer"] == P.ANSWER

    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    recorded = [r for r in records if r.kind is JournalKind.EFFECT_RECORDED]
    assert sum(r.family == "generation" for r in recorded) == 4
    assert [r.name for r in recorded if r.family == "tool"] == [
        "tool://crm_lookup",
        "tool://fetch_document",
        "tool://refund",
        "tool://order_status",
    ]
    # Counted at the tool: the two reads in flight at a kill reached it twice (in doubt,
    # recovery retry), every other call once — the refund exactly once.
    assert dict(tools.hits) == {CRM: 2, DOC: 1, REFUND: 1, ORDER: 2}

    # A replay of the recorded run calls nobody and ends where the run ended.
    agents = AgentRegistry()
    P.build(agents, ToolRegistry(), ModelRegistry())
    report = replay_history(agents.spec("pydai.support"), snap, results)
    assert report.divergence is None and report.live_calls == 0
    assert report.output == out


def test_the_injected_refund_is_refused_on_the_broker_and_never_reaches_the_tool(
    settings: Settings, tools: L.ToolServer, tmp_path: Path
) -> None:
    # No deployment policy: the document is untrusted by the DurableAgent's own declaration
    # (its @tool label, applied by the executor when it records the result).
    tools.slow = set()
    proc = _executor(settings, 0, tools, tmp_path)
    try:
        [run] = admit(
            plain_producer(settings),
            settings,
            "pydai.support",
            [{"customer_id": "c-1", "obedient": True}],
        )

        wait_ended(settings, run.run_id, timeout_s=90, every_s=0.3, what="the obedient run to end")
    finally:
        proc.stop()
    snap = sessions(settings)[run.run_id]
    assert snap.status is RunStatus.COMPLETED, snap.error
    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    refused = [e for e in results.values() if e.family == "tool" and e.error is not None]
    assert [(e.name, e.error.type) for e in refused if e.error] == [
        ("tool://refund", "SinkRefused")
    ]
    assert not any(P.ATTACKER in key for key in tools.hits)
    assert tools.hits[REFUND] == 1
    doc = next(e for e in results.values() if e.name == "tool://fetch_document")
    assert doc.label is not None and doc.label.trust is Trust.UNTRUSTED
