"""Generations through the OpenAI-compatible provider (against the loopback fake), and the
promise that makes replayable runs worth it: an evicted run rebuilt by replay is served its
generation from the result journal — the model is not asked (or billed) again."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from typer.testing import CliRunner

from runplane.cli import app
from runplane.config import Settings
from runplane.core import AgentRegistry, StepCtx, verify_chain
from runplane.fakes import FakeOpenAIServer
from runplane.wire import JournalKind, RunStatus, Signal
from services.executor.settings import ExecutorSettings
from tests.helpers.harness import admit, chain_of, executor_thread, plain_producer, send, sessions
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

AGENTS = AgentRegistry()


@AGENTS.agent("summarise", durability="replayable")
async def summarise(ctx: StepCtx, input: dict[str, Any]) -> dict[str, Any]:
    gen = await ctx.generate("openai", "default", f"summarise {input['doc']}", max_tokens=20)
    go = await ctx.wait_signal("publish")
    return {"summary": gen.text, "tokens": gen.tokens_out, "channel": go["channel"]}


def _status(settings: Settings, run_id: str) -> RunStatus | None:
    snap = sessions(settings).get(run_id)
    return None if snap is None else snap.status


def test_generation_is_not_repaid_after_eviction(settings: Settings) -> None:
    with FakeOpenAIServer(api_key="sk-test", replies=["a short summary"]) as model:
        own = ExecutorSettings(
            base=settings,
            openai_base_url=model.url,
            openai_api_key="sk-test",
            openai_model="fake-model",
            idle_grace_s=0.5,
            agent_modules=(),
        )
        producer = plain_producer(settings)
        with executor_thread(own, registry=AGENTS) as executor:
            [run] = admit(producer, settings, "summarise", [{"doc": "the quarterly report"}])
            wait_for(
                lambda: _status(settings, run.run_id) is RunStatus.PARKED,
                timeout_s=60,
                what="park on signal",
            )
            wait_for(
                lambda: run.run_id not in executor.resident_sessions, timeout_s=10, what="eviction"
            )
            send(
                producer,
                settings,
                "runs.inbox",
                run.run_id,
                Signal(
                    session_id=run.run_id,
                    name="publish",
                    payload_json=json.dumps({"channel": "email"}),
                    sent_ms=int(time.time() * 1000),
                ),
            )
            wait_for(
                lambda: _status(settings, run.run_id) is RunStatus.COMPLETED,
                timeout_s=60,
                what="completion",
            )
        assert model.requests == 1  # the replay served the recorded generation
        assert model.bodies[0]["model"] == "fake-model"
        assert model.bodies[0]["max_tokens"] == 20

    output = json.loads(sessions(settings)[run.run_id].output_json or "null")
    assert output == {"summary": "a short summary", "tokens": 3, "channel": "email"}
    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    [gen] = [
        r for r in records if r.kind is JournalKind.EFFECT_RECORDED and r.family == "generation"
    ]
    assert gen.name == "model:openai/default"
    assert gen.cost is not None and (gen.cost.tokens_in, gen.cost.tokens_out) == (4, 3)


def _generation_kinds(settings: Settings, run_id: str) -> list[JournalKind]:
    records, _ = chain_of(settings, run_id)
    return [r.kind for r in records if r.family == "generation"]


def test_a_crash_mid_generation_leaves_the_intention_on_the_journal(settings: Settings) -> None:
    """Announce before act: the generation's announce is committed before the request leaves,
    so an executor gone mid-call leaves the intention for ``runplane journal show``; the next
    owner finds it in doubt, retries (a generation may be repeated) and records the cost."""
    with FakeOpenAIServer(api_key="sk-test", replies=["lost", "kept"], delay_s=12) as model:
        own = ExecutorSettings(
            base=settings,
            openai_base_url=model.url,
            openai_api_key="sk-test",
            openai_model="fake-model",
            agent_modules=(),
        )
        producer = plain_producer(settings)
        with executor_thread(own, registry=AGENTS):
            [run] = admit(producer, settings, "summarise", [{"doc": "the report"}])
            wait_for(lambda: model.requests == 1, timeout_s=60, what="the call in flight")
            # The request has left: its announce is already durable.
            assert _generation_kinds(settings, run.run_id) == [JournalKind.EFFECT_ANNOUNCED]
        # The executor stopped mid-call (the model answers after its 5 s grace); how many
        # attempts it made live is its own (the client's timeout may have retried once).
        lost = model.requests
        env = {
            "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
            "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        }
        shown = CliRunner().invoke(app, ["journal", "show", run.run_id, "--json"], env=env)
        assert shown.exit_code == 0, shown.output
        rows = [(r["kind"], r["family"]) for r in json.loads(shown.output)["records"]]
        assert ("EFFECT_ANNOUNCED", "generation") in rows
        assert ("EFFECT_RECORDED", "generation") not in rows
        # A mistyped id is not a broken chain (a reader must tell the two apart).
        missing = CliRunner().invoke(app, ["journal", "verify", run.run_id + "x"], env=env)
        assert missing.exit_code == 2 and "no such run" in missing.output
        untreed = CliRunner().invoke(app, ["runs", "tree", run.run_id + "x"], env=env)
        assert untreed.exit_code == 2 and "no such run" in untreed.output

        model.delay_s = 0
        with executor_thread(own, registry=AGENTS):
            wait_for(
                lambda: _status(settings, run.run_id) is RunStatus.PARKED,
                timeout_s=60,
                what="the retried generation recorded",
            )
        assert model.requests == lost + 1  # the retry: one call, recorded with its cost
    records, results = chain_of(settings, run.run_id)
    assert verify_chain(records, results).ok
    gen = [r for r in records if r.family == "generation"]
    assert [r.kind for r in gen] == [
        JournalKind.EFFECT_ANNOUNCED,
        JournalKind.EFFECT_IN_DOUBT,
        JournalKind.EFFECT_RECORDED,
    ]
    assert gen[1].attrs["recovery"] == "retry"
    assert gen[2].cost is not None and gen[2].cost.tokens_out > 0
