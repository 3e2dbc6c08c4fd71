"""An OpenAI Agents SDK agent on the real broker (issue 29, done means): the support agent of
``tests.helpers.openai_agents_support`` run by ``runplane.contrib.openai_agents`` in the stock
executor process (``RUNPLANE_AGENT_MODULES``), its model the OpenAI-compatible fake over HTTP
(runplane's ``openai`` provider) scripted with the agent loop's six turns, its tools HTTP tools
against a counting peer (``tests.helpers.loop_broker``).

One run, the executor SIGKILLed twice — mid fan-out (turn 2's slow read in flight) and after
the refund (turn 5's slow read in flight) — and finished by a third process: the run
completes; counted at the tool, no recorded call is performed again (the reads whose outcome
a kill lost reach their tool twice, every other call once, the refund and the note once); every call that
reached a tool is announced on the journal; the chain verifies; a replay of the recorded run
in this process calls no model and no tool.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from executor_process_support import ExecutorProcess
from test_agent_loop_kills import _kill_when

from runplane.config import Settings
from runplane.core import AgentRegistry, replay_history, verify_chain
from runplane.fakes import FakeOpenAIServer
from runplane.wire import JournalKind, RunStatus
from tests.helpers import loop_broker as L
from tests.helpers import openai_agents_support as H
from tests.helpers.harness import admit, chain_of, plain_producer, sessions, wait_ended

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

O2, O3, O4 = (L.call_key("order_status", {"order": o}) for o in ("o-2", "o-3", "o-4"))
DOC = L.call_key("fetch_document", {"document_id": "d-9"})
REFUND = L.call_key("refund", L.REFUND)


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[tuple[L.ToolServer, FakeOpenAIServer, Path]]:
    with L.ToolServer(delay_s=1.5) as tools, FakeOpenAIServer(model=L.model()) as openai:
        tools.slow = {O3, O4}
        config = L.write_tools_config(
            tmp_path / "tools.yaml",
            tools_url=tools.url,
            openai_url=openai.url,
            claude_url=openai.url,
        )
        yield tools, openai, config


def _executor(settings: Settings, n: int, config: Path, logs: Path) -> ExecutorProcess:
    env = {
        "RUNPLANE_AGENT_MODULES": "tests.helpers.openai_agents_broker_served",
        "RUNPLANE_TOOLS_CONFIG": str(config),
        "RUNPLANE_EXECUTOR_BATCH_MS": "5",
    }
    return ExecutorProcess(settings, f"oai{n}", logs, env)


def test_an_sdk_agent_survives_sigkill_repeats_no_recorded_call_and_replays_calling_nobody(
    settings: Settings,
    peers: tuple[L.ToolServer, FakeOpenAIServer, Path],
    tmp_path: Path,
) -> None:
    tools, model, config = peers
    procs: list[ExecutorProcess] = []

    def start() -> ExecutorProcess:
        procs.append(_executor(settings, len(procs), config, tmp_path))
        return procs[-1]

    try:
        a = start()
        [run] = admit(plain_producer(settings), settings, H.BROKER, [{"customer_id": "c-1"}])

        # 1. Mid fan-out: turn 2's other reads answered, its slow one in flight.
        def two_of_three() -> bool:
            return tools.answered[O2] >= 1 and tools.answered[DOC] >= 1 and tools.in_flight[O3] > 0

        _kill_when(a, two_of_three, "turn 2's fan-out half answered")
        asked_at_first_kill = L.turns_asked(model.bodies)

        # 2. After the refund: turn 5's slow read in flight.
        b = start()
        _kill_when(b, lambda: tools.in_flight[O4] > 0, "turn 5's call in flight")
        refunds_at_second_kill = tools.hits[REFUND]

        start()

        wait_ended(
            settings,
            run.run_id,
            timeout_s=150,
            every_s=0.3,
            what="the run to end on the third executor",
        )
    finally:
        for p in procs:
            p.stop()

    snap = sessions(settings)[run.run_id]
    assert snap.status is RunStatus.COMPLETED, snap.error
    assert json.loads(snap.output_json or "null")["answer"] == L.ANSWER
    # The kills landed where they were aimed.
    assert asked_at_first_kill == {0: 1, 1: 1}
    assert refunds_at_second_kill == 1

    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    recorded = [r for r in records if r.kind is JournalKind.EFFECT_RECORDED]
    assert sum(r.family == "generation" for r in recorded) == L.TURNS
    assert sum(r.family == "tool" for r in recorded) == L.CALLS

    # Counted at the tool: only calls whose outcome a kill lost reached it again — the reads
    # in flight (O3, O4) and, at most, the other reads of the wave the first kill cut (its
    # answered branches may not be recorded yet when the kill lands); each at most twice.
    # Every other call once: the mutations (the note, the refund) exactly once.
    hits = dict(tools.hits)
    repeated = {k for k, n in hits.items() if n != 1}
    assert {O3, O4} <= repeated <= {O2, O3, DOC, O4}
    assert max(hits.values()) == 2
    assert hits[REFUND] == 1 and hits[L.call_key("add_note", {"note": "case opened for c-1"})] == 1
    assert len(hits) == L.CALLS
    # No recorded turn asked again, unless a kill left it in doubt (announced, unrecorded).
    gens = sorted({r.call_seq for r in records if r.family == "generation"})
    doubts = Counter(
        r.call_seq
        for r in records
        if r.family == "generation" and r.kind is JournalKind.EFFECT_IN_DOUBT
    )
    assert L.turns_asked(model.bodies) == {t: 1 + doubts[seq] for t, seq in enumerate(gens)}
    # Announce before act: every call that reached a tool was announced first.
    announces = Counter(
        r.name.removeprefix("tool://")
        for r in records
        if r.family == "tool" and r.kind is JournalKind.EFFECT_ANNOUNCED
    )
    performs = Counter(k.split(":", 1)[0] for k, n in hits.items() for _ in range(n))
    assert performs == announces, (dict(performs), dict(announces))

    # A replay of the recorded run, here: the same output, no model asked, no tool reached.
    asked, reached = model.requests, sum(tools.hits.values())
    registry = AgentRegistry()
    H.register(registry, H.BROKER, "openai", "fake-model")
    report = replay_history(registry.spec(H.BROKER), snap, results)
    assert report.divergence is None and report.live_calls == 0
    assert report.status is RunStatus.COMPLETED
    assert report.output == json.loads(snap.output_json or "null")
    assert (model.requests, sum(tools.hits.values())) == (asked, reached)
