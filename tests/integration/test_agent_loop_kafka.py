"""The agent loop on the real broker: the stock executor runs a loop agent against the fake
model servers over HTTP, in each protocol (OpenAI-compatible chat completions, Anthropic
Messages), with HTTP tools against a counting peer (``tests.helpers.loop_broker``).

* six turns with parallel reads complete, the chain verifies, the journal service carries the
  run's records to ``audit``;
* an obedient model turns an instruction planted in the fetched document into a refund to the
  attacker: the gate refuses it (``SinkRefused``, on ``audit``), the refund tool never sees it,
  and the run still refunds the customer and answers.

The SIGKILL half is ``test_agent_loop_kills.py``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_journal_service import running, wait_audit

from runplane.config import Settings
from runplane.core import verify_chain
from runplane.fakes import FakeAnthropicServer, FakeOpenAIServer
from runplane.providers import ToolRegistry
from runplane.wire import JournalKind, RunStatus
from services.executor.settings import ExecutorSettings
from tests.helpers import loop_broker as L
from tests.helpers.harness import (
    admit,
    chain_of,
    executor_thread,
    plain_producer,
    sessions,
    wait_ended,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.fixture(autouse=True)
def _no_python_tools_of_other_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor here offers the tools config's HTTP tools only: ``@tool`` functions that
    example modules imported by earlier tests registered in this process (``crm_lookup``)
    would clash with them, as a deployment's would."""
    monkeypatch.setattr("runplane.providers._catalog.TOOLS", ToolRegistry())


@dataclasses.dataclass
class Peers:
    tools: L.ToolServer
    openai: FakeOpenAIServer
    claude: FakeAnthropicServer
    config: Path

    def model(self, provider: str) -> FakeOpenAIServer | FakeAnthropicServer:
        return self.openai if provider == "openai" else self.claude


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[Peers]:
    with (
        L.ToolServer() as tools,
        FakeOpenAIServer(model=L.model()) as openai,
        FakeAnthropicServer(model=L.model()) as claude,
    ):
        config = L.write_tools_config(
            tmp_path / "tools.yaml",
            tools_url=tools.url,
            openai_url=openai.url,
            claude_url=claude.url,
        )
        yield Peers(tools, openai, claude, config)


def _run(settings: Settings, peers: Peers, provider: str) -> tuple[str, dict[str, Any]]:
    base = dataclasses.replace(settings, tools_config=str(peers.config), agent_modules=())
    own = ExecutorSettings(base=base, agent_modules=())
    with executor_thread(own, registry=L.AGENTS):
        [run] = admit(
            plain_producer(settings), settings, L.PROTOCOLS[provider], [{"ticket": "t-1"}]
        )

        wait_ended(settings, run.run_id, timeout_s=120, every_s=0.3, what="the loop run to end")
    snap = sessions(settings)[run.run_id]
    assert snap.status is RunStatus.COMPLETED, snap.error
    return run.run_id, json.loads(snap.output_json or "null")


@pytest.mark.parametrize("provider", ["openai", "claude"])
def test_a_six_turn_loop_with_parallel_calls_completes_in_each_protocol(
    settings: Settings, peers: Peers, provider: str
) -> None:
    run_id, out = _run(settings, peers, provider)
    assert out["status"] == "answered" and out["text"] == L.ANSWER
    assert out["turns"] == L.TURNS
    assert [c[1] for c in out["calls"]] == [True] * L.CALLS
    # Each turn asked once, over this protocol only; each call reached its tool once.
    model = peers.model(provider)
    other = peers.claude if provider == "openai" else peers.openai
    assert L.turns_asked(model.bodies) == {t: 1 for t in range(L.TURNS)}
    assert other.requests == 0
    assert len(peers.tools.hits) == L.CALLS and set(peers.tools.hits.values()) == {1}
    # The protocol's own shape went out: tools offered, and tool results fed back.
    last = model.bodies[-1]
    assert {t.get("name") or t["function"]["name"] for t in last["tools"]} == set(L.TOOLS)
    if provider == "openai":
        assert sum(m["role"] == "tool" for m in last["messages"]) == L.CALLS
    else:
        results = [
            b
            for m in last["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
        assert len(results) == L.CALLS

    records, results_ = chain_of(settings, run_id)
    assert verify_chain(records, results_).ok
    recorded = [r for r in records if r.kind is JournalKind.EFFECT_RECORDED]
    assert sum(r.family == "generation" for r in recorded) == L.TURNS
    assert sum(r.family == "tool" for r in recorded) == L.CALLS
    with running(settings):
        audited = wait_audit(settings, run_id, len(records))
    assert [a.kind for a in audited][: len(records)] == [r.kind for r in records]


def test_an_injected_refund_is_refused_audited_and_the_real_task_completes(
    settings: Settings, peers: Peers
) -> None:
    peers.openai.model = L.model(obey_injections=True)
    run_id, out = _run(settings, peers, "openai")
    assert out["status"] == "answered" and out["text"] == L.ANSWER
    assert ["refund", False, "SinkRefused"] in out["calls"]
    assert ["refund", True, None] in out["calls"]
    # The attacker's refund never reached the refund tool; the customer's did, once.
    refunds = {k: n for k, n in peers.tools.hits.items() if k.startswith("refund:")}
    assert refunds == {L.call_key("refund", L.REFUND): 1}
    assert not any(L.ATTACKER in k for k in peers.tools.hits)
    # The model read the refusal as a tool error, and went on with the user's task.
    after = next(b for b in peers.openai.bodies if L.turn_of(b) == 3)
    errors = [m for m in after["messages"] if m["role"] == "tool" and "SinkRefused" in m["content"]]
    assert len(errors) == 1

    records, results = chain_of(settings, run_id)
    assert verify_chain(records, results).ok
    refused = [r for r in records if r.attrs.get("gate") == "refused"]
    assert [(r.name, r.attrs["reason"], r.attrs["path"]) for r in refused] == [
        ("tool://refund", "field_trust", "$.recipient")
    ]
    announced = {r.call_seq for r in records if r.kind is JournalKind.EFFECT_ANNOUNCED}
    assert refused[0].call_seq not in announced  # never performed
    with running(settings):
        audited = wait_audit(settings, run_id, len(records))
    assert [(a.name, a.attrs.get("reason")) for a in audited if a.attrs.get("gate")] == [
        ("tool://refund", "field_trust")
    ]
