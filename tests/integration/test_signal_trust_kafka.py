"""Trusted signal senders through the real executor and broker (issue 15 item 1).

The executor binds a deployment policy (``RUNPLANE_POLICY``) that trusts ``pay_to`` signals
from alice for the ``payer`` agent. Two runs wait for where to pay: alice's signal reaches the
mutating ``pay`` tool; mallory's identical one is refused by the sink gate (``SinkRefused``),
and ``pay`` is performed once in all. Both journals verify; alice's signal record names the
policy that trusted it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runplane.config import Settings
from runplane.core import AgentRegistry, AgentSpec, EffectDecl, Recovery, StepCtx, verify_chain
from runplane.core.policy import parse_policy
from runplane.core.releases import SinkRefused
from runplane.providers import FunctionTool
from runplane.runs.client import Client
from runplane.wire import JournalKind, RunStatus
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, chain_of, executor_thread, plain_producer, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

POLICY = """
sinks:
  "tool://pay": {mutating: true}
agents:
  payer:
    trusted_signals:
      - {name: pay_to, sender: alice}
"""


async def payer(ctx: StepCtx, input: dict[str, Any]) -> Any:
    to = await ctx.wait_signal("pay_to")
    try:
        return await ctx.tool("pay", {"to": to, "amount": input["amount"]})
    except SinkRefused as exc:
        return {"refused": exc.type}


def _status(settings: Settings, run_id: str) -> RunStatus | None:
    snap = sessions(settings).get(run_id)
    return None if snap is None else snap.status


def test_only_a_trusted_senders_signal_reaches_a_mutating_tool(
    settings: Settings, tmp_path: Path
) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(POLICY)
    paid: list[str] = []

    def pay(to: str, amount: int) -> dict[str, Any]:
        paid.append(to)
        return {"paid": to, "amount": amount}

    tool = FunctionTool("pay", pay, decl=EffectDecl("pay", mutating=True, recovery=Recovery.RETRY))
    registry = AgentRegistry()
    registry.register(AgentSpec("payer", payer, tools=frozenset({"pay"})), lint=False)
    own = ExecutorSettings(base=settings, agent_modules=(), policy_path=str(policy_file))
    producer = plain_producer(settings)
    with executor_thread(own, tools={"pay": tool}, registry=registry), Client(settings) as client:
        trusted, untrusted = admit(
            producer, settings, "payer", [{"amount": 5}, {"amount": 7}], tenant="acme"
        )
        ids = (trusted.run_id, untrusted.run_id)
        wait_for(lambda: all(_status(settings, i) is RunStatus.PARKED for i in ids), timeout_s=60)
        client.signal(trusted.run_id, "pay_to", "acct-42", sent_by="alice", tenant="acme")
        client.signal(untrusted.run_id, "pay_to", "acct-42", sent_by="mallory", tenant="acme")
        wait_for(
            lambda: all(_status(settings, i) is RunStatus.COMPLETED for i in ids), timeout_s=60
        )

    rows = sessions(settings)
    assert json.loads(rows[trusted.run_id].output_json or "null") == {
        "paid": "acct-42",
        "amount": 5,
    }
    assert json.loads(rows[untrusted.run_id].output_json or "null") == {"refused": "SinkRefused"}
    assert paid == ["acct-42"]
    digest = parse_policy(POLICY).digest
    for run, trusted_by in ((trusted, digest), (untrusted, None)):
        records, results = chain_of(settings, run.run_id)
        assert verify_chain(records, results).ok
        [received] = [r for r in records if r.kind is JournalKind.SIGNAL_RECEIVED]
        assert received.attrs.get("trusted_by") == trusted_by
        assert received.attrs["sent_by"] in ("alice", "mallory")
